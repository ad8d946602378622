import { describe, expect, it } from "vitest";
import type { AwsClient } from "../../functions/adapters/aws/client";
import { InMemoryModelControls } from "../../functions/core/model-guard";
import { InMemoryAcceptedRequests } from "../../functions/front-door/accepted";
import {
  BacklogGate,
  type BacklogQueues,
  backlogRefusal,
  MAX_BACKLOG_RETRY_AFTER_SECONDS,
} from "../../functions/front-door/backlog";
import { InMemoryClientSequences } from "../../functions/front-door/client-seq";
import { InMemoryTenantLimits } from "../../functions/front-door/limits";
import { InMemoryRunsInFlight } from "../../functions/front-door/runs-in-flight";
import { createFrontDoorHandler } from "../../functions/handlers/front-door";
import type { Observability } from "../../functions/handlers/observe";

/**
 * The front door's admission by backlog (functions/front-door/backlog.ts), in memory: the decision
 * from the groups' depths, the depths read through a fake reader, kept for a few seconds, and a
 * read that fails admitting.
 */

const SETTINGS = { threshold: 100, drainPerSecond: 5 };

describe("backlogRefusal", () => {
  it("admits under and at the threshold, refuses over it", () => {
    expect(backlogRefusal({ conversation: 99 }, SETTINGS)).toBeUndefined();
    expect(backlogRefusal({ conversation: 100 }, SETTINGS)).toBeUndefined();
    expect(backlogRefusal({ conversation: 101 }, SETTINGS)).toEqual({
      code: "backlog",
      detail: expect.stringContaining("consumer group conversation has 101 messages queued"),
      retryAfterSeconds: 1,
    });
  });

  it("names the deepest group and tells it to come back when that group would be at the threshold", () => {
    const refused = backlogRefusal({ audit: 0, conversation: 180, orchestrator: 150 }, SETTINGS);
    expect(refused?.detail).toContain("consumer group conversation");
    expect(refused?.retryAfterSeconds).toBe(16); // (180 - 100) / 5
    expect(backlogRefusal({ conversation: 100_000 }, SETTINGS)?.retryAfterSeconds).toBe(
      MAX_BACKLOG_RETRY_AFTER_SECONDS,
    );
    expect(backlogRefusal({}, SETTINGS)).toBeUndefined();
  });
});

/** A gate over fake queues: their depths, the reads made, a clock the test moves. */
function gate(options: { cacheSeconds?: number } = {}) {
  const depths = new Map<string, number | Error>([
    ["q-conv.fifo", 40],
    ["q-conv-buffer", 10],
    ["q-orch.fifo", 0],
  ]);
  const reads: string[] = [];
  const unread: string[] = [];
  const clock = { at: new Date("2026-12-05T10:00:00.000Z"), now: () => clock.at };
  const tick = (ms: number) => {
    clock.at = new Date(clock.at.getTime() + ms);
  };
  const queues: BacklogQueues = {
    conversations: { conversation: ["q-conv.fifo", "q-conv-buffer"] },
    runs: { orchestrator: ["q-orch.fifo"] },
  };
  const backlog = new BacklogGate({
    queues,
    clock,
    settings: { ...SETTINGS, cacheSeconds: options.cacheSeconds ?? 5 },
    read: async (url) => {
      reads.push(url);
      const depth = depths.get(url);
      if (depth instanceof Error) throw depth;
      return depth ?? 0;
    },
    onUnread: (url) => unread.push(url),
  });
  return { backlog, depths, reads, unread, tick };
}

describe("BacklogGate", () => {
  it("sums a group's FIFO queue and buffer, and refuses only the feature whose group is over", async () => {
    const { backlog, depths } = gate({ cacheSeconds: 0 });
    expect(await backlog.refusal("conversations")).toBeUndefined(); // 40 + 10
    depths.set("q-conv-buffer", 61); // 40 + 61 = 101
    expect(await backlog.refusal("conversations")).toMatchObject({ code: "backlog" });
    expect(await backlog.refusal("runs")).toBeUndefined();
    // A feature with no entry groups (the task views: the front door starts none) reads nothing.
    expect(await backlog.refusal("tasks")).toBeUndefined();
  });

  it("reads each queue once per cache period, however many requests come", async () => {
    const { backlog, depths, reads, tick } = gate({ cacheSeconds: 5 });
    for (let i = 0; i < 50; i++) {
      expect(await backlog.refusal("conversations")).toBeUndefined();
      tick(90); // 50 requests in 4.5 s
    }
    expect(reads).toEqual(["q-conv.fifo", "q-conv-buffer"]);
    // The backlog grows: seen once the kept depths are older than the period.
    depths.set("q-conv.fifo", 500);
    tick(500);
    expect(await backlog.refusal("conversations")).toMatchObject({ retryAfterSeconds: 82 });
    expect(reads).toHaveLength(4);
  });

  it("admits when a depth cannot be read, reports it, and does not read again until the period ends", async () => {
    const { backlog, depths, reads, unread, tick } = gate({ cacheSeconds: 5 });
    depths.set("q-conv.fifo", new Error("AccessDenied"));
    depths.set("q-conv-buffer", new Error("AccessDenied"));
    // Not refused: an unread depth is unknown, and the gate never refuses all traffic for it.
    expect(await backlog.refusal("conversations")).toBeUndefined();
    expect(unread).toEqual(["q-conv.fifo", "q-conv-buffer"]);
    for (let i = 0; i < 10; i++) await backlog.refusal("conversations");
    expect(reads).toHaveLength(2);
    expect(unread).toHaveLength(2);
    // One queue read, the other not: the one read still counts.
    depths.set("q-conv-buffer", 150);
    tick(5000);
    expect(await backlog.refusal("conversations")).toMatchObject({ code: "backlog" });
    expect(unread).toEqual(["q-conv.fifo", "q-conv-buffer", "q-conv.fifo"]);
  });

  it("keeps no stale depth past a failed read: a queue that was over and can no longer be read admits", async () => {
    const { backlog, depths, tick } = gate({ cacheSeconds: 5 });
    depths.set("q-orch.fifo", 1000);
    expect(await backlog.refusal("runs")).toMatchObject({ code: "backlog" });
    depths.set("q-orch.fifo", new Error("throttled"));
    tick(5000);
    expect(await backlog.refusal("runs")).toBeUndefined();
  });
});

