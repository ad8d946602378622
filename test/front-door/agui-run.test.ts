import { verifyEvents } from "@ag-ui/client";
import type { BaseEvent } from "@ag-ui/core";
import { from, lastValueFrom, toArray } from "rxjs";
import { describe, expect, it } from "vitest";
import { erasedContent, InMemoryContentStore } from "../../functions/core/agent/content";
import { assignmentStreamOf } from "../../functions/front-door/agui-run";
import {
  ARGS_UNAVAILABLE,
  RESULT_CONTENT_LIMIT,
  RESULT_UNAVAILABLE,
  toolCallResult,
} from "../../functions/front-door/agui-tool-args";
import { openStream } from "../../functions/front-door/stream";
import type { Envelope } from "../../schemas";

/**
 * A run's AG-UI stream over an event store in memory (functions/front-door/agui-run.ts): the
 * run's stream and the streams its assignments answer on, sent in one order, resumable from any
 * id, exactly once, while facts land in several streams.
 */

const ACME = { tenantId: "acme", userId: "user_1" };
const SETTINGS = { pollMs: 1000, maxSeconds: 5, heartbeatSeconds: 60 };
const RUN = "run_1";
let seq = 0;

function fact(type: string, payload: Record<string, unknown>, stream = { type: "x", id: "x" }) {
  seq += 1;
  return {
    event_id: `01JRUNEVENT${String(seq).padStart(15, "0")}`,
    event_type: type,
    schema_version: 1,
    occurred_at: "2026-12-05T10:00:00.000Z",
    correlation_id: "corr_1",
    causation_id: null,
    task_id: "task_r",
    aggregate: { ...stream, version: 0 },
    producer: "test",
    attempt: 1,
    payload,
  } as unknown as Envelope;
}

/** A run's store: its streams, appended in order, and its state (RUNNING until `end`). */
function world() {
  const streams = new Map<string, Envelope[]>();
  let status = "RUNNING";
  let revision = 0;
  const append = (e: Envelope) => {
    const key = `${e.aggregate.type}#${e.aggregate.id}`;
    const list = streams.get(key) ?? [];
    list.push({ ...e, aggregate: { ...e.aggregate, version: list.length + 1 } });
    streams.set(key, list);
  };
  const ports = {
    store: {
      async load() {
        revision += 1;
        const run = { run_id: RUN, workflow: { name: "w", version: 1 }, status, nodes: {} };
        const data = { workflow: "w", tenant_id: "acme", run, held: [], timeline: [] };
        return { inboxHit: false, checkpoint: 0, state: { revision, version: revision, data } };
      },
    },
    events: {
      readStream: async (s: { type: string; id: string }, from: number, to: number) =>
        (streams.get(`${s.type}#${s.id}`) ?? []).filter(
          (e) => e.aggregate.version >= from && e.aggregate.version <= to,
        ),
    },
    clock: { now: () => new Date(now) },
    sleep: async (ms: number) => {
      now += ms;
    },
  };
  let now = Date.parse("2026-12-05T10:00:00Z");
  return {
    ports,
    append,
    end: () => {
      status = "COMPLETED";
    },
  };
}

const dagRun = { type: "dag_run", id: RUN };
const ref = (node_id: string) => ({ run_id: RUN, node_id, generation: 0 });
const command = (type: string, node: string) => fact(type, { ...ref(node), attempt: 1 }, dagRun);
/** A fact of the stream the assignment `opened` by `by` answers on. */
const on = (by: Envelope, type: string, payload: Record<string, unknown>) => {
  const stream = assignmentStreamOf(RUN, by);
  if (!stream) throw new Error(`${by.event_type} opens no assignment`);
  return fact(type, payload, stream);
};

async function read(ports: ReturnType<typeof world>["ports"], lastEventId?: string) {
  const headers = lastEventId === undefined ? {} : { "last-event-id": lastEventId };
  const path = `/v1/runs/${RUN}/agui`;
  const stream = await openStream({ method: "GET", path, headers }, ACME, ports as never, SETTINGS);
  let text = "";
  await stream.run({ write: (t) => (text += t), closed: () => false });
  return text
    .split("\n\n")
    .filter((b) => b.includes("data: "))
    .map((b) => ({
      id: /^id: (.*)$/m.exec(b)?.[1] ?? "",
      event: JSON.parse(/^data: (.*)$/m.exec(b)?.[1] ?? "null") as BaseEvent,
    }));
}

