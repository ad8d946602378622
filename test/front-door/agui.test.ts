import { verifyEvents } from "@ag-ui/client";
import { type BaseEvent, EventType as CoreEventType } from "@ag-ui/core";
import { EventSchemas } from "@ag-ui/core/schemas";
import { EventEncoder } from "@ag-ui/encoder";
import fc from "fast-check";
import { from, lastValueFrom, toArray } from "rxjs";
import { describe, expect, it } from "vitest";
import { InMemoryContentStore } from "../../functions/core/agent/content";
import {
  conversationFactEvents,
  nodeFactEvents,
  runFactEvents,
} from "../../functions/front-door/agui-events";
import {
  advance,
  encodePosition,
  FINAL_VERSION,
  MAX_POSITION_LENGTH,
  type PlacedFact,
  type Position,
  parsePosition,
  pendingAfter,
  START,
} from "../../functions/front-door/agui-position";
import { assignmentStreamOf, MAX_SHOWN_ASSIGNMENTS } from "../../functions/front-door/agui-run";
import { sendPending } from "../../functions/front-door/agui-stream";
import { encodeSse, EventType as WireEventType } from "../../functions/front-door/agui-wire";
import { ProblemError } from "../../functions/front-door/http";
import { openStream } from "../../functions/front-door/stream";
import { refundRunId } from "../../functions/roles/refund-review/ids";
import type { Envelope } from "../../schemas";
import { tenantConversationId } from "../../schemas/ids";

/**
 * The AG-UI mapping (functions/front-door/agui-events.ts) and positions
 * (functions/front-door/agui-position.ts): each stored fact's events are valid AG-UI (the
 * protocol's own schemas and its client's verifier), and a client that resumes from any
 * position gets every event it had not seen exactly once, in order.
 */

const THREAD = { threadId: "conv_1" };
let seq = 0;

function fact(
  type: string,
  taskId: string,
  payload: Record<string, unknown>,
  stream = { type: "reply", id: taskId, version: 1 },
): Envelope {
  seq += 1;
  return {
    event_id: `01JEVENT${String(seq).padStart(18, "0")}`,
    event_type: type,
    schema_version: 1,
    occurred_at: "2026-12-05T10:00:00.000Z",
    correlation_id: "corr_1",
    causation_id: null,
    task_id: taskId,
    aggregate: stream,
    producer: "test",
    attempt: 1,
    payload: { conversation_id: "conv_keyed", ...payload },
  } as unknown as Envelope;
}

/** The events as the AG-UI client's verifier passes them (it throws on a protocol error). */
async function verified(events: BaseEvent[]): Promise<BaseEvent[]> {
  return lastValueFrom(from(events).pipe(verifyEvents(false), toArray()));
}

