import { HttpAgent, verifyEvents } from "@ag-ui/client";
import type { BaseEvent, RunAgentInput } from "@ag-ui/core";
import { from, lastValueFrom, toArray } from "rxjs";
import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { refundRunId } from "../../functions/roles/refund-review/ids";
import { ISSUE_REFUND } from "../../functions/roles/refund-review/tools";
import { refundableOrder, runReaches } from "../../lib/dev/local/scenario/refund";
import { tenantConversationId } from "../../schemas/ids";
import { localSupportStack, TIMEOUT } from "./support-stack";

/**
 * A conversation's AG-UI stream (`GET /v1/conversations/{id}/agui`) on the local stack, followed
 * by `@ag-ui/client`'s HttpAgent: its transport, its SSE parser and its check of every event
 * against the protocol's schemas (`HttpAgent.run`). The client has no resume of its own (its SSE
 * parser drops `id:` lines and `connect` is not implemented for HTTP), so the reconnect loop is
 * this test's: its `fetch` sends GET with `Last-Event-ID` and notes each message's `id` as the
 * bytes pass.
 *
 * A "run" below is one follower that reads the conversation from the start, is dropped at 1-3
 * random points (the connection aborted after a random number of events) and reconnects from the
 * last id it got, until it has as many events as a fresh read: 200 of them over one conversation
 * of three turns; and one follower that does the same while the turns happen, live. Then a
 * content run (`quick-news`): its stream shows each node's answer, the nodes' state the deltas
 * build is what `GET /v1/runs/{id}` shows, and 30 followers dropped at random get every event once.
 */

interface Seen {
  readonly id: string;
  readonly event: BaseEvent;
}

/** Enough of a conversation's stream: `deliveries` replies delivered, and the last one's run ended. */
const throughDeliveries = (deliveries: number) => (seen: readonly Seen[]) =>
  seen.filter((s) => JSON.stringify(s.event).includes('"value":"delivered"')).length ===
    deliveries && seen.at(-1)?.event.type === "RUN_FINISHED";

const RUNS = 200;

/** A seeded generator, so that a failure names the drops that made it. */
function random(seed: number) {
  let state = seed >>> 0;
  return (below: number) => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * below);
  };
}

/** The response with each SSE message's `id` noted, in order, as its bytes pass to the client. */
function notingIds(response: Response, ids: string[]): Response {
  const decoder = new TextDecoder();
  let buffered = "";
  const tap = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      buffered += decoder.decode(chunk, { stream: true });
      for (let end = buffered.indexOf("\n\n"); end >= 0; end = buffered.indexOf("\n\n")) {
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        if (/^data: /m.test(block)) ids.push(/^id: (.*)$/m.exec(block)?.[1] ?? "");
      }
      controller.enqueue(chunk);
    },
  });
  const body = response.body?.pipeThrough(tap) ?? null;
  return new Response(body, { status: response.status, headers: response.headers });
}

