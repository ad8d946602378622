import { describe, expect, it } from "vitest";
import {
  DEFLATE_OVER_BYTES,
  envelopeJson,
  envelopeOfItem,
  storedEnvelope,
} from "../../functions/adapters/dynamodb/deflated-json";
import { eventItem, stateItem, storedStateOf } from "../../functions/adapters/dynamodb/items";
import { itemSize } from "../../lib/dev/metering/metering";
import { feedbackEvent, taskEvent } from "../support/factories";

/** A feedback message whose comment makes its JSON about `bytes` long. */
const withComment = (length: number) =>
  feedbackEvent({
    payload: { rating: 4, comment: "the answer was useful, thanks. ".repeat(length / 31) },
  });

describe("the envelope of an event item", () => {
  it("stays JSON text while small", () => {
    const small = taskEvent(1);
    expect(Buffer.byteLength(JSON.stringify(small))).toBeLessThanOrEqual(DEFLATE_OVER_BYTES);
    expect(storedEnvelope(small)).toEqual({ envelope: JSON.stringify(small) });
  });

  it("is deflated when large, and comes back as the same JSON, byte for byte", () => {
    const large = withComment(1200);
    const json = JSON.stringify(large);
    const stored = storedEnvelope(large);
    expect(stored.envelope).toBeUndefined();
    expect(stored.envelope_z?.byteLength).toBeLessThan(Buffer.byteLength(json) / 2);
    expect(envelopeJson(stored)).toBe(json);
    // As a stream record delivers it to Lambda: base64 text.
    const base64 = Buffer.from(stored.envelope_z as Uint8Array).toString("base64");
    expect(envelopeJson({ envelope_z: base64 })).toBe(json);
    expect(envelopeOfItem(eventItem(large) as unknown as Record<string, unknown>)).toEqual(
      JSON.parse(json),
    );
  });

  it("makes an event item of 1.3 KB of JSON fit the 1 KB a write unit bills", () => {
    const large = withComment(1000);
    const json = JSON.stringify(large);
    expect(Buffer.byteLength(json)).toBeGreaterThan(1100);
    const asText = { ...eventItem(large), envelope: json, envelope_z: undefined };
    expect(itemSize(asText)).toBeGreaterThan(1024);
    expect(itemSize(eventItem(large))).toBeLessThanOrEqual(1024);
  });

  it("reads items written before as text, and names an item that has neither", () => {
    const event = taskEvent(2);
    expect(envelopeOfItem({ envelope: JSON.stringify(event) })).toEqual(
      JSON.parse(JSON.stringify(event)),
    );
    expect(envelopeJson({ pk: "task#x" })).toBeUndefined();
    expect(() => envelopeOfItem({ pk: "task#x", version: 3 })).toThrow(
      "event item task#x v3 has no envelope",
    );
  });
});

describe("the data of a state item", () => {
  const ref = { type: "dag_run", id: "run_1" };
  const at = new Date("2026-09-01T10:00:00.000Z");

  it("stays a map, however large, unless only AgentBus reads the role's states", () => {
    const nodes = Object.fromEntries(
      Array.from({ length: 40 }, (_, i) => [`node-${i}`, { status: "PENDING", attempts: 0 }]),
    );
    const view = stateItem({ type: "conversation_view", id: "conv_1" }, 1, 1, { nodes }, at);
    expect(view.data).toEqual({ nodes });
    expect(view.data_z).toBeUndefined();
  });

  it("of a compact role stays a map while small, and is deflated when large, read back equal", () => {
    const small = { status: "RUNNING", nodes: { a: "DONE" } };
    const smallItem = stateItem(ref, 1, 1, small, at, null, undefined, undefined, {
      compact: true,
    });
    expect(smallItem.data).toEqual(small);
    expect(smallItem.data_z).toBeUndefined();

    const nodes = Object.fromEntries(
      Array.from({ length: 40 }, (_, i) => [`node-${i}`, { status: "PENDING", attempts: 0 }]),
    );
    const large = { status: "RUNNING", nodes, note: null, empty: "" };
    const largeItem = stateItem(ref, 2, 2, large, at, null, undefined, undefined, {
      compact: true,
    });
    expect(largeItem.data).toBeUndefined();
    expect(largeItem.data_z?.byteLength).toBeLessThan(JSON.stringify(large).length / 4);
    expect(storedStateOf(largeItem).data).toEqual(large);
    expect(storedStateOf(smallItem).data).toEqual(small);
  });

  it("leaves a state without data without either attribute", () => {
    const item = stateItem(ref, 1, 0, undefined, at, null, undefined, undefined, {
      compact: true,
    });
    expect("data" in item || "data_z" in item).toBe(false);
    expect(storedStateOf(item).data).toBeUndefined();
  });
});

describe("the gate records of a state item", () => {
  const ref = { type: "conversation_view", id: "conv_1" };
  const at = new Date("2026-12-01T00:00:00.000Z");

  it("stay maps while small, and are deflated into one attribute when large, read back equal", () => {
    const small = { checkpoints: { "conversation#conv_1": 2 }, recent: { ev_1: 1_900_000_000 } };
    const smallItem = stateItem(ref, 1, 1, { n: 1 }, at, null, undefined, small);
    expect(smallItem.gate_checkpoints).toEqual(small.checkpoints);
    expect(smallItem.gate_z).toBeUndefined();
    expect(storedStateOf(smallItem).gate).toEqual(small);

    const tasks = Array.from(
      { length: 50 },
      (_, i) => `task_01KB0R7Q2M5N8P1R4T6V9X${String(i).padStart(4, "0")}`,
    );
    const checkpoints = Object.fromEntries(
      tasks.flatMap((t) =>
        ["support_route", "order_lookup", "reply", "delivery"].map((s) => [`${s}#${t}`, 1]),
      ),
    );
    const large = { checkpoints, recent: {}, spilledUntil: 1_900_000_000 };
    const largeItem = stateItem(ref, 2, 2, { n: 2 }, at, null, undefined, large);
    expect(largeItem.gate_checkpoints).toBeUndefined();
    expect(largeItem.gate_recent).toBeUndefined();
    expect(largeItem.gate_spilled_until).toBe(1_900_000_000);
    expect(largeItem.gate_z?.byteLength).toBeLessThan(JSON.stringify(checkpoints).length / 4);
    expect(itemSize(largeItem)).toBeLessThan(
      itemSize({ ...largeItem, gate_z: undefined, gate_checkpoints: checkpoints }) / 3,
    );
    expect(storedStateOf(largeItem).gate).toEqual(large);
  });
});