describe("stored facts as AG-UI events", () => {
  const turn = [
    fact("conversation.message.accepted", "task_1", { text: "Where is 123?", version: 1 }),
    fact("support.route.requested", "task_1", {}),
    fact("support.routed", "task_1", { intent: "order_status", order_id: "123", rule: "r" }),
    fact("order.lookup.completed", "task_1", { order_id: "123", found: true }),
    fact("reply.held_for_review", "task_1", { reply_text: "It ships today.", reason: "refund" }),
    fact("reply.approved", "task_1", { reply_text: "It ships today.", requested_by: "op" }),
    fact("notification.delivered", "task_1", { delivery_id: "d1", idempotency_key: "k" }),
  ];
  const events = turn.flatMap((e) => conversationFactEvents(THREAD, e));

  it("a turn's facts are one run each, valid for the protocol's schemas and its client's verifier", async () => {
    for (const event of events)
      expect(EventSchemas.safeParse(event).success, event.type).toBe(true);
    await expect(verified(events)).resolves.toHaveLength(events.length);
    const runs = events.filter((e) => e.type === "RUN_STARTED");
    // The command between roles says nothing to a client: six facts, six runs.
    expect(runs).toHaveLength(6);
    expect(events.filter((e) => e.type === "TOOL_CALL_RESULT")).toHaveLength(1);
    const texts = events.filter((e) => e.type === "TEXT_MESSAGE_CONTENT") as { delta?: string }[];
    expect(texts.map((t) => t.delta)).toEqual(["Where is 123?", "It ships today."]);
  });

  it("a held reply ends its run with an interrupt, without the reply a person has not released", () => {
    const held = conversationFactEvents(THREAD, turn[4] as Envelope);
    expect(held.at(-1)).toMatchObject({
      type: "RUN_FINISHED",
      outcome: {
        type: "interrupt",
        interrupts: [
          {
            id: "task_1:review",
            reason: "held_for_review",
            message: "the reply waits for a person's review",
          },
        ],
      },
    });
    expect(JSON.stringify(held)).not.toContain("It ships today.");
    // Why it was held is the operators' (GET keeps `held_reason` from the customer too).
    expect(JSON.stringify(held)).not.toContain('"refund"');
  });

  it("the turn's state builds by JSON Patch from its first fact on", () => {
    const deltas = events.filter((e) => e.type === "STATE_DELTA") as unknown as {
      delta: unknown[];
    }[];
    expect(deltas[0]?.delta).toEqual([
      {
        op: "add",
        path: "/task_1",
        value: { task_id: "task_1", status: "received", input_version: 1 },
      },
    ]);
    expect(deltas.at(-1)?.delta).toEqual([
      { op: "add", path: "/task_1/status", value: "delivered" },
      { op: "add", path: "/task_1/delivery_id", value: "d1" },
    ]);
  });

  it("a personal field still sealed is shown [sealed], never its ciphertext", () => {
    const sealed = fact("conversation.message.accepted", "task_2", {
      text: "sealed:v1:acme:cust_1:key:AAAA",
      version: 2,
    });
    const shown = JSON.stringify(conversationFactEvents(THREAD, sealed));
    expect(shown).toContain("[sealed]");
    expect(shown).not.toContain("sealed:v1:");
  });

  it("a run's step commands are tool calls and its end finishes with the outcome", async () => {
    const run = [
      fact("topic.selection.requested", "task_r", { run_id: "run_1", node_id: "select" }),
      fact("node.heartbeat", "task_r", { run_id: "run_1" }),
      fact("workflow.completed", "task_r", { run_id: "run_1" }),
    ].flatMap((e) => runFactEvents({ threadId: "run_1" }, e));
    await expect(verified(run)).resolves.toHaveLength(run.length);
    expect(run.map((e) => e.type)).toEqual([
      "RUN_STARTED",
      "TOOL_CALL_START",
      "TOOL_CALL_ARGS",
      "TOOL_CALL_END",
      "RUN_FINISHED",
      "RUN_STARTED",
      "STATE_DELTA",
      "RUN_FINISHED",
    ]);
    expect(run.at(-1)).toMatchObject({ result: { status: "COMPLETED" } });
  });

  it("a refused start ends the run with the refusal; a refused request of a running run does not", () => {
    const thread = { threadId: "run_1" };
    const refused = (request: string) =>
      fact("workflow.rejected", "task_r", {
        run_id: "run_1",
        request,
        code: "workflow.confirm_not_blocked",
        message: "node review of run run_1 is not BLOCKED",
      });
    expect(runFactEvents(thread, refused("start")).at(-1)).toMatchObject({
      type: "RUN_FINISHED",
      result: { status: "REJECTED", error: { code: "workflow.confirm_not_blocked" } },
    });
    expect(runFactEvents(thread, refused("confirm"))).toEqual([]);
    expect(runFactEvents(thread, refused("cancel"))).toEqual([]);
  });

  it("an assignment's answer is a step with its output as state, its agent's tool calls are tool calls", async () => {
    const thread = { threadId: "run_1" };
    const ref = { run_id: "run_1", node_id: "select", generation: 0 };
    const command = fact("topic.selection.requested", "task_r", { ...ref, attempt: 1 });
    const toolStep = fact(
      "ledger_clerk.step.requested",
      "task_r",
      {
        run_id: "arun_x",
        step: 3,
        done: {
          step: 2,
          kind: "tool",
          tool: "get_order",
          tool_call_id: "c1",
          outcome: "succeeded",
        },
      },
      { type: "agent_run", id: "arun_x", version: 2 },
    );
    const modelStep = fact("ledger_clerk.step.requested", "task_r", {
      run_id: "arun_x",
      step: 2,
      done: { step: 1, kind: "model", asked: ["get_order"] },
    });
    const answer = fact("topic.selection.completed", "task_r", {
      ...ref,
      output: { topic: "tides" },
    });
    const failed = fact("step.failed", "task_r", {
      ...ref,
      node_id: "check",
      item: 2,
      error: { code: "x", message: "no" },
    });
    const end = fact("workflow.completed", "task_r", { run_id: "run_1" });
    const events = [
      ...runFactEvents(thread, command, true),
      ...nodeFactEvents(thread, modelStep),
      ...nodeFactEvents(thread, toolStep),
      ...nodeFactEvents(thread, answer),
      ...nodeFactEvents(thread, failed),
      ...runFactEvents(thread, end),
    ];
    for (const event of events)
      expect(EventSchemas.safeParse(event).success, event.type).toBe(true);
    await expect(verified(events)).resolves.toHaveLength(events.length);
    // A model turn's step says nothing the stream can show (its texts are in the content store).
    expect(nodeFactEvents(thread, modelStep)).toEqual([]);
    expect(nodeFactEvents(thread, toolStep).map((e) => e.type)).toEqual([
      "RUN_STARTED",
      "TOOL_CALL_START",
      "TOOL_CALL_END",
      "TOOL_CALL_RESULT",
      "RUN_FINISHED",
    ]);
    expect(nodeFactEvents(thread, toolStep)[1]).toMatchObject({
      toolCallId: "arun_x:c1",
      toolCallName: "get_order",
    });
    const deltas = events.filter((e) => e.type === "STATE_DELTA") as unknown as {
      delta: unknown[];
    }[];
    expect(deltas.map((d) => d.delta)).toEqual([
      [{ op: "add", path: "/nodes", value: {} }],
      [
        {
          op: "add",
          path: "/nodes/select",
          value: { state: "COMPLETED", output: { topic: "tides" } },
        },
      ],
      [
        {
          op: "add",
          path: "/nodes/check[2]",
          value: { state: "FAILED", error: { code: "x", message: "no" } },
        },
      ],
      [{ op: "add", path: "/status", value: "COMPLETED" }],
    ]);
    expect(events.filter((e) => e.type === "STEP_STARTED")).toEqual([
      { type: "STEP_STARTED", stepName: "select" },
      { type: "STEP_STARTED", stepName: "check[2]" },
    ]);
  });

  it("a command names the stream its role answers on: the kit's step run, or the agent run", () => {
    const ref = { run_id: "run_1", node_id: "n", generation: 1 };
    const own = assignmentStreamOf("run_1", fact("topic.selection.requested", "t", ref));
    const kit = assignmentStreamOf("run_1", fact("summarize.node.requested", "t", ref));
    const item = assignmentStreamOf(
      "run_1",
      fact("summarize.node.cancel.requested", "t", { ...ref, item: 3 }),
    );
    expect(own?.type).toBe("agent_run");
    expect(own?.id).toMatch(/^arun_[a-z]{32}$/);
    expect(kit?.type).toBe("step_run");
    expect(kit?.id).toMatch(/^srun_[a-z]{32}$/);
    expect(item?.id).not.toBe(kit?.id);
    for (const none of [
      fact("workflow.child.start.requested", "t", ref),
      fact("topic.selection.requested", "t", { ...ref, run_id: "run_2" }),
      fact("workflow.completed", "t", ref),
    ])
      expect(assignmentStreamOf("run_1", none), none.event_type).toBeUndefined();
  });
});

