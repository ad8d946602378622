import { moduleEntry } from "../../handlers/module-entry";
import { auditModule } from "./index";

export const { create, handler } = moduleEntry(auditModule);
