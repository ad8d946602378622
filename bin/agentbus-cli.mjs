#!/usr/bin/env node
// The `agentbus` command (package.json "bin"): runs the operator CLI, bin/agentbus-cli.ts, with
// tsx taken from this project's own node_modules and its own tsconfig, so it works from any
// directory and without tsx on PATH. Why a launcher rather than a prebuilt file: bin/README.md.
import { fileURLToPath } from "node:url";

let tsx;
try {
  tsx = await import("tsx/esm/api");
} catch (error) {
  if (error?.code !== "ERR_MODULE_NOT_FOUND") throw error;
  process.stderr.write(
    `agentbus: tsx is not installed beside ${fileURLToPath(new URL("..", import.meta.url))}: run npm ci there (the CLI runs its TypeScript through the project's tsx)\n`,
  );
  process.exit(1);
}
tsx.register({ tsconfig: fileURLToPath(new URL("../tsconfig.json", import.meta.url)) });
await import("./agentbus-cli");
