import { moduleEntry } from "../../handlers/module-entry";
import { auditModule } from "./module";

export const { create, handler } = moduleEntry(auditModule);