describe("positions", () => {
  it("an id round-trips, and anything else is refused", () => {
    const position: Position = {
      sent: { c: 4, "2.1": 3 },
      partial: { key: "2.3", version: 2, index: 1 },
    };
    expect(encodePosition(position)).toBe("2.1=3,c=4/2.3:2:1");
    expect(parsePosition(encodePosition(position))).toEqual(position);
    expect(parsePosition("")).toEqual(START);
    for (const bad of ["7", "c=x", "c=1,c=2", "C=1", "c=1/c:1:0", "c=1/d:2", "c=01", "c=1//"])
      expect(parsePosition(bad), bad).toBeUndefined();
  });

  it("a run's numbered keys encode as ranges, an ended one as f, and only in that one spelling", () => {
    const position: Position = {
      sent: { r: 9, "1": FINAL_VERSION, "2": FINAL_VERSION, "3": FINAL_VERSION, "5": 2, "6": 2 },
      partial: { key: "4", version: FINAL_VERSION, index: 1 },
    };
    expect(encodePosition(position)).toBe("1-3=f,5-6=2,r=9/4:f:1");
    expect(parsePosition("1-3=f,5-6=2,r=9/4:f:1")).toEqual(position);
    for (const bad of ["1=f,2=f", "2=1,1=1", "3-1=1", "1-1=1", "1-2=1,2=1", "1-2=g", "01-2=1"])
      expect(parsePosition(bad), bad).toBeUndefined();
    expect(parsePosition(`1-${MAX_SHOWN_ASSIGNMENTS}=f`)).toBeDefined();
    expect(parsePosition("1-100001=f"), "more keys than any stream writes").toBeUndefined();
  });

  it("a run's id stays within what is parsed with every shown assignment at its own version", () => {
    const sent: Record<string, number> = { r: 2 ** 31 - 2 };
    for (let n = 1; n <= MAX_SHOWN_ASSIGNMENTS; n++) sent[String(n)] = 2 ** 31 - 2 - (n % 2);
    const position = { sent, partial: { key: "1", version: FINAL_VERSION, index: 99 } };
    const id = encodePosition(position);
    expect(id.length).toBeLessThanOrEqual(MAX_POSITION_LENGTH);
    expect(parsePosition(id)).toEqual(position);
  });
});

