import { moduleEntry } from "../../handlers/module-entry";
import { taskProjectionModule } from "./module";

export const { create, handler } = moduleEntry(taskProjectionModule);
