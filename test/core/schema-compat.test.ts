import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import * as z from "zod";
// The reference applications' event types (their modules define them), as npm run schemas exports.
import "../../functions/roles/modules";
import { EventRegistry, registry } from "../../schemas";
import { incompatibilities, schemaProblems } from "../../schemas/compat";
import { defineTaskEvents } from "../../schemas/events/task";
import { jsonSchemas } from "../../schemas/json-schema";

// biome-ignore lint/suspicious/noExplicitAny: the cases reach into arbitrary JSON Schema objects
type Json = any;

const dir = join(import.meta.dirname, "..", "..", "schemas", "json");

/** The published JSON Schemas (schemas/json), by file name. */
function published(): Record<string, unknown> {
  return Object.fromEntries(
    readdirSync(dir)
      .filter((name) => name.endsWith(".json"))
      .map((name) => [name, JSON.parse(readFileSync(join(dir, name), "utf8")) as unknown]),
  );
}

/** A deep copy of a published schema, changed by `edit`. */
function edited(name: string, edit: (schema: Json) => void): unknown {
  const copy = structuredClone(published()[name]) as Json;
  edit(copy);
  return copy;
}

describe("event schema compatibility", () => {
  it("every published version is still registered, with a backward-compatible schema", () => {
    expect(schemaProblems(published(), jsonSchemas(registry))).toEqual([]);
  });

  it("catches a registered version whose payload changes incompatibly without a version bump", () => {
    // plan.created v1 redefined in place with a new required field: what must not happen.
    const changed = new EventRegistry();
    defineTaskEvents(changed);
    const bumped = new EventRegistry();
    for (const d of changed.definitions()) {
      if (d.type === "plan.created" && d.schemaVersion === 1)
        bumped.define({
          ...d,
          upcast: undefined,
          payload: z.object({ steps: z.array(z.string()), owner: z.string() }),
        });
      else if (d.type === "plan.created") continue;
      else bumped.define(d);
    }
    const problems = schemaProblems(
      { "plan.created.v1.json": published()["plan.created.v1.json"] },
      jsonSchemas(bumped),
    );
    expect(problems).toEqual([
      expect.stringMatching(/plan\.created\.v1\.json: \$\.payload\.owner: became required/),
    ]);
  });

  it("names each kind of incompatible change", () => {
    const name = "workflow.rejected.v1.json";
    const old = published()[name];
    const cases: [string, (s: Json) => void, RegExp][] = [
      ["narrowed enum", (s) => s.properties.payload.properties.request.enum.pop(), /enum value/],
      [
        "lower max",
        (s) => (s.properties.payload.properties.message.maxLength = 10),
        /maxLength went from 4096 to 10/,
      ],
      [
        "new min",
        (s) => (s.properties.payload.properties.code.minLength = 5),
        /minLength went from 1 to 5/,
      ],
      [
        "type change",
        (s) => (s.properties.payload.properties.code.type = "number"),
        /type string is no longer accepted/,
      ],
      [
        "new pattern",
        (s) => (s.properties.payload.properties.code.pattern = "^x"),
        /pattern changed/,
      ],
      [
        "closed object",
        (s) => (s.properties.payload.additionalProperties = false),
        /additional properties/,
      ],
      [
        "null refused",
        (s) => (s.properties.causation_id = { type: "string" }),
        /causation_id\|1: type null is no longer accepted/,
      ],
    ];
    for (const [label, edit, expected] of cases) {
      const problems = incompatibilities(old, edited(name, edit));
      expect(problems, label).toEqual([expect.stringMatching(expected)]);
    }
    expect(schemaProblems({ [name]: old, "gone.v1.json": old }, { [name]: old })).toEqual([
      expect.stringMatching(/gone\.v1\.json: published, but no longer registered/),
    ]);
  });

  it("accepts what keeps every old message valid", () => {
    const name = "workflow.rejected.v1.json";
    const old = published()[name];
    const compatible: [string, (s: Json) => void][] = [
      ["optional field", (s) => (s.properties.payload.properties.hint = { type: "string" })],
      ["wider enum", (s) => s.properties.payload.properties.request.enum.push("pause")],
      ["higher max", (s) => (s.properties.payload.properties.message.maxLength = 8000)],
      ["new description", (s) => (s.description = "reworded")],
      ["field no longer required", (s) => s.properties.payload.required.pop()],
    ];
    for (const [label, edit] of compatible)
      expect(incompatibilities(old, edited(name, edit)), label).toEqual([]);
  });
});