/** A fact of the model: its stream key, version, sort and how many AG-UI events it maps to. */
interface Model {
  readonly id: string;
  readonly count: number;
}

/** Streams with their facts in version order, each fact given a sort of its own. */
const streams = fc
  .array(
    fc.record({
      facts: fc.array(fc.record({ count: fc.nat(3), sort: fc.nat(5) }), { maxLength: 5 }),
      // A run's assignment: keyed by number, its last fact its answer (FINAL_VERSION).
      numbered: fc.boolean(),
      answered: fc.boolean(),
    }),
    { minLength: 1, maxLength: 5 },
  )
  .map((perStream) =>
    perStream.flatMap(({ facts, numbered, answered }, s) => {
      const key = numbered ? String(s + 1) : `k${s}`;
      return facts.map(
        (f, i): PlacedFact<Model> => ({
          key,
          version: numbered && answered && i === facts.length - 1 ? FINAL_VERSION : i + 1,
          // Sorted by (sort, key, version): within a stream its facts keep their order.
          sort: [facts.slice(0, i + 1).reduce((m, x) => Math.max(m, x.sort), 0)],
          fact: { id: `${key}@${i + 1}`, count: f.count },
        }),
      );
    }),
  );

const eventsOf = (m: Model) => Array.from({ length: m.count }, (_, i) => `${m.id}#${i}`);

/** What a client reads: every event with its id, from `position`, of what is stored now. */
function read(stored: readonly PlacedFact<Model>[], position: Position) {
  const out: { id: string; event: string }[] = [];
  const sink = {
    write(text: string) {
      const id = /^id: (.*)$/m.exec(text)?.[1] ?? "";
      const data = JSON.parse(/^data: (.*)$/m.exec(text)?.[1] ?? "null") as { name: string };
      out.push({ id, event: data.name });
    },
    closed: () => false,
  };
  sendPending(sink, stored, position, (m) =>
    eventsOf(m).map((name) => ({ type: "CUSTOM", name, value: null }) as BaseEvent),
  );
  return out;
}

describe("resuming from a position", () => {
  it("events before any cut ++ a resume after it == every event, once, in order", () => {
    fc.assert(
      fc.property(streams, fc.nat(), (stored, at) => {
        const all = read(stored, START);
        const cut = all.length === 0 ? 0 : at % (all.length + 1);
        const id = cut === 0 ? "" : (all[cut - 1]?.id ?? "");
        const resumed = read(stored, parsePosition(id) ?? START);
        expect([...all.slice(0, cut), ...resumed].map((e) => e.event)).toEqual(
          all.map((e) => e.event),
        );
      }),
      { numRuns: 300 },
    );
  });

  it("a client following facts as they are appended, dropped anywhere, sees each event exactly once", () => {
    fc.assert(
      fc.property(streams, fc.array(fc.nat(), { maxLength: 12 }), (final, drops) => {
        const seen = followWithDrops(final, drops);
        const all = final.flatMap((f) => eventsOf(f.fact));
        expect([...seen].sort()).toEqual([...all].sort());
        // Within a stream, in version order.
        for (const key of new Set(final.map((f) => f.key))) {
          const mine = seen.filter((e) => e.startsWith(`${key}@`));
          expect(mine).toEqual(all.filter((e) => e.startsWith(`${key}@`)));
        }
      }),
      { numRuns: 300 },
    );
  });

  it("a resume that keeps only the newest fact sent (one watermark) is caught losing events", () => {
    const caught = fc.check(
      fc.property(streams, fc.array(fc.nat(), { maxLength: 12 }), (final, drops) => {
        const seen = followWithDrops(final, drops, true);
        const all = final.flatMap((f) => eventsOf(f.fact));
        expect([...seen].sort()).toEqual([...all].sort());
      }),
      { numRuns: 300 },
    );
    expect(caught.failed).toBe(true);
  });
});