describe("AG-UI streams on the local stack, followed by @ag-ui/client with drops", () => {
  const local = localSupportStack("agui");
  const door = () => {
    const frontDoor = local.env.frontDoor;
    if (!frontDoor) throw new Error("the local stack serves no front door");
    return frontDoor;
  };

  /**
   * One connection from `lastId`: the events HttpAgent gives, each with its id, until `enough`
   * says so (then the connection is dropped) or nothing comes for `idleMs`.
   */
  const connect = async (
    url: string,
    token: string,
    lastId: string,
    enough: (seen: readonly Seen[]) => boolean,
    idleMs = 3000,
  ): Promise<Seen[]> => {
    const ids: string[] = [];
    const agent = new HttpAgent({
      url,
      fetch: async (target, init) =>
        notingIds(
          await fetch(target, {
            method: "GET",
            headers: {
              authorization: `Bearer ${token}`,
              ...(lastId ? { "last-event-id": lastId } : {}),
            },
            ...(init?.signal ? { signal: init.signal } : {}),
          }),
          ids,
        ),
    });
    const input: RunAgentInput = {
      threadId: "follow",
      runId: "follow",
      state: {},
      messages: [],
      tools: [],
      context: [],
      forwardedProps: {},
    };
    return new Promise<Seen[]>((resolve, reject) => {
      const seen: Seen[] = [];
      let idle: NodeJS.Timeout | undefined;
      const stop = () => {
        clearTimeout(idle);
        subscription.unsubscribe();
        agent.abortRun();
        resolve(seen);
      };
      const restart = () => {
        clearTimeout(idle);
        idle = setTimeout(stop, idleMs);
      };
      const subscription = agent.run(input).subscribe({
        next: (event) => {
          seen.push({ event, id: ids[seen.length] ?? "" });
          if (enough(seen)) stop();
          else restart();
        },
        error: (error: unknown) => {
          clearTimeout(idle);
          reject(error);
        },
      });
      restart();
    });
  };

  const post = async (token: string, conversation: string, text: string) => {
    const response = await fetch(`${door().url}/conversations/${conversation}/messages`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ text }),
    });
    expect(response.status).toBe(202);
    return ((await response.json()) as { task_id: string }).task_id;
  };

  /**
   * Follows from the start, dropped after `dropAfter(left)` events each time (`left`: how many it
   * has yet to see), until it has seen `total`; each event as its JSON, in the order seen.
   */
  const follow = async (
    url: string,
    token: string,
    dropAfter: (left: number) => number,
    total: number,
  ): Promise<{ events: string[]; lastId: string; connections: number }> => {
    const events: string[] = [];
    let lastId = "";
    let connections = 0;
    while (events.length < total) {
      const limit = dropAfter(total - events.length);
      const got = await connect(url, token, lastId, (s) => s.length >= limit);
      connections += 1;
      for (const { event, id } of got) {
        events.push(JSON.stringify(event));
        lastId = id;
      }
    }
    return { events, lastId, connections };
  };

  it(
    "every event exactly once and in order, live and over 200 runs of random drops",
    async () => {
      const seed = Date.now();
      const pick = random(seed);
      const conversation = `conv_${ulid()}`;
      const token = await door().issuer.token({ tenant_id: "acme", sub: "u-acme" });
      const url = `${door().url}/conversations/${conversation}/agui`;

      // Live: a follower dropped every 1-6 events while three turns happen one after the other.
      // Live: a follower dropped every 1-6 events while three turns happen one after the other,
      // until it has as many events as the fresh read below.
      let target: number | undefined;
      const liveFollower = (async () => {
        const events: string[] = [];
        let lastId = "";
        while (target === undefined || events.length < target) {
          const got = await connect(url, token, lastId, (s) => s.length >= 1 + pick(6), 5000);
          for (const { event, id } of got) {
            events.push(JSON.stringify(event));
            lastId = id;
          }
        }
        return events;
      })();
      const keyed = tenantConversationId("acme", conversation);
      const texts = ["Where is my order 123?", "And order 456?", "Thanks, and 789?"];
      for (const text of texts) {
        const task = await post(token, conversation, text);
        await local.delivered(keyed, task);
      }

      // A fresh read of everything (through the third delivery's run): what every follower must
      // have seen, in this order.
      const complete = throughDeliveries(texts.length);
      const full = (await connect(url, token, "", complete, TIMEOUT)).map((s) =>
        JSON.stringify(s.event),
      );
      const types = full.map((e) => (JSON.parse(e) as BaseEvent).type);
      expect(types.filter((t) => t === "TEXT_MESSAGE_START").length).toBe(6);
      for (const text of texts) expect(full.join("\n")).toContain(text);
      // Nothing after it.
      const lastOfFull = await connect(url, token, "", complete, TIMEOUT);
      expect(await connect(url, token, lastOfFull.at(-1)?.id ?? "", () => false, 2000)).toEqual([]);
      target = full.length;
      expect(await liveFollower, `live follower, seed ${seed}`).toEqual(full);

      const started = Date.now();
      let connections = 0;
      for (let run = 0; run < RUNS; run++) {
        const drops = 1 + pick(3);
        let left = drops;
        // Each drop comes before the end: after 1 to rest - 1 of the events still to see.
        const result = await follow(
          url,
          token,
          (rest) => (left-- > 0 && rest > 1 ? 1 + pick(rest - 1) : rest),
          full.length,
        );
        connections += result.connections;
        expect(result.events, `run ${run}, seed ${seed}`).toEqual(full);
        // Nothing after the last event: a reconnect from it gets nothing more.
        if (run % 50 === 0)
          expect(await connect(url, token, result.lastId, () => false, 1000)).toEqual([]);
      }
      expect(connections).toBeGreaterThanOrEqual(2 * RUNS);
      console.log(
        `${RUNS} runs, ${connections} connections, ${full.length} events each, ${Date.now() - started} ms`,
      );
    },
    20 * TIMEOUT,
  );

  it(
    "a refund turn shows the refund agent's tool calls with their input and output, resumable mid-call",
    async () => {
      // Alice's token (customer cust_alice), whose order it is; under the approval threshold.
      const token = await door().issuer.token({ tenant_id: "acme", sub: "alice" });
      const orderId = await refundableOrder(local.env, 5_000);
      const conversation = `conv_${ulid()}`;
      const task = await post(token, conversation, `Please refund order ${orderId}`);
      await runReaches(local.env, refundRunId(task), "COMPLETED", TIMEOUT);
      // The customer is told: nothing more comes to the turn, so a read now is a fresh read.
      await local.delivered(tenantConversationId("acme", conversation), task);
      const url = `${door().url}/conversations/${conversation}/agui`;
      // Everything through the delivery's run (read until then, however slow the machine).
      const full = await connect(url, token, "", throughDeliveries(1), TIMEOUT);
      await expect(
        lastValueFrom(from(full.map((s) => s.event)).pipe(verifyEvents(false), toArray())),
      ).resolves.toHaveLength(full.length);
      type Call = { name?: string; args?: Record<string, unknown>; output?: unknown };
      const calls = new Map<string, Call>();
      for (const { event } of full) {
        const e = event as BaseEvent & {
          toolCallId?: string;
          toolCallName?: string;
          delta?: string;
          content?: string;
          role?: string;
        };
        if (e.type === "TOOL_CALL_START") calls.set(e.toolCallId ?? "", { name: e.toolCallName });
        const call = calls.get(e.toolCallId ?? "");
        if (e.type === "TOOL_CALL_ARGS" && call) call.args = JSON.parse(e.delta ?? "null");
        if (e.type === "TOOL_CALL_RESULT" && call) {
          expect(e.role).toBe("tool");
          call.output = JSON.parse(e.content ?? "");
        }
      }
      // Every call the agent made has its input and its output (what its model was given), read
      // from the content store; the refund's input is the order's total, its output the receipt.
      const made = [...calls.values()];
      expect(made.map((c) => c.name)).toContain(ISSUE_REFUND);
      for (const call of made) expect(call.args?.order_id, call.name).toBe(orderId);
      expect(made.find((c) => c.name === ISSUE_REFUND)?.args?.amount_cents).toBe(5_000);
      expect(made.find((c) => c.name === ISSUE_REFUND)?.output).toEqual({
        refund_id: expect.any(String),
        order_id: orderId,
        amount_cents: 5_000,
      });
      expect(made.find((c) => c.name === "get_order")?.output).toMatchObject({
        found: true,
        order: { order_id: orderId },
      });

      // From each tool call event's id (mid-call included): exactly the events after it.
      const events = full.map((s) => JSON.stringify(s.event));
      for (const [cut, { event, id }] of full.entries())
        if (event.type.startsWith("TOOL_CALL_")) {
          const rest = await connect(
            url,
            token,
            id,
            (s) => s.length >= events.length - cut - 1,
            TIMEOUT,
          );
          expect(
            rest.map((s) => JSON.stringify(s.event)),
            `after ${cut}`,
          ).toEqual(events.slice(cut + 1));
        }
    },
    5 * TIMEOUT,
  );

  it(
    "a content run's stream shows each node's answer as its state, and a client dropped anywhere gets each event once",
    async () => {
      const seed = Date.now();
      const pick = random(seed);
      const token = await door().issuer.token({ tenant_id: "acme", sub: "u-acme" });
      const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
      const started = await fetch(`${door().url}/workflows/quick-news/runs`, {
        method: "POST",
        headers,
        body: JSON.stringify({ topic_hint: "grid storage" }),
      });
      expect(started.status).toBe(202);
      const { run_id: runId } = (await started.json()) as { run_id: string };
      const url = `${door().url}/runs/${runId}/agui`;
      // The stream closes once the run has ended and everything is sent.
      const finished = (seen: readonly Seen[]) =>
        seen.some((s) => s.event.type === "RUN_FINISHED" && "result" in s.event);
      // Live, from the start: the answers come as they are stored.
      const live: Seen[] = [];
      while (!finished(live))
        live.push(...(await connect(url, token, live.at(-1)?.id ?? "", finished, 10_000)));
      // A fresh read once it ended: the same events, each answer right after its command.
      const full = await connect(url, token, "", finished, 10_000);
      const sorted = (seen: readonly Seen[]) => seen.map((s) => JSON.stringify(s.event)).sort();
      expect(sorted(live)).toEqual(sorted(full));
      const run = (await (await fetch(`${door().url}/runs/${runId}`, { headers })).json()) as {
        status: string;
        nodes: Record<string, { state: string; output?: unknown }>;
      };
      expect(run.status).toBe("COMPLETED");

      // The nodes' state as the client builds it from the deltas: what GET /v1/runs/{id} shows.
      const nodes: Record<string, { state: string; output?: unknown }> = {};
      for (const { event } of full)
        if (event.type === "STATE_DELTA")
          for (const op of (event as unknown as { delta: { path: string; value: never }[] }).delta)
            if (op.path.startsWith("/nodes/")) nodes[op.path.slice("/nodes/".length)] = op.value;
      const whole = Object.entries(run.nodes).filter(([, n]) => n.state === "COMPLETED");
      expect(whole.length).toBeGreaterThan(1);
      for (const [id, node] of whole) {
        const shown =
          nodes[id] ?? Object.entries(nodes).find(([step]) => step.startsWith(`${id}[`))?.[1];
        expect(shown?.state, id).toBe("COMPLETED");
        if (nodes[id]) expect(nodes[id]?.output, id).toEqual(node.output);
      }
      const steps = full.filter((s) => s.event.type === "STEP_STARTED").length;
      expect(steps).toBeGreaterThanOrEqual(whole.length);

      // Dropped at 1-3 random points, 30 times: every event once, in the order of a fresh read.
      const events = full.map((s) => JSON.stringify(s.event));
      for (let run = 0; run < 30; run++) {
        let left = 1 + pick(3);
        const result = await follow(
          url,
          token,
          (rest) => (left-- > 0 && rest > 1 ? 1 + pick(rest - 1) : rest),
          events.length,
        );
        expect(result.events, `run ${run}, seed ${seed}`).toEqual(events);
      }
      console.log(
        `a run of ${Object.keys(run.nodes).length} nodes: ${events.length} events, ${steps} steps`,
      );
    },
    10 * TIMEOUT,
  );
});