/** The function's logger and metrics, keeping the metrics' names and the warnings. */
function fakeObservability(metrics: string[], warnings: string[]): Observability {
  return {
    logger: {
      info: () => undefined,
      warn: (message: string) => warnings.push(message),
      error: () => undefined,
    },
    metrics: {
      addMetric: (name: string) => metrics.push(name),
      singleMetric: () => ({
        addDimension: () => undefined,
        addMetric: (name: string) => metrics.push(name),
      }),
      publishStoredMetrics: () => undefined,
    },
    tracer: { capture: <T>(client: T) => client },
    telemetry: { ready: Promise.resolve(), flush: async () => undefined },
  } as unknown as Observability;
}

describe("the front door's function with BACKLOG_QUEUES", () => {
  /** The function on fakes: SQS answers `depth` (or fails), the bus and the counts in memory. */
  function frontDoor(sqs: (url: string) => number | Error) {
    const metrics: string[] = [];
    const warnings: string[] = [];
    const sqsCalls: string[] = [];
    const published: unknown[] = [];
    const observed = fakeObservability(metrics, warnings);
    const handler = createFrontDoorHandler({
      env: {
        STATE_TABLE: "state",
        EVENTS_TABLE: "events",
        BUS_EVENTS: "events-bus",
        BACKLOG_QUEUES: JSON.stringify({ conversations: { conversation: ["q-conv.fifo"] } }),
        BACKLOG_THRESHOLD: "100",
        BACKLOG_DRAIN_PER_SECOND: "10",
      },
      sqs: {
        send: async (command: { input: { QueueUrl: string } }) => {
          sqsCalls.push(command.input.QueueUrl);
          const depth = sqs(command.input.QueueUrl);
          if (depth instanceof Error) throw depth;
          return { Attributes: { ApproximateNumberOfMessages: String(depth) }, $metadata: {} };
        },
      } as unknown as AwsClient,
      // A state table with no item (a message reads its conversation's view): no network.
      dynamodb: { send: async () => ({ $metadata: {} }) } as unknown as AwsClient,
      publisher: {
        publish: async (_topic, envelopes) => {
          published.push(...envelopes);
          return [];
        },
      },
      accepted: new InMemoryAcceptedRequests(),
      sequences: new InMemoryClientSequences(),
      limits: new InMemoryTenantLimits(),
      runs: new InMemoryRunsInFlight(),
      controls: new InMemoryModelControls(),
      observability: observed,
    });
    const post = () =>
      handler({
        rawPath: "/v1/conversations/conv_1/messages",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ text: "hi" }),
        isBase64Encoded: false,
        requestContext: {
          requestId: "req-1",
          http: { method: "POST" },
          authorizer: { jwt: { claims: { tenant_id: "acme", sub: "user-1" } } },
        },
      } as unknown as Parameters<typeof handler>[0]);
    return { post, metrics, warnings, sqsCalls, published };
  }

  it("answers 429 backlog with Retry-After from the queue's depth, and counts it as a problem", async () => {
    const { post, metrics, sqsCalls, published } = frontDoor(() => 250);
    const refused = await post();
    expect(refused.statusCode).toBe(429);
    expect(refused.headers?.["retry-after"]).toBe("15");
    expect(JSON.parse(refused.body ?? "{}")).toMatchObject({ code: "backlog" });
    expect(metrics).toEqual(["FrontDoorProblem"]);
    expect(sqsCalls).toEqual(["q-conv.fifo"]);
    expect(published).toEqual([]);
  });

  it("admits when SQS does not answer, with a warning and the FrontDoorBacklogUnread metric", async () => {
    const { post, metrics, warnings, sqsCalls, published } = frontDoor(
      () => new Error("AccessDenied"),
    );
    expect((await post()).statusCode).toBe(202);
    expect((await post()).statusCode).toBe(202);
    expect(published).toHaveLength(2);
    // The failed read is kept for the cache's seconds: one call, one metric, for both requests.
    expect(sqsCalls).toHaveLength(1);
    expect(metrics.filter((m) => m === "FrontDoorBacklogUnread")).toHaveLength(1);
    expect(warnings).toEqual(["could not read a queue's depth; admitting"]);
  });
});