/**
 * Appends the facts a few at a time (each stream in its order, streams interleaved); after each
 * append a client reads what is new, and is dropped after the number of events `drops` says, then
 * reconnects from the last id it got. The events it saw, in the order it saw them.
 */
function followWithDrops(
  final: readonly PlacedFact<Model>[],
  drops: readonly number[],
  oneWatermark = false,
): string[] {
  const seen: string[] = [];
  let lastId = "";
  let stored: PlacedFact<Model>[] = [];
  // Appended by version, streams interleaved (an answer, at FINAL_VERSION, comes last).
  const order = [...final].sort((a, b) => a.version - b.version || cmp(a.key, b.key));
  let step = 0;
  for (let appended = 0; appended <= order.length; appended += 2) {
    stored = order.slice(0, appended);
    const drop = drops[step++];
    let position = parsePosition(lastId) ?? START;
    if (oneWatermark) position = newestOnly(position, stored);
    const fresh = pendingAfter(stored, position).flatMap(({ placed, from }) => {
      const events = eventsOf(placed.fact);
      return events.slice(from).map((event, i) => {
        position = advance(position, placed, from + i, events.length);
        return { event, id: encodePosition(position) };
      });
    });
    const got = drop === undefined ? fresh : fresh.slice(0, drop % (fresh.length + 1));
    for (const e of got) {
      seen.push(e.event);
      lastId = e.id;
    }
    if (got.length < fresh.length) appended -= 2;
  }
  let end = parsePosition(lastId) ?? START;
  if (oneWatermark) end = newestOnly(end, final);
  const rest = pendingAfter(final, end).flatMap(({ placed, from }) =>
    eventsOf(placed.fact).slice(from),
  );
  return [...seen, ...rest];
}

