import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * The root of the AgentBus package: the checkout, or `node_modules/agentbus` where it is
 * installed. Its code runs there from `dist/`, bundled, so a path taken relative to a source file
 * would miss: the root is the nearest folder above whose package.json is AgentBus's. Handler
 * entries and the files the local runtime runs are relative to it.
 */
export const PACKAGE_ROOT = packageRootAbove(fileURLToPath(import.meta.url));

export function packageRootAbove(file: string): string {
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    const manifest = join(dir, "package.json");
    if (existsSync(manifest) && isAgentBus(manifest)) return dir;
    if (dirname(dir) === dir) throw new Error(`no AgentBus package.json above ${file}`);
  }
}

function isAgentBus(manifest: string): boolean {
  return (JSON.parse(readFileSync(manifest, "utf8")) as { name?: unknown }).name === "agentbus";
}
