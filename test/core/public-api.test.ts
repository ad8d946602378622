import { execFile } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { copyFile, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/**
 * The reference applications are written as a team outside the hub writes its own: with the
 * public entry points only (`agentbus` = functions/kit.ts, `agentbus/lambda` = functions/lambda.ts
 * for handlers and adapters, `agentbus/cdk` = lib/cdk.ts for an integration's infrastructure,
 * `agentbus/testing` = lib/testing.ts for their tests, `agentbus/zod` = schemas/zod.ts for their
 * schemas) and their own application's files, event types included. So each is an example of the
 * public API, and the API is whatever they need.
 *
 * Biome checks it (`npx biome check .`): the GritQL plugin public-api.grit, which biome.json runs
 * on the applications' folders. What the rule cannot say of itself is tested here: that the
 * folders it is given exist, and that it refuses and allows what it should (a rule that matches
 * nothing passes every tree), on files written for the test beside a copy of the configuration.
 */

const ROOT = join(import.meta.dirname, "..", "..");
const PLUGIN = "./public-api.grit";
const BIOME = join(ROOT, "node_modules", ".bin", "biome");

/** The folders biome.json runs the plugin on: the reference applications'. */
function applicationFolders(): string[] {
  const config = JSON.parse(readFileSync(join(ROOT, "biome.json"), "utf8")) as {
    overrides?: { includes?: string[]; plugins?: string[] }[];
  };
  return (config.overrides ?? [])
    .filter((override) => override.plugins?.includes(PLUGIN))
    .flatMap((override) => override.includes ?? [])
    .map((glob) => glob.replace(/\/\*\*$/, ""));
}

/** A module a file of an application imports, and what refuses it (none: it may). */
interface Probe {
  readonly file: string;
  readonly imports: string;
  readonly refused?: RegExp;
}

const NOT_PUBLIC = /Not a public entry point/;

const PROBES: readonly Probe[] = [
  {
    file: "functions/roles/refund-review/tools.ts",
    imports: "functions/core/errors",
    refused: NOT_PUBLIC,
  },
  { file: "functions/roles/refund-review/tools.ts", imports: "functions/kit" },
  { file: "functions/roles/refund-review/tools.ts", imports: "schemas/zod" },
  // Its event types are its own: the hub's schemas/ is not an entry point.
  {
    file: "functions/roles/refund-review/tools.ts",
    imports: "schemas/events/task",
    refused: NOT_PUBLIC,
  },
  // Customer support is one application in two folders; the content agents are another.
  {
    file: "functions/roles/refund-review/tools.ts",
    imports: "functions/roles/customer-support/events/conversation",
  },
  {
    file: "functions/roles/content-agents/ids.ts",
    imports: "functions/roles/refund-review/events",
    refused: NOT_PUBLIC,
  },
  {
    file: "functions/roles/refund-review/tools.ts",
    imports: "functions/lambda",
    refused: /handler\.ts/,
  },
  { file: "functions/roles/content-agents/handler.ts", imports: "functions/lambda" },
  {
    file: "functions/roles/customer-support/integrations/orders/aws.ts",
    imports: "functions/lambda",
  },
  {
    file: "functions/roles/customer-support/integrations/orders/port.ts",
    imports: "functions/lambda",
    refused: /handler\.ts/,
  },
  {
    file: "functions/roles/customer-support/integrations/orders/aws.ts",
    imports: "lib/cdk",
    refused: /infra\.ts/,
  },
  { file: "functions/roles/customer-support/integrations/orders/infra.ts", imports: "lib/cdk" },
  {
    file: "functions/roles/customer-support/integrations/orders/infra.ts",
    imports: "lib/infra/retention",
    refused: NOT_PUBLIC,
  },
  { file: "test/fixtures/bookkeeping/stack.ts", imports: "lib/cdk" },
  { file: "test/fixtures/bookkeeping/clerk/clerk.test.ts", imports: "lib/testing" },
  { file: "test/fixtures/bookkeeping/clerk/index.ts", imports: "lib/testing", refused: /tests/ },
  {
    file: "test/fixtures/bookkeeping/clerk/index.ts",
    imports: "functions/core/errors",
    refused: NOT_PUBLIC,
  },
];

/** Where probe `i` is written: in a folder of its own inside its application's. */
function probePath(probe: Probe, i: number, folders: readonly string[]): string {
  const folder = folders.find((f) => probe.file.startsWith(`${f}/`));
  if (!folder) throw new Error(`${probe.file} is in none of the applications' folders`);
  return join(folder, `probe-${i}`, relative(folder, probe.file));
}

interface Diagnostic {
  readonly category: string;
  readonly message: string;
  readonly location: { readonly path: string };
}

/** Biome's plugin diagnostics on the probes, by file, with the repository's configuration. */
async function lintProbes(dir: string, folders: readonly string[]): Promise<Map<string, string[]>> {
  await copyFile(join(ROOT, "biome.json"), join(dir, "biome.json"));
  await copyFile(join(ROOT, PLUGIN), join(dir, PLUGIN));
  for (const [i, probe] of PROBES.entries()) {
    const path = probePath(probe, i, folders);
    const specifier = relative(dirname(path), probe.imports);
    await mkdir(join(dir, dirname(path)), { recursive: true });
    await writeFile(join(dir, path), `export * from "${specifier}";\n`);
  }
  // Biome exits non-zero when it finds anything: the report is read either way.
  const { stdout } = await promisify(execFile)(
    BIOME,
    ["lint", "--vcs-enabled=false", "--reporter=json", "."],
    { cwd: dir },
  ).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? "" }));
  const report = JSON.parse(stdout) as { diagnostics: Diagnostic[] };
  const found = new Map<string, string[]>();
  for (const d of report.diagnostics.filter((d) => d.category === "plugin"))
    found.set(d.location.path, [...(found.get(d.location.path) ?? []), d.message]);
  return found;
}

describe("the reference applications use the public entry points only", () => {
  const folders = applicationFolders();
  let dir = "";
  let found = new Map<string, string[]>();

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "agentbus-public-api-"));
    found = await lintProbes(dir, folders);
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it("biome.json gives the plugin every application's folder, and each holds TypeScript", () => {
    expect(folders.length).toBeGreaterThan(0);
    for (const folder of folders) {
      const files = readdirSync(join(ROOT, folder), { recursive: true }) as string[];
      expect(files.filter((f) => f.endsWith(".ts")).length, folder).toBeGreaterThan(0);
      expect(
        PROBES.some((p) => p.file.startsWith(`${folder}/`)),
        `a probe in ${folder}`,
      ).toBe(true);
    }
  });

  for (const [i, probe] of PROBES.entries()) {
    const verdict = probe.refused ? "refuses" : "allows";
    it(`${verdict} ${probe.imports} in ${probe.file}`, () => {
      const messages = found.get(probePath(probe, i, folders)) ?? [];
      if (!probe.refused) expect(messages).toEqual([]);
      else {
        expect(messages).toHaveLength(1);
        expect(messages[0]).toMatch(probe.refused);
      }
    });
  }
});
