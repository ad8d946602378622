import { execFileSync } from "node:child_process";
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SLOW_STEP_TIMEOUT_MS } from "../support/timeouts";

/**
 * AgentBus as a team gets it: `npm pack`ed (which builds it: `prepack`), unpacked into the
 * node_modules of an application outside the repository (test/package/ledger-app), beside links
 * to the dependencies this checkout installed (no registry, no network), and used there with
 * plain Node.js: the application is type-checked against the package's declarations, compiled,
 * and its tests run on the in-memory kit.
 */

const ROOT = join(import.meta.dirname, "..", "..");
const NODE_MODULES = join(ROOT, "node_modules");
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

/** Link every package this checkout installed into `modules` (scoped ones one by one). */
function linkDependencies(modules: string): void {
  for (const entry of readdirSync(NODE_MODULES)) {
    if (entry === ".bin" || entry.startsWith(".") || entry === "agentbus") continue;
    if (!entry.startsWith("@")) {
      symlinkSync(join(NODE_MODULES, entry), join(modules, entry));
      continue;
    }
    mkdirSync(join(modules, entry), { recursive: true });
    for (const scoped of readdirSync(join(NODE_MODULES, entry)))
      symlinkSync(join(NODE_MODULES, entry, scoped), join(modules, entry, scoped));
  }
}

const run = (command: string, args: readonly string[], cwd: string) =>
  execFileSync(command, args, { cwd, env: NPM_ENV, encoding: "utf8", stdio: "pipe" });

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), "agentbus-package-"));
  run("npm", ["pack", "--pack-destination", work], ROOT);
  tarball = join(work, readdirSync(work).find((f) => f.endsWith(".tgz")) ?? "no tarball");
  app = join(work, "ledger-app");
  cpSync(join(import.meta.dirname, "ledger-app"), app, { recursive: true });
  const modules = join(app, "node_modules");
  mkdirSync(join(modules, "agentbus"), { recursive: true });
  run("tar", ["-xzf", tarball, "-C", join(modules, "agentbus"), "--strip-components=1"], work);
  linkDependencies(modules);
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
      "./package.json",
    ]);
    const files = run("tar", ["-tzf", tarball], work).split("\n");
    for (const name of ["kit", "lambda", "cdk", "testing", "local"])
      expect(files).toContain(`package/dist/${name}.js`);
    expect(files).toContain("package/dist/types/functions/kit.d.ts");
    expect(files.filter((f) => f.startsWith("package/test/"))).toEqual([]);
  });

  it(
    "every entry point loads in plain Node.js, with no TypeScript loader",
    () => {
      const script = `for (const entry of ["agentbus", "agentbus/lambda", "agentbus/cdk", "agentbus/testing", "agentbus/local"]) { const m = await import(entry); if (Object.keys(m).length === 0) throw new Error(entry + " exports nothing"); } console.log("loaded");`;
      expect(run(process.execPath, ["--input-type=module", "-e", script], app).trim()).toBe(
        "loaded",
      );
    },
    SLOW_STEP_TIMEOUT_MS,
  );

  it(
    "an application's own integration and role type-check against it, build, and pass their tests",
    () => {
      run(process.execPath, [join(NODE_MODULES, "typescript", "bin", "tsc"), "-p", "."], app);
      const report = run(process.execPath, ["--test", "build/"], app);
      expect(report).toMatch(/# pass 2\b/);
      expect(report).toMatch(/# fail 0\b/);
    },
    SLOW_STEP_TIMEOUT_MS,
  );
});