const labels = (events: readonly { event: BaseEvent }[]) =>
  events.flatMap(({ event }) => {
    const e = event as BaseEvent & { stepName?: string; toolCallName?: string };
    if (e.type === "STEP_STARTED") return [`step ${e.stepName}`];
    if (e.type === "TOOL_CALL_START") return [`tool ${e.toolCallName}`];
    if (e.type === "STATE_DELTA") return [`delta ${JSON.stringify(e.delta)}`];
    return [];
  });

describe("a run's AG-UI stream with its assignments' streams", () => {
  it("sends each node's answer after its command, its agent's tool calls, and the run's end", async () => {
    const { ports, append, end } = world();
    const select = command("topic.selection.requested", "select");
    const sum = command("summarize.node.requested", "sum");
    append(select);
    append(sum);
    const toolDone = { step: 2, kind: "tool", tool: "search", tool_call_id: "c1", outcome: "ok" };
    append(on(select, "topic_selection.step.requested", { run_id: "a", step: 3, done: toolDone }));
    append(on(sum, "step.completed", { ...ref("sum"), output: { text: "short" } }));
    append(on(select, "topic.selection.completed", { ...ref("select"), output: { topic: "t" } }));
    // A repeated answer (a request sent again) says nothing new.
    append(on(select, "topic.selection.completed", { ...ref("select"), output: { topic: "t" } }));
    append(fact("workflow.completed", { run_id: RUN }, dagRun));
    end();

    const all = await read(ports);
    await expect(
      lastValueFrom(from(all.map((e) => e.event)).pipe(verifyEvents(false), toArray())),
    ).resolves.toHaveLength(all.length);
    expect(labels(all)).toEqual([
      'delta [{"op":"add","path":"/nodes","value":{}}]',
      "tool topic.selection.requested",
      "tool search",
      "step select",
      'delta [{"op":"add","path":"/nodes/select","value":{"state":"COMPLETED","output":{"topic":"t"}}}]',
      "tool summarize.node.requested",
      "step sum",
      'delta [{"op":"add","path":"/nodes/sum","value":{"state":"COMPLETED","output":{"text":"short"}}}]',
      'delta [{"op":"add","path":"/status","value":"COMPLETED"}]',
    ]);
    // Every assignment answered: the id is one range and the run's version.
    expect(all.at(-1)?.id).toBe("1-2=f,r=3");

    // From any id: exactly the events after it.
    for (let cut = 0; cut < all.length; cut++)
      expect(await read(ports, all[cut]?.id), `after ${cut}`).toEqual(all.slice(cut + 1));
  });

  it("an answer stored after later ones were sent reaches a client on resume, once", async () => {
    const { ports, append, end } = world();
    const a = command("topic.selection.requested", "a");
    const b = command("summarize.node.requested", "b");
    append(a);
    append(b);
    append(on(b, "step.completed", { ...ref("b"), output: { n: 2 } }));
    const first = await read(ports);
    expect(labels(first).filter((l) => l.startsWith("step"))).toEqual(["step b"]);
    const lastId = first.at(-1)?.id ?? "";
    expect(lastId).toBe("2=f,r=2");

    append(on(a, "topic.selection.failed", { ...ref("a"), error: { code: "c", message: "m" } }));
    append(fact("workflow.failed", { run_id: RUN }, dagRun));
    end();
    const resumed = await read(ports, lastId);
    expect(labels(resumed)).toEqual([
      "step a",
      'delta [{"op":"add","path":"/nodes/a","value":{"state":"FAILED","error":{"code":"c","message":"m"}}}]',
      'delta [{"op":"add","path":"/status","value":"FAILED"}]',
    ]);
    expect(resumed.at(-1)?.id).toBe("1-2=f,r=3");
    expect(await read(ports, resumed.at(-1)?.id)).toEqual([]);
    // A fresh read sends a's answer in its place, after its command.
    const fresh = labels(await read(ports)).filter((l) => l.startsWith("step"));
    expect(fresh).toEqual(["step a", "step b"]);
  });
});

