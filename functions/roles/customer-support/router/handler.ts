import { moduleEntry } from "../../../handlers/module-entry";
import { routerModule } from "./module";

export const { create, handler } = moduleEntry(routerModule);
