import { moduleEntry } from "../../../lambda";
import { routerModule } from "./index";

export const { create, handler } = moduleEntry(routerModule);
