import { moduleEntry } from "../../../lambda";
import { routerModule } from "./module";

export const { create, handler } = moduleEntry(routerModule);
