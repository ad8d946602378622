import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { describe, expect, it } from "vitest";

/**
 * The reference applications are written as a team outside the hub writes its own: with the
 * public entry points only (`agentbus` = functions/kit.ts, `agentbus/lambda` = functions/lambda.ts
 * for handlers and adapters, `agentbus/cdk` = lib/cdk.ts for an integration's infrastructure,
 * `agentbus/testing` = lib/testing.ts for their tests, `agentbus/zod` = schemas/zod.ts for their
 * schemas) and their own application's files, event types included. So each is an example of the
 * public API, and the API is whatever they need.
 */

const ROOT = join(import.meta.dirname, "..", "..");

/** Each reference application and the folders it owns. */
const APPLICATIONS: Readonly<Record<string, readonly string[]>> = {
  "customer support": ["functions/roles/customer-support", "functions/roles/refund-review"],
  "content production": ["functions/roles/content-agents"],
  // An application outside functions/, as a team's repository holds one (its stack.ts too).
  bookkeeping: ["test/fixtures/bookkeeping"],
};

const KIT = "functions/kit";
const KIT_ZOD = "schemas/zod";
const LAMBDA = "functions/lambda";
const CDK = "lib/cdk";
const TESTING = "lib/testing";

function sourceFiles(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(".ts"))
    .map((entry) => relative(ROOT, join(entry.parentPath, entry.name)));
}

/** Every relative module a file imports or re-exports, repository-relative, without extension. */
function importsOf(file: string): string[] {
  const text = readFileSync(join(ROOT, file), "utf8");
  const specifiers = [...text.matchAll(/\bfrom\s+"(\.{1,2}\/[^"]+)"/g)].map((m) => m[1] ?? "");
  return specifiers.map((spec) => normalize(join(dirname(file), spec)).replace(/\.(ts|json)$/, ""));
}

/** Why `file` may not import `target`, if it may not. */
function refusal(file: string, target: string, owned: readonly string[]): string | undefined {
  if (owned.some((folder) => target.startsWith(`${folder}/`))) return undefined;
  if (target === KIT || target === KIT_ZOD) return undefined;
  const adapterSide =
    file.endsWith("/handler.ts") ||
    /\/integrations\/.+\/(?!index|port|memory)[^/]+\.ts$/.test(file);
  if (target === LAMBDA && adapterSide) return undefined;
  if (target === TESTING && file.endsWith(".test.ts")) return undefined;
  const infraSide = /\/integrations\/(.+\/)?infra\.ts$/.test(file) || file.endsWith("/stack.ts");
  if (target === CDK && infraSide) return undefined;
  if (target === LAMBDA) return "agentbus/lambda is for handler.ts and an integration's AWS side";
  if (target === CDK) return "agentbus/cdk is for an integration's infra.ts and a stack.ts";
  if (target === TESTING) return "agentbus/testing is for an application's tests (*.test.ts)";
  return "not a public entry point (functions/kit.ts, functions/lambda.ts, lib/cdk.ts)";
}

describe("the reference applications use the public entry points only", () => {
  for (const [application, folders] of Object.entries(APPLICATIONS)) {
    it(application, () => {
      const files = folders.flatMap(sourceFiles);
      expect(files.length).toBeGreaterThan(0);
      const problems = files.flatMap((file) =>
        importsOf(file).flatMap((target) => {
          const why = refusal(file, target, folders);
          return why ? [`${file} imports ${target}: ${why}`] : [];
        }),
      );
      expect(problems).toEqual([]);
    });
  }

  it("refuses what a team could not import", () => {
    const owned = APPLICATIONS["customer support"] ?? [];
    const role = "functions/roles/refund-review/tools.ts";
    expect(refusal(role, "functions/core/errors", owned)).toMatch(/not a public entry point/);
    expect(refusal(role, LAMBDA, owned)).toMatch(/handler\.ts/);
    expect(refusal(role, KIT, owned)).toBeUndefined();
    // Its event types are its own: the hub's schemas/ is not an entry point.
    expect(refusal(role, "schemas/events/task", owned)).toMatch(/not a public entry point/);
    expect(refusal(role, "functions/roles/customer-support/events/conversation", owned)).toBe(
      undefined,
    );
    const adapter = "functions/roles/customer-support/integrations/orders/aws.ts";
    expect(refusal(adapter, LAMBDA, owned)).toBeUndefined();
    expect(refusal(adapter, CDK, owned)).toMatch(/infra\.ts/);
    const infra = "functions/roles/customer-support/integrations/orders/infra.ts";
    expect(refusal(infra, CDK, owned)).toBeUndefined();
    expect(refusal(infra, "lib/infra/retention", owned)).toMatch(/not a public entry point/);
    const clerk = APPLICATIONS.bookkeeping ?? [];
    expect(
      refusal("test/fixtures/bookkeeping/clerk/clerk.test.ts", TESTING, clerk),
    ).toBeUndefined();
    expect(refusal("test/fixtures/bookkeeping/clerk/index.ts", TESTING, clerk)).toMatch(/tests/);
  });
});
