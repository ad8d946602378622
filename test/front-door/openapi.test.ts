import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createConfig, lintFromString } from "@redocly/openapi-core";
import { describe, expect, it } from "vitest";
import { ROUTES } from "../../functions/front-door/api";
import { STREAM_ROUTES } from "../../functions/front-door/stream";
import { openApiDocument } from "../../lib/dev/openapi";

/**
 * The front door's OpenAPI document (functions/front-door/openapi.json, written by `npm run
 * schemas`): current, valid for a real validator, and about exactly the routes the API serves.
 */

const path = join(import.meta.dirname, "..", "..", "functions", "front-door", "openapi.json");
const text = readFileSync(path, "utf8");
const doc = JSON.parse(text) as {
  paths: Record<string, Record<string, { security: Record<string, unknown>[] }>>;
};

describe("the OpenAPI document", () => {
  it("is what the routes give (run npm run schemas after changing one)", () => {
    expect(text).toBe(`${JSON.stringify(openApiDocument(), null, 2)}\n`);
  });

  it("passes Redocly's recommended rules with no error", async () => {
    const config = await createConfig({ extends: ["recommended"] });
    const problems = await lintFromString({ source: text, absoluteRef: "/openapi.json", config });
    const errors = problems
      .filter((p) => p.severity === "error")
      .map((p) => `${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`);
    expect(errors).toEqual([]);
  });

  it("describes exactly the routes served, each with its authorization", () => {
    const described = Object.entries(doc.paths).flatMap(([p, methods]) =>
      Object.entries(methods)
        .filter(([method]) => method !== "servers")
        .map(([method, op]) => ({
          route: `${method.toUpperCase()} ${p}`,
          auth: op.security[0]?.sigv4 ? "iam" : op.security[0]?.bearer ? "jwt" : "none",
        })),
    );
    const served = [
      ...ROUTES.map((r) => ({ route: `${r.method} ${r.path}`, auth: r.auth })),
      ...STREAM_ROUTES.map((r) => ({ route: `${r.method} ${r.path}`, auth: "jwt" })),
    ];
    const order = (a: { route: string }, b: { route: string }) => a.route.localeCompare(b.route);
    expect(described.sort(order)).toEqual(served.sort(order));
  });
});
