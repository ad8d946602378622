import { execFileSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SLOW_STEP_TIMEOUT_MS } from "../support/timeouts";

/**
 * AgentBus as a team gets it, and "Your first role" (functions/roles/README.md) followed as
 * written: the hub `npm pack`ed (which builds it: `prepack`), an application written from the
 * README's `<!-- app:<path> -->` blocks into a new directory outside the repository, the tarball
 * unpacked into its node_modules beside links to the dependencies this checkout installed (no
 * registry, no network: what `npm install` would give it), and the README's commands run there with
 * plain Node.js: the application type-checks against the package's declarations and compiles,
 * its tests pass in memory and on the local stack (moto) through a crash and a redelivery, and its
 * CDK app synthesizes with cdk-nag's checks on and its functions bundled from its own root.
 */

const ROOT = join(import.meta.dirname, "..", "..");
const NODE_MODULES = join(ROOT, "node_modules");
const WALKTHROUGH = readFileSync(join(ROOT, "functions", "roles", "README.md"), "utf8");
/** npm run offline and quiet: nothing it does here may reach the network. */
const NPM_ENV = {
  ...process.env,
  npm_config_offline: "true",
  npm_config_update_notifier: "false",
  npm_config_audit: "false",
  npm_config_fund: "false",
};

let work: string;
let app: string;
let tarball: string;

/** The walk-through's files: each `<!-- app:<path> -->` block, by path. */
function applicationFiles(): Map<string, string> {
  const files = new Map<string, string>();
  for (const match of WALKTHROUGH.matchAll(/<!-- app:(\S+) -->\s*```\w*\n([\s\S]*?)```/g))
    files.set(match[1] as string, match[2] as string);
  return files;
}

/**
 * Link every package this checkout installed into `modules` (scoped ones one by one), and its
 * commands into `modules/.bin` with the package's own (`agentbus`), as `npm install` makes them.
 */
function linkDependencies(modules: string): void {
  for (const entry of readdirSync(NODE_MODULES)) {
    // No TypeScript loader: the application runs compiled JavaScript only, the package's too.
    if (entry.startsWith(".") || entry === "agentbus" || entry === "tsx") continue;
    if (!entry.startsWith("@")) {
      symlinkSync(join(NODE_MODULES, entry), join(modules, entry));
      continue;
    }
    mkdirSync(join(modules, entry), { recursive: true });
    for (const scoped of readdirSync(join(NODE_MODULES, entry)))
      symlinkSync(join(NODE_MODULES, entry, scoped), join(modules, entry, scoped));
  }
  const bin = join(modules, ".bin");
  mkdirSync(bin);
  for (const command of readdirSync(join(NODE_MODULES, ".bin")))
    if (command !== "tsx")
      symlinkSync(realpathSync(join(NODE_MODULES, ".bin", command)), join(bin, command));
  symlinkSync(join("..", "agentbus", "bin", "agentbus-cli.mjs"), join(bin, "agentbus"));
}