/** The planted defect: a position that forgets every stream but the one sent last. */
function newestOnly(position: Position, stored: readonly PlacedFact<Model>[]): Position {
  const last = position.partial?.key ?? stored.find((f) => f.key in position.sent)?.key;
  if (!last) return START;
  const sent = Object.fromEntries(
    stored.filter((f) => f.version <= (position.sent[f.key] ?? 0)).map((f) => [f.key, f.version]),
  );
  const newest = Math.max(...Object.values(sent), 0);
  return { sent: Object.fromEntries(Object.keys(sent).map((k) => [k, newest])) };
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

describe("the AG-UI routes over an event store in memory", () => {
  const ACME = { tenantId: "acme", userId: "user_1" };
  const SETTINGS = { pollMs: 1000, maxSeconds: 5, heartbeatSeconds: 60 };
  const keyed = tenantConversationId("acme", "conv_a");

  /**
   * A conversation of `turns` (task id -> facts of its streams), the view that names them, and
   * its state, which says whose it is (`customer`: ACME's own by default).
   */
  function world(
    turns: Record<string, Envelope[]>,
    tenant = "acme",
    status?: string,
    customer = "cust_1",
  ) {
    const streams = new Map<string, Envelope[]>();
    const append = (e: Envelope) => {
      const key = `${e.aggregate.type}#${e.aggregate.id}`;
      const list = streams.get(key) ?? [];
      list.push({ ...e, aggregate: { ...e.aggregate, version: list.length + 1 } });
      streams.set(key, list);
    };
    let revision = 0;
    const taskIds = Object.keys(turns);
    taskIds.forEach((taskId, i) => {
      append(at(accepted(taskId, i + 1), "conversation", keyed));
      for (const e of turns[taskId] ?? []) append(e);
    });
    const ports = {
      store: {
        async load({ state }: { state?: { type: string; id: string } }) {
          if (state?.type === "conversation") {
            const data = { conversation_id: keyed, customer_id: customer, tenant_id: tenant };
            const conversation = { aggregate: state, revision: 1, version: 1, data };
            return { inboxHit: false, checkpoint: 0, state: conversation } as never;
          }
          // A view whose turns keep `status` does not move; otherwise every read moves it.
          revision = status && revision > 0 ? revision : revision + 1;
          const data = {
            conversation_id: keyed,
            tenant_id: tenant,
            version: taskIds.length,
            turns: Object.fromEntries(
              taskIds.map((t, i) => [
                t,
                { task_id: t, input_version: i + 1, status: status ?? `r${revision}` },
              ]),
            ),
            turn_order: taskIds,
          };
          if (state?.type !== "conversation_view") return { inboxHit: false, checkpoint: 0 };
          return {
            inboxHit: false,
            checkpoint: 0,
            state: { aggregate: state, revision, version: revision, data },
          } as never;
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
        for (const next of whileAsleep.splice(0))
          typeof next === "function" ? next() : append(next);
      },
    };
    let now = Date.parse("2026-12-05T10:00:00Z");
    /** What happens between the stream's polls (at its next sleep): facts stored, changes. */
    const whileAsleep: (Envelope | (() => void))[] = [];
    return { ports, append, whileAsleep, taskIds };
  }

  const accepted = (taskId: string, version: number) =>
    fact("conversation.message.accepted", taskId, { text: `message ${version}`, version });
  const at = (e: Envelope, type: string, id: string) =>
    ({ ...e, aggregate: { type, id, version: 0 } }) as Envelope;
  const reply = (taskId: string, text: string) =>
    at(fact("reply.generated", taskId, { reply_text: text }), "reply", taskId);

  async function read(ports: ReturnType<typeof world>["ports"], lastEventId?: string) {
    const headers = lastEventId === undefined ? {} : { "last-event-id": lastEventId };
    const path = "/v1/conversations/conv_a/agui";
    const stream = await openStream(
      { method: "GET", path, headers },
      ACME,
      ports as never,
      SETTINGS,
    );
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

  it("a fact appended to an earlier turn after the client saw later ones reaches it on resume, once", async () => {
    const { ports, append } = world({ task_1: [], task_2: [reply("task_2", "second reply")] });
    const first = await read(ports);
    const lastId = first.at(-1)?.id;
    append(reply("task_1", "late first reply"));
    const resumed = await read(ports, lastId);
    const texts = (all: typeof first) =>
      all.flatMap((e) =>
        "delta" in e.event && typeof e.event.delta === "string" ? [e.event.delta] : [],
      );
    expect(texts(first)).toEqual(["message 1", "message 2", "second reply"]);
    expect(texts(resumed)).toEqual(["late first reply"]);
    // A fresh read sends it in its turn's place.
    expect(texts(await read(ports))).toEqual([
      "message 1",
      "late first reply",
      "message 2",
      "second reply",
    ]);
    expect(await read(ports, resumed.at(-1)?.id)).toEqual([]);
  });

  it("a fact stored in a turn under way shows at the next poll, though the view has not moved", async () => {
    const { ports, whileAsleep } = world({ task_1: [] }, "acme", "routed");
    whileAsleep.push(reply("task_1", "stored between polls"));
    const seen = await read(ports);
    const texts = seen.flatMap((e) =>
      "delta" in e.event && typeof e.event.delta === "string" ? [e.event.delta] : [],
    );
    expect(texts).toEqual(["message 1", "stored between polls"]);
    // A turn that waits for a person is read when its view changes, not at every poll.
    const held = world({ task_1: [] }, "acme", "held_for_review");
    held.whileAsleep.push(reply("task_1", "not yet"));
    expect(JSON.stringify(await read(held.ports))).not.toContain("not yet");
  });

  it("a message the view has no turn for yet is sent once the view has it, on the same connection", async () => {
    const { ports, append, whileAsleep, taskIds } = world({ task_1: [], task_2: [] });
    // The conversation's third message is stored; the view (two turns) folds it after a poll.
    append(at(accepted("task_3", 3), "conversation", keyed));
    whileAsleep.push(() => taskIds.push("task_3"));
    const texts = (await read(ports)).flatMap((e) =>
      "delta" in e.event && typeof e.event.delta === "string" ? [e.event.delta] : [],
    );
    expect(texts).toEqual(["message 1", "message 2", "message 3"]);
  });

  it("a refund turn shows its agent's tool calls with their input and output, read once, resumable mid-call", async () => {
    const { ports, append } = world({ task_1: [] });
    const content = new InMemoryContentStore();
    const reads: string[][] = [];
    const withContent = {
      ...ports,
      events: {
        ...ports.events,
        content: {
          getMany: (refs: readonly string[]) => {
            reads.push([...refs]);
            return content.getMany(refs);
          },
        },
      },
    };
    const calls = [
      { id: "t1", name: "get_order", input: { order_id: "A-1002" } },
      { id: "t2", name: "issue_refund", input: { order_id: "A-1002", amount_cents: 2500 } },
    ];
    const turnRef = await content.put(
      JSON.stringify({ role: "assistant", text: "", toolCalls: calls }),
    );
    // What the model was given of each call, as the loop stores it.
    const outputs = [
      { found: true, order: { order_id: "A-1002", total_cents: 2500 } },
      { refund_id: "rf_1", amount_cents: 2500 },
    ];
    const resultRefs = await Promise.all(outputs.map((o) => content.put(JSON.stringify(o))));
    const run = refundRunId("task_1");
    const step = (done: Record<string, unknown>) =>
      at(
        fact("refund_review.step.requested", "task_1", { run_id: run, step: 2, done }),
        "agent_run",
        run,
      );
    append(
      at(
        fact("support.routed", "task_1", { intent: "refund", order_id: "A-1002" }),
        "support_route",
        "task_1",
      ),
    );
    append(step({ step: 1, kind: "model", model_run_id: `${run}:turn:1`, asked: ["get_order"] }));
    for (const [index, call] of calls.entries())
      append(
        step({
          step: 2,
          kind: "tool",
          tool: call.name,
          tool_call_id: call.id,
          outcome: "succeeded (run)",
          turn_ref: turnRef,
          result_ref: resultRefs[index],
        }),
      );
    append(at(fact("refund.approved", "task_1", { order_id: "A-1002" }), "agent_run", run));
    append(reply("task_1", "Refunded."));

    const all = await read(withContent);
    await expect(verified(all.map((e) => e.event))).resolves.toHaveLength(all.length);
    const tools = all.flatMap(({ event }) => {
      const e = event as BaseEvent & { toolCallName?: string; delta?: string; content?: string };
      if (e.type === "TOOL_CALL_START") return [`start ${e.toolCallName}`];
      if (e.type === "TOOL_CALL_RESULT") return [`result ${e.content}`];
      return e.type === "TOOL_CALL_ARGS" ? [`args ${e.delta}`] : [];
    });
    expect(tools).toEqual([
      "start get_order",
      'args {"order_id":"A-1002"}',
      `result ${JSON.stringify(outputs[0])}`,
      "start issue_refund",
      'args {"order_id":"A-1002","amount_cents":2500}',
      `result ${JSON.stringify(outputs[1])}`,
    ]);
    // The refund agent's run is the turn's fifth stream, sent after the router's and before the
    // reply; its turn and the answers were read once, in five polls.
    const types: string[] = all.map(({ event }) => event.type);
    expect(types.lastIndexOf("TOOL_CALL_RESULT")).toBeLessThan(
      types.lastIndexOf("TEXT_MESSAGE_CONTENT"),
    );
    expect(all.at(-1)?.id).toBe("1.1=1,1.3=1,1.5=4,c=1");
    expect(reads).toEqual([[turnRef, ...resultRefs]]);
    for (let cut = 0; cut < all.length; cut++)
      expect(await read(withContent, all[cut]?.id), `after ${cut}`).toEqual(all.slice(cut + 1));
  });

  it("answers 404 for another customer's conversation of the tenant, before anything is sent", async () => {
    const { ports } = world({ task_1: [] }, "acme", undefined, "cust_2");
    await expect(
      openStream(
        { method: "GET", path: "/v1/conversations/conv_a/agui", headers: {} },
        ACME,
        ports as never,
        SETTINGS,
      ),
    ).rejects.toMatchObject({ problem: { code: "not_found", detail: "no conversation conv_a" } });
  });

  it("a conversation another customer opens after the stream did ends it with RUN_ERROR, none of its facts sent", async () => {
    const { ports } = world(
      { task_1: [reply("task_1", "their reply")] },
      "acme",
      undefined,
      "cust_2",
    );
    // Neither the view nor the conversation's state is there when the stream opens.
    let opened = false;
    const load = ports.store.load;
    const store = {
      async load(request: { state?: { type: string; id: string } }) {
        return opened ? load(request) : { inboxHit: false, checkpoint: 0 };
      },
    };
    const stream = await openStream(
      { method: "GET", path: "/v1/conversations/conv_a/agui", headers: {} },
      ACME,
      { ...ports, store } as never,
      SETTINGS,
    );
    opened = true;
    let text = "";
    await stream.run({ write: (t) => (text += t), closed: () => false });
    const events = text
      .split("\n\n")
      .filter((b) => b.includes("data: "))
      .map((b) => JSON.parse(/^data: (.*)$/m.exec(b)?.[1] ?? "null") as BaseEvent);
    expect(events).toEqual([
      { type: "RUN_ERROR", code: "not_found", message: "no conversation conv_a" },
    ]);
    expect(text).not.toContain("their reply");
  });

  it("refuses an id it did not write, another tenant's run, and a stack that reads no event store", async () => {
    const { ports } = world({ task_1: [] });
    const problem = (p: Promise<unknown>) =>
      p.then(
        () => "opened",
        (e: unknown) => (e instanceof ProblemError ? e.problem.code : String(e)),
      );
    const open = (path: string, headers: Record<string, string>, p: object = ports) =>
      openStream({ method: "GET", path, headers }, ACME, p as never, SETTINGS);
    expect(await problem(open("/v1/conversations/conv_a/agui", { "last-event-id": "12" }))).toBe(
      "invalid_request",
    );
    const globexRun = {
      ...ports,
      store: {
        load: async () => ({
          inboxHit: false,
          checkpoint: 0,
          state: { revision: 1, version: 1, data: { tenant_id: "globex" } },
        }),
      },
    };
    expect(await problem(open("/v1/runs/run_1/agui", {}, globexRun))).toBe("not_found");
    const { events: _, ...withoutEvents } = ports;
    expect(await problem(open("/v1/conversations/conv_a/agui", {}, withoutEvents))).toBe(
      "not_served",
    );
  });
});

describe("the AG-UI wire without AG-UI's packages at run time (functions/front-door/agui-wire.ts)", () => {
  it("names every event type as @ag-ui/core does", () => {
    for (const [name, value] of Object.entries(WireEventType))
      expect(value, name).toBe(CoreEventType[name as keyof typeof CoreEventType]);
  });

  it("encodes each event as @ag-ui/encoder does", () => {
    const ref = { run_id: "run_1", node_id: "select", generation: 0 };
    const toolStep = fact(
      "ledger_clerk.step.requested",
      "task_r",
      {
        run_id: "arun_x",
        step: 3,
        done: {
          step: 2,
          kind: "tool",
          tool: "get_order",
          tool_call_id: "c1",
          outcome: "succeeded (run)",
          turn_ref: "a".repeat(64),
          result_ref: "b".repeat(64),
        },
      },
      { type: "agent_run", id: "arun_x", version: 2 },
    );
    const events = [
      ...conversationFactEvents(THREAD, fact("conversation.message.accepted", "t", { text: "é" })),
      ...conversationFactEvents(THREAD, fact("reply.held_for_review", "t", { reason: "refund" })),
      ...conversationFactEvents(THREAD, fact("support.cancelled", "t", { requested_by: "op" })),
      ...conversationFactEvents(THREAD, fact("order.lookup.completed", "t", { found: false })),
      ...runFactEvents(THREAD, fact("topic.selection.requested", "t", { ...ref }), true),
      ...nodeFactEvents(THREAD, fact("topic.selection.completed", "t", { ...ref, output: {} })),
      ...nodeFactEvents(THREAD, toolStep, { args: '{"n":1}', result: '{"found":true}' }),
      ...nodeFactEvents(THREAD, toolStep),
      ...runFactEvents(THREAD, fact("workflow.failed", "t", { run_id: "run_1", reason: "x" })),
      { type: WireEventType.RUN_ERROR, code: "not_found", message: "no run run_1" } as BaseEvent,
    ];
    // Every type the streams send is among them.
    expect(new Set(events.map((e) => e.type))).toEqual(new Set(Object.values(WireEventType)));
    const encoder = new EventEncoder();
    for (const event of events) expect(encodeSse(event), event.type).toBe(encoder.encodeSSE(event));
  });
});
