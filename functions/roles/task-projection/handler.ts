import { moduleEntry } from "../../handlers/module-entry";
import { taskProjectionModule } from "./index";

export const { create, handler } = moduleEntry(taskProjectionModule);
