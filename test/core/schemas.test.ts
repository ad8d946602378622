import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
// The reference applications' event types and the step roles' commands (their modules define
// them), as npm run schemas exports.
import "../../functions/roles/modules";
import { EventRegistry, opaqueIdProblem, registry } from "../../schemas";
import { defineTaskEvents } from "../../schemas/events/task";
import { jsonSchemas } from "../../schemas/json-schema";
import { feedback, newTaskId } from "./fixtures";

describe("opaque ids", () => {
  it.each([
    "task_01J8ZK4Q0R3V9W6X2Y5Z7A8B9C",
    "corr_01J8ZK4Q0R3V9W6X2Y5Z7A8B9C",
    "case_123",
    "conv_ab-12",
  ])("accepts %s", (id) => {
    expect(opaqueIdProblem(id)).toBeUndefined();
  });
  it.each([
    "user_138_phone_13800138000",
    "user_13800138000",
    "task_bob@example.com",
    "Task_01J8ZK4Q0R3V9W6X2Y5Z7A8B9C",
    "task 1",
    "01J8ZK4Q0R3V9W6X2Y5Z7A8B9C",
    "card_4111111111111111",
  ])("rejects %s", (id) => {
    expect(opaqueIdProblem(id)).toBeDefined();
  });
  it("accepts a ULID body even when it holds a long digit run", () => {
    expect(opaqueIdProblem("task_01234567890123456789ABCDEF".slice(0, 31))).toBeUndefined();
  });
});

describe("registry", () => {
  it("fills order_key from the aggregate id and attempt with 1", () => {
    const { order_key: _o, attempt: _a, ...bare } = feedback(newTaskId(), 2);
    const parsed = registry.parse(bare);
    expect(parsed.ok && [parsed.envelope.order_key, parsed.envelope.attempt]).toEqual([
      bare.aggregate.id,
      1,
    ]);
    // Filled in the validated copy: the message as received is left as it was.
    expect(bare).not.toHaveProperty("order_key");
    expect(bare).not.toHaveProperty("attempt");
  });
  it("reads a stored message without run_id, and carries one an agent run set", () => {
    const { run_id: _r, ...old } = feedback(newTaskId(), 2) as Record<string, unknown>;
    const parsedOld = registry.parse(old);
    expect(parsedOld.ok && parsedOld.envelope.run_id).toBeUndefined();
    const withRun = registry.parse({ ...old, run_id: "agrun_abcdefghijklmnop", attempt: 3 });
    expect(withRun.ok && [withRun.envelope.run_id, withRun.envelope.attempt]).toEqual([
      "agrun_abcdefghijklmnop",
      3,
    ]);
    // A run id is an opaque id like the others: it must not carry personal data.
    expect(registry.parse({ ...old, run_id: "run_13800138000" }).ok).toBe(false);
  });
  it("refuses to define a type twice or with a bad name", () => {
    const r = new EventRegistry();
    defineTaskEvents(r);
    expect(() => defineTaskEvents(r)).toThrow(/defined twice/);
    const [first] = registry.definitions();
    if (!first) throw new Error("registry is empty");
    expect(() => r.define({ ...first, type: "NotDotted" })).toThrow(/NotDotted/);
  });
});

describe("JSON Schema export", () => {
  it("is committed and up to date for every event type (run npm run schemas)", () => {
    const dir = join(import.meta.dirname, "..", "..", "schemas", "json");
    const expected = jsonSchemas(registry);
    expect(readdirSync(dir).sort()).toEqual(Object.keys(expected).sort());
    for (const [name, schema] of Object.entries(expected)) {
      expect(JSON.parse(readFileSync(join(dir, name), "utf8")), name).toEqual(schema);
    }
  });
  it("carries the id pattern and the payload schema", () => {
    const schema = jsonSchemas(registry)["plan.created.v1.json"] as {
      properties: Record<string, { pattern?: string; properties?: object }>;
    };
    expect(schema.properties.task_id?.pattern).toContain("[a-z]");
    expect(schema.properties.payload?.properties).toHaveProperty("steps");
  });
});