describe("a start the orchestrator refused, on its AG-UI stream", () => {
  it("ends at once with the refusal as the run's end, and why; another tenant's is 404", async () => {
    const refusal = {
      code: "workflow.map_role_without_items",
      message: "map node drafts runs writing",
    };
    // The orchestrator's refusal: a null state, and `workflow.rejected` on the run's stream.
    const rejected = {
      ...fact("workflow.rejected", { run_id: RUN, request: "start", ...refusal }, dagRun),
      tenant_id: "acme",
      aggregate: { ...dagRun, version: 1 },
    } as Envelope;
    let now = Date.parse("2026-12-05T10:00:00Z");
    const ports = {
      store: {
        load: async () => ({
          inboxHit: false,
          checkpoint: 0,
          state: { aggregate: dagRun, revision: 1, version: 1, data: null },
        }),
      },
      events: {
        readStream: async (s: { type: string; id: string }, from: number, to: number) =>
          s.type === dagRun.type && s.id === RUN && from <= 1 && to >= 1 ? [rejected] : [],
      },
      clock: { now: () => new Date(now) },
      sleep: async (ms: number) => {
        now += ms;
      },
    };
    const started = now;
    const all = await read(ports as never);
    await expect(
      lastValueFrom(from(all.map((e) => e.event)).pipe(verifyEvents(false), toArray())),
    ).resolves.toHaveLength(all.length);
    expect(all.map(({ event }) => event.type)).toEqual([
      "RUN_STARTED",
      "STATE_DELTA",
      "RUN_FINISHED",
    ]);
    expect(all[1]?.event).toMatchObject({
      delta: [{ op: "add", path: "/status", value: "REJECTED" }],
    });
    expect(all[2]?.event).toMatchObject({ result: { status: "REJECTED", error: refusal } });
    // Ended at the refusal, not polled until the stream's time was up.
    expect(now - started).toBe(0);

    const path = `/v1/runs/${RUN}/agui`;
    const globex = { tenantId: "globex", userId: "user_2" };
    await expect(
      openStream({ method: "GET", path, headers: {} }, globex, ports as never, SETTINGS),
    ).rejects.toMatchObject({ problem: { code: "not_found" } });
  });
});

/** A content store that notes the references of each read. */
function countedContent() {
  const store = new InMemoryContentStore();
  const reads: string[][] = [];
  return {
    store,
    reads,
    content: {
      getMany: (refs: readonly string[]) => {
        reads.push([...refs]);
        return store.getMany(refs);
      },
    },
  };
}

/** A model turn asking for `calls`, stored; its reference. */
const turn = (store: InMemoryContentStore, calls: { id: string; input: unknown }[]) =>
  store.put(
    JSON.stringify({
      role: "assistant",
      text: "",
      toolCalls: calls.map((c) => ({ id: c.id, name: "get_order", input: c.input })),
    }),
  );

/**
 * An agent's step command after its tool call `id` of the turn `turnRef`, whose answer the model
 * was given is `resultRef` (either none: stored before the step named it).
 */
const toolStep = (by: Envelope, id: string, turnRef?: string, resultRef?: string) =>
  on(by, "topic_selection.step.requested", {
    run_id: "a",
    step: 3,
    done: {
      step: 2,
      kind: "tool",
      tool: "get_order",
      tool_call_id: id,
      outcome: "succeeded (run)",
      ...(turnRef ? { turn_ref: turnRef } : {}),
      ...(resultRef ? { result_ref: resultRef } : {}),
    },
  });

const argsOf = (events: readonly { event: BaseEvent }[]) =>
  events.flatMap(({ event }) => {
    const e = event as BaseEvent & { toolCallId?: string; delta?: string };
    // An agent's call (`<agent run>:<call id>`), not a command's (its event id).
    const call = e.toolCallId?.includes(":") ? e.toolCallId.split(":").at(-1) : undefined;
    return e.type === "TOOL_CALL_ARGS" && call ? [`${call} ${e.delta}`] : [];
  });

