#!/usr/bin/env node
// The `agentbus` command (package.json "bin"): runs the operator CLI, bin/agentbus-cli.ts, with
// tsx taken from this project's own node_modules and its own tsconfig, so it works from any
// directory and without tsx on PATH. Why a launcher rather than a prebuilt file: bin/README.md.
import { fileURLToPath } from "node:url";
import { register } from "tsx/esm/api";

register({ tsconfig: fileURLToPath(new URL("../tsconfig.json", import.meta.url)) });
await import("./agentbus-cli.ts");