/** Run a command; its output, or an error that carries what it printed. */
function run(
  command: string,
  args: readonly string[],
  cwd: string,
  env: NodeJS.ProcessEnv = NPM_ENV,
): string {
  try {
    return execFileSync(command, args, { cwd, env, encoding: "utf8", stdio: "pipe" });
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    throw new Error(`${command} ${args.join(" ")} failed:\n${stdout ?? ""}\n${stderr ?? ""}`);
  }
}

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), "agentbus-package-"));
  run("npm", ["pack", "--pack-destination", work], ROOT);
  tarball = join(work, readdirSync(work).find((f) => f.endsWith(".tgz")) ?? "no tarball");
  app = join(work, "my-ledger");
  for (const [path, text] of applicationFiles()) {
    mkdirSync(dirname(join(app, path)), { recursive: true });
    writeFileSync(join(app, path), text);
  }
  const modules = join(app, "node_modules");
  mkdirSync(join(modules, "agentbus"), { recursive: true });
  run("tar", ["-xzf", tarball, "-C", join(modules, "agentbus"), "--strip-components=1"], work);
  linkDependencies(modules);
  // `npm install` writes a lock file; the functions are bundled from the folder that has it.
  const lock = { name: "my-ledger", lockfileVersion: 3, requires: true, packages: {} };
  writeFileSync(join(app, "package-lock.json"), JSON.stringify(lock));
}, SLOW_STEP_TIMEOUT_MS);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("the package, installed in an application outside the repository", () => {
  it("is public, with an entry point per part of the kit, compiled with its declarations", () => {
    const manifest = JSON.parse(
      readFileSync(join(app, "node_modules", "agentbus", "package.json"), "utf8"),
    ) as { private?: boolean; exports: Record<string, { types: string; import: string }> };
    expect(manifest.private).toBeUndefined();
    expect(Object.keys(manifest.exports)).toEqual([
      ".",
      "./lambda",
      "./cdk",
      "./testing",
      "./local",
      "./zod",
      "./package.json",
    ]);
    const files = run("tar", ["-tzf", tarball], work).split("\n");
    for (const name of ["kit", "lambda", "cdk", "testing", "local", "zod"])
      expect(files).toContain(`package/dist/${name}.js`);
    expect(files).toContain("package/dist/types/functions/kit.d.ts");
    expect(files.filter((f) => f.startsWith("package/test/"))).toEqual([]);
  });

  it(
    "every entry point loads in plain Node.js, with no TypeScript loader",
    () => {
      const script = `for (const entry of ["agentbus", "agentbus/lambda", "agentbus/cdk", "agentbus/testing", "agentbus/local", "agentbus/zod"]) { const m = await import(entry); if (Object.keys(m).length === 0) throw new Error(entry + " exports nothing"); } console.log("loaded");`;
      expect(run(process.execPath, ["--input-type=module", "-e", script], app).trim()).toBe(
        "loaded",
      );
    },
    SLOW_STEP_TIMEOUT_MS,
  );

  it(
    "the operator CLI runs compiled",
    () => {
      const cli = join(app, "node_modules", "agentbus", "bin", "agentbus-cli.mjs");
      const help = run(process.execPath, [cli, "--help"], app);
      for (const command of ["trace", "status", "dlq", "console"]) expect(help).toContain(command);
    },
    SLOW_STEP_TIMEOUT_MS,
  );

  it(
    "the walk-through's application type-checks against its declarations and compiles",
    () => {
      expect([...applicationFiles().keys()]).toContain("src/bookkeeper/local.test.ts");
      run("npm", ["run", "build"], app);
      for (const compiled of [
        "app.js",
        "bookkeeper/handler.js",
        "ledger/aws.js",
        "ledger-check/handler.js",
      ])
        expect(existsSync(join(app, "build", compiled)), compiled).toBe(true);
    },
    SLOW_STEP_TIMEOUT_MS,
  );

  it(
    "its tests pass: in memory, and on the local stack through a crash just after the post, traced by the operator CLI, and its workflow run on the hub's orchestrator",
    () => {
      const report = run("npm", ["test"], app);
      expect(report).toMatch(/# pass 5\b/);
      expect(report).toMatch(/# fail 0\b/);
    },
    SLOW_STEP_TIMEOUT_MS,
  );

  it(
    "its CDK app synthesizes with cdk-nag's checks clean, its functions bundled from its own root",
    () => {
      const outdir = join(work, "cdk.out");
      run(process.execPath, ["build/app.js"], app, { ...NPM_ENV, CDK_OUTDIR: outdir });
      const report = JSON.parse(readFileSync(join(outdir, "validation-report.json"), "utf8")) as {
        pluginReports?: { pluginName: string; violations?: { ruleName: string }[] }[];
      };
      const nag = report.pluginReports?.find((p) => p.pluginName === "AwsSolutions");
      expect(nag?.violations?.map((v) => v.ruleName) ?? []).toEqual([]);
      const template = JSON.parse(
        readFileSync(join(outdir, "AgentBus-dev.template.json"), "utf8"),
      ) as { Resources: Record<string, { Type: string; Properties?: Record<string, unknown> }> };
      const functions = Object.values(template.Resources).filter(
        (r) => r.Type === "AWS::Lambda::Function",
      );
      const bookkeeper = functions.find((f) =>
        JSON.stringify(f.Properties?.Environment).includes("LEDGER_TABLE"),
      );
      expect(bookkeeper, "the bookkeeper's function, with the ledger's table").toBeDefined();
      // Its workflow reaches the orchestrator the stack added, bundled from the package's source.
      const orchestrator = functions.find((f) =>
        JSON.stringify(f.Properties?.Environment).includes("refund-audit"),
      );
      expect(JSON.stringify(orchestrator?.Properties?.Environment)).toContain("WORKFLOWS");
      // Its schemas are written with agentbus/zod, of which the bundle keeps what it uses: zod's
      // messages in English, none of its other locales (Indonesian's "Input tidak valid" here).
      const hash = /([0-9a-f]{64})\.zip/.exec(JSON.stringify(bookkeeper?.Properties?.Code))?.[1];
      const bundle = readFileSync(join(outdir, `asset.${hash}`, "index.mjs"), "utf8");
      expect(bundle).toContain("Invalid input");
      expect(bundle).not.toContain("Input tidak valid");
      // Bundled: each function's code is an asset directory holding its one bundle (functions
      // with the same code, the groups' dispatch functions, share one).
      const hashes = functions.map(
        (f) => /([0-9a-f]{64})\.zip/.exec(JSON.stringify(f.Properties?.Code))?.[1],
      );
      expect(hashes.filter((h) => h === undefined).length).toBeLessThanOrEqual(1);
      for (const hash of new Set(hashes))
        if (hash) expect(readdirSync(join(outdir, `asset.${hash}`))).toContain("index.mjs");
    },
    SLOW_STEP_TIMEOUT_MS,
  );
});
