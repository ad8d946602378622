import { defineModule } from "../../core/role-module";
import { handlerBeside } from "../../kit";
import { audit } from "./audit";

/** The audit group: every message whole, unordered (its own record per message). */
export const auditModule = defineModule({
  descriptor: audit,
  entry: handlerBeside(import.meta.url),
  deployment: { ordering: "none" },
  build: () => audit,
});