describe("an agent's tool calls on a run's AG-UI stream: TOOL_CALL_ARGS", () => {
  it("sends each call's input between its START and END, read once per turn, resumable mid-call", async () => {
    const { ports, append, end } = world();
    const { store, reads, content } = countedContent();
    const sealed = "sealed:v1:acme:cust_1:key:AAAA";
    const first = await turn(store, [
      { id: "c1", input: { order_id: "o_1" } },
      { id: "c2", input: { order_id: "o_1", note: sealed } },
    ]);
    const second = await turn(store, [{ id: "c3", input: { amount_cents: 500 } }]);
    const select = command("topic.selection.requested", "select");
    append(select);
    append(toolStep(select, "c0"));
    append(toolStep(select, "c1", first));
    append(toolStep(select, "c2", first));
    append(toolStep(select, "c3", second));
    append(on(select, "topic.selection.completed", { ...ref("select"), output: { topic: "t" } }));
    append(fact("workflow.completed", { run_id: RUN }, dagRun));
    end();
    const withContent = { ...ports, events: { ...ports.events, content } };

    const all = await read(withContent);
    await expect(
      lastValueFrom(from(all.map((e) => e.event)).pipe(verifyEvents(false), toArray())),
    ).resolves.toHaveLength(all.length);
    // A call stored before its step named its turn has no ARGS; a sealed value is never shown.
    expect(argsOf(all)).toEqual([
      'c1 {"order_id":"o_1"}',
      'c2 {"order_id":"o_1","note":"[sealed]"}',
      'c3 {"amount_cents":500}',
    ]);
    const c2 = all.flatMap(({ event }) => {
      const e = event as BaseEvent & { toolCallId?: string };
      return e.toolCallId?.endsWith(":c2") ? [e.type] : [];
    });
    expect(c2).toEqual(["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT"]);
    // Both turns in one read, each once.
    expect(reads).toEqual([[first, second]]);

    // From any id, mid-call included: exactly the events after it.
    for (let cut = 0; cut < all.length; cut++)
      expect(await read(withContent, all[cut]?.id), `after ${cut}`).toEqual(all.slice(cut + 1));
  });

  it("reads a turn once per connection, not once per poll", async () => {
    const { ports, append } = world();
    const { store, reads, content } = countedContent();
    const select = command("topic.selection.requested", "select");
    append(select);
    append(toolStep(select, "c1", await turn(store, [{ id: "c1", input: { order_id: "o_1" } }])));
    // The run stays RUNNING: the stream polls for its five seconds, the run's state moving each time.
    const withContent = { ...ports, events: { ...ports.events, content } };
    const all = await read(withContent);
    expect(argsOf(all)).toEqual(['c1 {"order_id":"o_1"}']);
    expect(reads).toHaveLength(1);
  });

  it("a turn no longer stored, or erased, does not break the stream", async () => {
    const { ports, append, end } = world();
    const { store, reads, content } = countedContent();
    const kept = await turn(store, [{ id: "c1", input: { order_id: "o_1" } }]);
    const erased = await turn(store, [{ id: "c2", input: { order_id: "o_2", cents: 5 } }]);
    await store.overwrite(erased, erasedContent((await store.getMany([erased]))[0] ?? ""));
    const gone = "f".repeat(64);
    const select = command("topic.selection.requested", "select");
    append(select);
    append(toolStep(select, "c1", kept));
    append(toolStep(select, "c2", erased));
    append(toolStep(select, "c3", gone));
    append(toolStep(select, "c4", kept)); // names the turn, which holds no c4
    append(on(select, "topic.selection.completed", { ...ref("select"), output: { topic: "t" } }));
    append(fact("workflow.completed", { run_id: RUN }, dagRun));
    end();
    reads.length = 0;

    const withContent = { ...ports, events: { ...ports.events, content } };
    const all = await read(withContent);
    expect(argsOf(all)).toEqual([
      'c1 {"order_id":"o_1"}',
      'c2 {"order_id":"[erased]","cents":5}',
      `c3 ${ARGS_UNAVAILABLE}`,
      `c4 ${ARGS_UNAVAILABLE}`,
    ]);
    expect(labels(all).at(-1)).toBe('delta [{"op":"add","path":"/status","value":"COMPLETED"}]');
    // The read that failed on the missing turn, then one read each.
    expect(reads).toEqual([[kept, erased, gone], [kept], [erased], [gone]]);

    // Without a content store, the same events, every call's args unavailable.
    const without = await read(ports);
    expect(without.map((e) => e.id)).toEqual(all.map((e) => e.id));
    expect(argsOf(without)).toEqual(
      ["c1", "c2", "c3", "c4"].map((c) => `${c} ${ARGS_UNAVAILABLE}`),
    );
  });
});

const resultsOf = (events: readonly { event: BaseEvent }[]) =>
  events.flatMap(({ event }) => {
    const e = event as BaseEvent & { toolCallId?: string; content?: string };
    const call = e.toolCallId?.includes(":") ? e.toolCallId.split(":").at(-1) : undefined;
    return e.type === "TOOL_CALL_RESULT" && call ? [`${call} ${e.content}`] : [];
  });

