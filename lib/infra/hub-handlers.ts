import { join } from "node:path";
import { ORCHESTRATOR_ENTRY } from "../../functions/roles/orchestrator/index";
import { PACKAGE_ROOT } from "./package-root";

/**
 * The handler entries of the hub's own functions (every function besides a group's consumer, and
 * the orchestrator's consumer, which a stack given workflows adds: lib/infra/agentbus.ts), by
 * the function's kind, relative to the package root. The stack bundles them from these sources;
 * the package also ships each compiled to `dist/` (bin/build-package.ts), which is what the local
 * runtime runs where AgentBus is installed and Node.js has no TypeScript loader.
 */
export const HUB_HANDLERS = {
  relay: "functions/handlers/relay.ts",
  dispatch: "functions/handlers/dispatch.ts",
  sweeper: "functions/handlers/sweeper.ts",
  "front-door": "functions/handlers/front-door.ts",
  "front-door-stream": "functions/handlers/front-door-stream.ts",
  "a2a-push": "functions/handlers/a2a-push.ts",
  orchestrator: ORCHESTRATOR_ENTRY,
} as const;

/** Where the package keeps the compiled form of a hub handler entry: `dist/<entry>.js`. */
export function compiledHandler(entry: string): string {
  return join("dist", entry.replace(/\.ts$/, ".js"));
}

/**
 * Whether this AgentBus is an installed package (under `node_modules`) rather than its own
 * checkout: installed, the hub's handlers run from their compiled forms.
 */
export const INSTALLED = PACKAGE_ROOT.split(/[\\/]/).includes("node_modules");
