import { defineModule } from "../../core/role-module";
import { audit } from "./audit";

/** The audit group: every message whole, unordered (its own record per message). */
export const auditModule = defineModule({
  descriptor: audit,
  entry: "functions/roles/audit/handler.ts",
  deployment: { ordering: "none" },
  build: () => audit,
});
