import { moduleEntry } from "../../handlers/module-entry";
import { orchestratorModule } from "./module";

export const { create, handler } = moduleEntry(orchestratorModule);
