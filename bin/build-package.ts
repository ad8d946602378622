import { execFileSync } from "node:child_process";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

/**
 * `npm run build` (and `npm pack`, through `prepack`): the package's entry points as compiled
 * JavaScript in `dist/`, with their type declarations in `dist/types/`, so that a consumer imports
 * them with no TypeScript loader. Each entry point is an ES module bundle of the hub's code, its
 * npm dependencies left as imports; code two entry points share is one chunk (`splitting`), so a
 * class (an error a role throws, a port's twin) is one class whichever entry point it came
 * through. The declarations are tsc's, one file per source file (tsconfig.build.json).
 */

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const DIST = join(ROOT, "dist");

/** Each entry point of package.json's `exports`, by its file name in `dist/`. */
export const ENTRY_POINTS = {
  kit: "functions/kit.ts",
  lambda: "functions/lambda.ts",
  cdk: "lib/cdk.ts",
  testing: "lib/testing.ts",
  local: "lib/local.ts",
} as const;

async function main(): Promise<void> {
  rmSync(DIST, { recursive: true, force: true });
  await build({
    absWorkingDir: ROOT,
    entryPoints: Object.fromEntries(
      Object.entries(ENTRY_POINTS).map(([name, file]) => [name, join(ROOT, file)]),
    ),
    outdir: DIST,
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node20",
    packages: "external",
    chunkNames: "chunks/[name]-[hash]",
    logLevel: "warning",
  });
  execFileSync(join(ROOT, "node_modules", ".bin", "tsc"), ["-p", "tsconfig.build.json"], {
    cwd: ROOT,
    stdio: "inherit",
  });
  process.stdout.write(`built ${Object.keys(ENTRY_POINTS).join(", ")} in ${DIST}\n`);
}

await main();
