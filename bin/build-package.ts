import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { compiledHandler, HUB_HANDLERS } from "../lib/infra/hub-handlers";

/**
 * `npm run build` (and `npm pack`, through `prepack`): the package's entry points as compiled
 * JavaScript in `dist/`, with their type declarations in `dist/types/`, so that a consumer imports
 * them with no TypeScript loader. Each entry point is an ES module bundle of the hub's code, its
 * npm dependencies left as imports; code two entry points share is one chunk (`splitting`), so a
 * class (an error a role throws, a port's twin) is one class whichever entry point it came
 * through. The declarations are tsc's, one file per source file (tsconfig.build.json), their
 * relative imports given the extension Node's own resolution needs (`NodeNext`, what an ES module
 * application type-checks with): tsc keeps the sources' extensionless specifiers, which NodeNext
 * does not resolve in a declaration file, and every type through them would be `any`.
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
  zod: "schemas/zod.ts",
} as const;

/**
 * Entry points built on their own, not split into the shared chunks: `zod` re-exports all of
 * zod/mini (an outside package, whose names esbuild cannot list when it splits), and an
 * application imports it as a namespace, of which its bundler keeps what it uses.
 */
const UNSPLIT: ReadonlySet<string> = new Set(["zod"]);

async function main(): Promise<void> {
  rmSync(DIST, { recursive: true, force: true });
  await build({
    absWorkingDir: ROOT,
    entryPoints: {
      ...Object.fromEntries(
        Object.entries(ENTRY_POINTS)
          .filter(([name]) => !UNSPLIT.has(name))
          .map(([name, file]) => [name, join(ROOT, file)]),
      ),
      // The operator CLI (`npx agentbus`), which runs from here in an installed package.
      cli: join(ROOT, "bin", "agentbus-cli.ts"),
      // The hub's own functions, which the local runtime runs from here in an installed package.
      ...Object.fromEntries(
        Object.values(HUB_HANDLERS).map((entry) => [
          relative("dist", compiledHandler(entry)).replace(/\.js$/, ""),
          join(ROOT, entry),
        ]),
      ),
    },
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
  for (const name of UNSPLIT)
    await build({
      absWorkingDir: ROOT,
      entryPoints: { [name]: join(ROOT, ENTRY_POINTS[name as keyof typeof ENTRY_POINTS]) },
      outdir: DIST,
      bundle: true,
      format: "esm",
      platform: "node",
      target: "node20",
      packages: "external",
      logLevel: "warning",
    });
  execFileSync(join(ROOT, "node_modules", ".bin", "tsc"), ["-p", "tsconfig.build.json"], {
    cwd: ROOT,
    stdio: "inherit",
  });
  for (const file of declarationFiles(join(DIST, "types"))) {
    const text = readFileSync(file, "utf8");
    const resolved = text.replace(RELATIVE_SPECIFIER, (whole, quote: string, specifier: string) => {
      const target = nodeSpecifier(dirname(file), specifier);
      return target
        ? whole.replace(`${quote}${specifier}${quote}`, `${quote}${target}${quote}`)
        : whole;
    });
    if (resolved !== text) writeFileSync(file, resolved);
  }
  process.stdout.write(`built ${Object.keys(ENTRY_POINTS).join(", ")} in ${DIST}\n`);
}

/** A relative module specifier of an import, export or `import()` type (quote, specifier). */
const RELATIVE_SPECIFIER = /(?:from\s+|import\s*\(\s*)(["'])(\.{1,2}\/[^"']*)\1/g;

/** Every declaration file under `dir`. */
function declarationFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(".d.ts"))
    .map((entry) => join(entry.parentPath, entry.name));
}

/**
 * The specifier as NodeNext resolves it from a declaration file in `dir`: `./x` becomes `./x.js`
 * (declared by x.d.ts) or `./x/index.js`; undefined when it has its extension already, or names
 * neither (a JSON file, say), and is left as it is.
 */
function nodeSpecifier(dir: string, specifier: string): string | undefined {
  if (/\.(js|mjs|cjs|json)$/.test(specifier)) return undefined;
  if (existsSync(join(dir, `${specifier}.d.ts`))) return `${specifier}.js`;
  if (existsSync(join(dir, specifier, "index.d.ts"))) return `${specifier}/index.js`;
  return undefined;
}

await main();