describe("an agent's tool calls on a run's AG-UI stream: TOOL_CALL_RESULT", () => {
  it("sends each call's output as its model was given it: sealed values shown sealed, a large one cut, a gone one a placeholder", async () => {
    const { ports, append, end } = world();
    const { store, reads, content } = countedContent();
    const sealed = "sealed:v1:acme:cust_1:key:AAAA";
    const calls = ["c1", "c2", "c3", "c4", "c5", "c6"].map((id) => ({ id, input: { n: 1 } }));
    const asked = await turn(store, calls);
    // Stored as the loop stores an answer (functions/core/agent/loop.ts): the JSON the model got.
    const order = await store.put(JSON.stringify({ found: true, order: { id: "o_1", total: 5 } }));
    const withSealed = await store.put(JSON.stringify({ found: true, email: sealed }));
    const large = JSON.stringify({ rows: "é".repeat(RESULT_CONTENT_LIMIT * 2) });
    const largeRef = await store.put(large);
    const failed = await store.put(JSON.stringify({ error: "tool.rejected", message: "no" }));
    const gone = "e".repeat(64);
    const select = command("topic.selection.requested", "select");
    append(select);
    append(toolStep(select, "c0")); // stored before steps named their texts
    append(toolStep(select, "c1", asked, order));
    append(toolStep(select, "c2", asked, withSealed));
    append(toolStep(select, "c3", asked, largeRef));
    append(toolStep(select, "c4", asked, failed));
    append(toolStep(select, "c5", asked, gone));
    append(toolStep(select, "c6", asked, order)); // the same answer: one text, read once
    append(on(select, "topic.selection.completed", { ...ref("select"), output: { topic: "t" } }));
    append(fact("workflow.completed", { run_id: RUN }, dagRun));
    end();
    const withContent = { ...ports, events: { ...ports.events, content } };

    const all = await read(withContent);
    await expect(
      lastValueFrom(from(all.map((e) => e.event)).pipe(verifyEvents(false), toArray())),
    ).resolves.toHaveLength(all.length);
    const results = resultsOf(all);
    expect(results).toHaveLength(7);
    expect(results.filter((r) => !r.startsWith("c3 "))).toEqual([
      'c0 {"outcome":"succeeded (run)"}',
      'c1 {"found":true,"order":{"id":"o_1","total":5}}',
      'c2 {"found":true,"email":"[sealed]"}',
      'c4 {"error":"tool.rejected","message":"no"}',
      `c5 {"outcome":"succeeded (run)","output":"${RESULT_UNAVAILABLE}"}`,
      'c6 {"found":true,"order":{"id":"o_1","total":5}}',
    ]);
    expect(JSON.stringify(all)).not.toContain(sealed);
    const cut = (results.find((r) => r.startsWith("c3 ")) ?? "").slice(3);
    expect(cut).toBe(
      `${large.slice(0, RESULT_CONTENT_LIMIT)}…[cut: ${large.length} characters in all]`,
    );
    // The turn and every answer in one read (each text once); the answer gone made it one each.
    const texts = [asked, order, withSealed, largeRef, failed, gone];
    expect(reads).toEqual([texts, ...texts.map((t) => [t])]);

    // From any id, mid-call included: exactly the events after it.
    for (let cut = 0; cut < all.length; cut++)
      expect(await read(withContent, all[cut]?.id), `after ${cut}`).toEqual(all.slice(cut + 1));

    // Without a content store: the same events (so the same ids), every output unavailable.
    const without = await read(ports);
    expect(without.map((e) => e.id)).toEqual(all.map((e) => e.id));
    expect(resultsOf(without).slice(1)).toEqual(
      ["c1", "c2", "c3", "c4", "c5", "c6"].map(
        (c) => `${c} {"outcome":"succeeded (run)","output":"${RESULT_UNAVAILABLE}"}`,
      ),
    );
  });

  it("cuts an output at the limit without splitting a character in two", () => {
    const emoji = "😀"; // two UTF-16 code units
    const answer = JSON.stringify(`${"x".repeat(RESULT_CONTENT_LIMIT - 2)}${emoji.repeat(3)}`);
    // The limit falls between the halves of the first emoji: it is left out whole.
    const shown = toolCallResult(answer) ?? "";
    expect(shown.startsWith(`"${"x".repeat(RESULT_CONTENT_LIMIT - 2)}…[cut: `)).toBe(true);
    expect(shown).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/);
    expect(toolCallResult(JSON.stringify("x".repeat(RESULT_CONTENT_LIMIT - 2)))).toBe(
      JSON.stringify("x".repeat(RESULT_CONTENT_LIMIT - 2)),
    );
    expect(toolCallResult("not json")).toBeUndefined();
  });
});
