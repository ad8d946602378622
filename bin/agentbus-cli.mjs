#!/usr/bin/env node
// The `agentbus` command (package.json "bin"): runs the operator CLI, compiled where the package is
// installed, else bin/agentbus-cli.ts with tsx taken from this checkout's own node_modules and its
// own tsconfig, so it works from any directory and without tsx on PATH (bin/README.md).
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

// Installed as a package (under node_modules), the CLI runs compiled (dist/cli.js, npm run build);
// in its own checkout, from its sources, so that it is never a stale build.
const compiled = new URL("../dist/cli.js", import.meta.url);
if (
  fileURLToPath(import.meta.url)
    .split(/[\\/]/)
    .includes("node_modules") &&
  existsSync(compiled)
) {
  await import(compiled.href);
} else {
  await runSources();
}

async function runSources() {
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
}
