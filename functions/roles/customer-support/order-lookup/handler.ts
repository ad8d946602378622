import { moduleEntry } from "../../../handlers/module-entry";
import { orderLookupModule } from "./module";

export const { create, handler } = moduleEntry(orderLookupModule);
