import { Readable } from "node:stream";
import { BedrockRuntimeClient } from "@aws-sdk/client-bedrock-runtime";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DeleteQueueCommand, SQSClient } from "@aws-sdk/client-sqs";
import { HttpResponse } from "@smithy/core/transport";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TableNames } from "../../functions/adapters/dynamodb/tables";
import {
  type AttentionRule,
  type AttentionSignal,
  NEEDS_HUMAN,
  raiseOn,
} from "../../functions/core/attention";
import type { EmitSpec } from "../../functions/core/emit";
import type { ConsumeResult, Role } from "../../functions/core/role";
import type { RoleModule } from "../../functions/core/role-module";
import { ManualClock } from "../../functions/core/runtime";
import { createConsumerHandler } from "../../functions/handlers/consumer";
import { attentionCounts, lagMs } from "../../functions/handlers/consumer-metrics";
import { createModuleHandler } from "../../functions/handlers/module-entry";
import { observability } from "../../functions/handlers/observe";
import { modelAdapter } from "../../functions/integrations/model/aws";
import { contentAgentModule } from "../../functions/roles/content-agents/index";
import { orderLookupModule } from "../../functions/roles/customer-support/order-lookup/index";
import { replyGenerationModule } from "../../functions/roles/customer-support/reply-generation/index";
import { HELD_REPLY_ATTENTION } from "../../functions/roles/customer-support/reply-generation/review";
import { senderModule } from "../../functions/roles/customer-support/sender/index";
import { orchestratorModule } from "../../functions/roles/orchestrator/index";
import { refundReviewModule } from "../../functions/roles/refund-review/index";
import { fromSdk } from "../../lib/operator/from-sdk";
import { type Envelope, registry } from "../../schemas";
import { emulator } from "../support/aws";
import { newCorrelationId, newTaskId, newUlid, taskEvent } from "../support/factories";
import { queueArnOf, sqsEvent, sqsRecord } from "../support/lambda-events";
import { createQueue } from "../support/queues";
import { createTables, deleteTables } from "../support/tables";

process.env.POWERTOOLS_LOG_LEVEL = "SILENT";
process.env.POWERTOOLS_METRICS_DISABLED = "true";

const suffix = newUlid().toLowerCase();
let dynamodb: DynamoDBClient;
let sqs: SQSClient;
let tables: TableNames;
const queues: string[] = [];

beforeAll(async () => {
  dynamodb = new DynamoDBClient(emulator());
  sqs = new SQSClient(emulator());
  tables = await createTables(dynamodb, `cm-${suffix}`);
  for (const name of ["cm-group", "cm-group-dlq"])
    queues.push(await createQueue(sqs, `${name}-${suffix}`, true));
});

afterAll(async () => {
  await deleteTables(dynamodb, tables);
  for (const url of queues) await sqs.send(new DeleteQueueCommand({ QueueUrl: url }));
  dynamodb.destroy();
  sqs.destroy();
});

function consumerEnv(group: string) {
  return {
    GROUP_NAME: group,
    STATE_TABLE: tables.state,
    EVENTS_TABLE: tables.events,
    INBOX_TABLE: tables.inbox,
    SIDE_EFFECTS_TABLE: tables.sideEffects,
    QUEUE_URL: queues[0],
    DEAD_LETTER_QUEUE_URL: queues[1],
    INBOX_TTL_DAYS: "7",
    RETRY_BASE_SECONDS: "2",
    RETRY_MAX_SECONDS: "60",
  };
}

type Emf = Record<string, unknown> & {
  _aws: { CloudWatchMetrics: { Namespace: string; Dimensions: string[][] }[] };
};

/**
 * The consumer's Powertools metrics, published for real (as the EMF lines CloudWatch reads) into
 * a list instead of stdout.
 */
function capturedMetrics(group: string) {
  const obs = observability(group, group);
  const lines: Emf[] = [];
  Object.assign(obs.metrics, {
    disabled: false,
    console: { log: (line: string) => lines.push(JSON.parse(line) as Emf) },
  });
  /** Every value published under `name`, in order, checking namespace and dimensions. */
  const values = (name: string): number[] =>
    lines
      .filter((line) => name in line)
      .flatMap((line) => {
        expect(line._aws.CloudWatchMetrics[0]?.Namespace).toBe("AgentBus");
        expect(line._aws.CloudWatchMetrics[0]?.Dimensions).toEqual([["service", "consumer_group"]]);
        expect([line.service, line.consumer_group]).toEqual([group, group]);
        return ([] as number[]).concat(line[name] as number | number[]);
      });
  return { observability: obs, values };
}

function recordOf(envelope: Envelope) {
  return sqsRecord({
    body: JSON.stringify(envelope),
    groupId: envelope.order_key,
    deduplicationId: envelope.event_id,
    queueArn: queueArnOf(String(queues[0])),
  });
}

const START = "2026-03-02T09:00:00.000Z";
const conversationId = () => `conv_${newUlid()}`;

/** The attention rules the modules declare (`deployment.attention`), together. */
const rulesOf = (...modules: RoleModule[]): AttentionRule[] =>
  modules.flatMap((module) => module.deployment.attention ?? []);

/** What a record's decision emits: four events a person must act on, two that need nobody. */
function emitted(conversation: string, runId: string): EmitSpec[] {
  const delivery = {
    conversation_id: conversation,
    channel: "chat",
    idempotency_key: `${newTaskId()}:reply:1`,
    code: "channel.outcome_unknown",
    message: "no answer from the channel",
  };
  const result = {
    status: "FAILED",
    outputs: {},
    completed: [],
    degraded: [],
    failed: [{ node_id: "writing" }],
    cancelled: [],
    skipped: [],
  };
  const nodeFailure = (code: string) => ({
    run_id: runId,
    node_id: "writing",
    generation: 0,
    error: { code, errorClass: "permanent", message: "given up" },
  });
  return [
    { type: "notification.failed", payload: { ...delivery, outcome: "unknown" } },
    { type: "notification.failed", payload: { ...delivery, outcome: "failed" } },
    {
      type: "reply.held_for_review",
      payload: { conversation_id: conversation, reply_text: "Hello", reason: "low confidence" },
    },
    { type: "workflow.failed", payload: { run_id: runId, result } },
    { type: "writing.failed", payload: nodeFailure("model.invalid_output") },
    { type: "writing.failed", payload: nodeFailure("model.throttled") },
  ];
}

describe("consumer metrics: what the handler publishes per record", () => {
  it("consumer lag from occurred_at, processing time, and what needs a person", async () => {
    const clock = new ManualClock(START);
    const group = "cm-attention";
    const runId = `run_${newUlid()}`;
    const role: Role<unknown> = {
      group,
      subscriptions: ["task.accepted"],
      decide: () => {
        clock.advance(250); // the work of the record
        return { state: { seen: true }, emit: emitted(conversationId(), runId) };
      },
    };
    const metrics = capturedMetrics(group);
    const handler = createConsumerHandler(role, {
      dynamodb: fromSdk(dynamodb),
      sqs: fromSdk(sqs),
      clock,
      env: consumerEnv(group),
      observability: metrics.observability,
      attention: rulesOf(
        senderModule,
        replyGenerationModule,
        orchestratorModule,
        contentAgentModule("writing"),
      ),
    });
    const occurredAt = new Date(new Date(START).getTime() - 1234);
    const response = await handler(sqsEvent([recordOf(taskEvent(1, { occurredAt }))]));

    expect(response.batchItemFailures).toEqual([]);
    expect(metrics.values("ConsumerLag")).toEqual([1234]);
    expect(metrics.values("ProcessingTime")).toEqual([250]);
    expect(metrics.values("Applied")).toEqual([1]);
    expect(metrics.values("UnknownSideEffectOutcome")).toEqual([1]);
    expect(metrics.values("ReplyHeldForReview")).toEqual([1]);
    expect(metrics.values("WorkflowFailed")).toEqual([1]);
    expect(metrics.values("AgentRunNeedsHuman")).toEqual([1]);
  });

  it("publishes nothing a person must act on for a record that emitted none of it", async () => {
    const clock = new ManualClock(START);
    const group = "cm-quiet";
    const role: Role<unknown> = { group, subscriptions: ["task.accepted"], decide: () => ({}) };
    const metrics = capturedMetrics(group);
    const handler = createConsumerHandler(role, {
      dynamodb: fromSdk(dynamodb),
      sqs: fromSdk(sqs),
      clock,
      env: consumerEnv(group),
      observability: metrics.observability,
    });
    await handler(sqsEvent([recordOf(taskEvent(1, { occurredAt: new Date(START) }))]));
    expect(metrics.values("ConsumerLag")).toEqual([0]);
    expect(metrics.values("ProcessingTime")).toEqual([0]);
    for (const name of [
      "UnknownSideEffectOutcome",
      "ReplyHeldForReview",
      "WorkflowFailed",
      "AgentRunNeedsHuman",
      "ModelLatency",
    ])
      expect(metrics.values(name), name).toEqual([]);
  });
});

/** A BedrockRuntimeClient whose HTTP layer answers every Converse call with `text`. */
function fakeBedrock(text: string, usage: { inputTokens: number; outputTokens: number }[]) {
  let calls = 0;
  const client = new BedrockRuntimeClient({
    region: "us-east-1",
    credentials: { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "secret" },
    maxAttempts: 1,
    requestHandler: {
      async handle() {
        const tokens = usage[calls] ?? { inputTokens: 0, outputTokens: 0 };
        calls++;
        const body = {
          output: { message: { role: "assistant", content: [{ text }] } },
          stopReason: "end_turn",
          usage: { ...tokens, totalTokens: tokens.inputTokens + tokens.outputTokens },
          metrics: { latencyMs: 100 * calls },
        };
        return {
          response: new HttpResponse({
            statusCode: 200,
            headers: { "content-type": "application/json" },
            body: Readable.from([Buffer.from(JSON.stringify(body))]),
          }),
        };
      },
    },
  });
  return fromSdk(client);
}

/** The orchestrator's `writing.requested` for a new run (first on the run's stream). */
function writingRequested(): Envelope {
  const runId = `run_${newUlid()}`;
  const parsed = registry.parse({
    event_id: newUlid(),
    event_type: "writing.requested",
    schema_version: 1,
    occurred_at: new Date(Date.now() - 5000).toISOString(),
    correlation_id: newCorrelationId(),
    causation_id: null,
    task_id: newTaskId(),
    aggregate: { type: "dag_run", id: runId, version: 1 },
    order_key: runId,
    producer: "orchestrator",
    payload: {
      run_id: runId,
      node_id: "writing",
      generation: 0,
      attempt: 1,
      input: {},
      run_input: { topic_hint: "grid storage" },
    },
  });
  if (!parsed.ok) throw new Error(parsed.message);
  return parsed.envelope;
}

describe("consumer metrics: model calls", () => {
  it("latency and tokens of every Bedrock call; a run that ends NEEDS_HUMAN is counted", async () => {
    const metrics = capturedMetrics("writing");
    const usage = [
      { inputTokens: 120, outputTokens: 30 },
      { inputTokens: 180, outputTokens: 31 },
      { inputTokens: 240, outputTokens: 32 },
    ];
    const handler = createModuleHandler(
      contentAgentModule("writing"),
      {
        dynamodb: fromSdk(dynamodb),
        sqs: fromSdk(sqs),
        clients: { "bedrock-runtime": fakeBedrock("no JSON here", usage) },
        env: { ...consumerEnv("writing"), MODEL_PROVIDER: "bedrock", MODEL_ID: "test.model-v1" },
        observability: metrics.observability,
      },
      [modelAdapter],
    );
    const response = await handler(sqsEvent([recordOf(writingRequested())]));

    expect(response.batchItemFailures).toEqual([]);
    // Three answers out of shape: the run's budget spent, NEEDS_HUMAN and writing.failed.
    expect(metrics.values("ModelLatency")).toEqual([100, 200, 300]);
    expect(metrics.values("ModelInputTokens")).toEqual([120, 180, 240]);
    expect(metrics.values("ModelOutputTokens")).toEqual([30, 31, 32]);
    expect(metrics.values("AgentRunNeedsHuman")).toEqual([1]);
    expect(metrics.values("ConsumerLag")[0]).toBeGreaterThanOrEqual(5000);
  });
});

describe("consumer metrics: pure parts", () => {
  it("lag is undefined without a readable occurred_at, and never negative", () => {
    const now = new Date(START);
    expect(lagMs({ occurred_at: "2026-03-02T08:59:59.000Z" }, now)).toBe(1000);
    expect(lagMs({ occurred_at: "2026-03-02T09:00:01.000Z" }, now)).toBe(0);
    expect(lagMs({ occurred_at: "yesterday-ish" }, now)).toBeUndefined();
    expect(lagMs({}, now)).toBeUndefined();
    expect(lagMs("not an envelope", now)).toBeUndefined();
    expect(lagMs(null, now)).toBeUndefined();
  });

  /** A delivery whose steps emitted these events (one step each list). */
  const delivered = (...steps: Envelope[][]) =>
    ({
      steps: steps.map((emitted) => ({
        eventId: newUlid(),
        eventType: "task.accepted",
        version: 1,
        status: "applied" as const,
        repaired: false,
        emitted,
      })),
    }) as unknown as ConsumeResult;
  const event = (event_type: string, payload: Record<string, unknown> = {}) =>
    ({ event_type, payload }) as unknown as Envelope;

  it("counts only what was emitted, across every step of a delivery", () => {
    const held = (conversation: string) =>
      event("reply.held_for_review", { conversation_id: conversation });
    const result = delivered([held("conv_a")], [], [held("conv_b"), held("conv_c")]);
    expect([...attentionCounts(result, [HELD_REPLY_ATTENTION])]).toEqual([
      ["ReplyHeldForReview", 3],
    ]);
  });

  it("counts what waits for a person's approval: a refund's tool call, a content agent's confirmation", () => {
    const result = delivered([
      event("node.blocked", { run_id: "run_a", node_id: "write", question: "?" }),
      event("refund.review.needs_person", { waiting: "approval" }),
      event("refund.review.needs_person", { waiting: "outcome" }),
      event("refund.review.needs_person", { waiting: "answer" }),
    ]);
    const rules = rulesOf(contentAgentModule("writing"), refundReviewModule);
    expect([...attentionCounts(result, rules)]).toEqual([
      ["ApprovalRequested", 2],
      ["UnknownSideEffectOutcome", 1],
      ["AgentRunNeedsHuman", 1],
    ]);
  });

  it("counts a content agent's run that ended NEEDS_HUMAN, not one that failed otherwise", () => {
    const failed = (type: string, code: string) =>
      event(type, { run_id: "run_a", node_id: "n", generation: 0, error: { code } });
    const result = delivered([
      failed("writing.failed", "model.invalid_output"),
      failed("writing.failed", "model.invalid_output.schema"),
      failed("writing.failed", "model.invalid_outputs"),
      failed("writing.failed", "model.throttled"),
      // Another agent's failure: not what the writing agent's module declares.
      failed("review.failed", "model.invalid_output"),
    ]);
    expect([...attentionCounts(result, rulesOf(contentAgentModule("writing")))]).toEqual([
      ["AgentRunNeedsHuman", 2],
    ]);
  });

  it("counts PARTIAL runs and support turns handed off to a person, apart from FAILED runs", () => {
    const stepFailed = (handed_off: boolean) =>
      event("support.step.failed", {
        conversation_id: "conv_a",
        step: "order_lookup",
        code: "dynamodb.access_denied",
        message: "no",
        handed_off,
      });
    const result = delivered([
      event("workflow.partial", { run_id: "run_a" }),
      event("workflow.failed", { run_id: "run_b" }),
      stepFailed(true),
      stepFailed(false),
      event("workflow.completed", { run_id: "run_c" }),
    ]);
    const rules = rulesOf(orchestratorModule, orderLookupModule);
    expect([...attentionCounts(result, rules)]).toEqual([
      ["WorkflowPartial", 1],
      ["WorkflowFailed", 1],
      ["SupportTurnHandedOff", 1],
    ]);
  });

  it("counts only what the group's own rules name: another group's signals are not its own", () => {
    const result = delivered([
      event("notification.failed", { outcome: "unknown" }),
      event("reply.held_for_review"),
    ]);
    expect([...attentionCounts(result, [])]).toEqual([]);
    expect([...attentionCounts(result, rulesOf(senderModule))]).toEqual([
      ["UnknownSideEffectOutcome", 1],
    ]);
  });

  it("counts an event once per signal, however many of the group's rules find it", () => {
    const result = delivered([event("review.failed", { error: { code: "x" } })]);
    const rules = [
      raiseOn("review.failed", NEEDS_HUMAN),
      { signal: NEEDS_HUMAN, raisedBy: () => true },
    ];
    expect([...attentionCounts(result, rules)]).toEqual([["AgentRunNeedsHuman", 1]]);
  });

  it("counts a signal a role outside the hub declares, under its own metric", () => {
    const escalated: AttentionSignal = {
      name: "escalated-tickets",
      metric: "TicketEscalated",
      alarm: {
        id: "EscalatedAlarm",
        what: "tickets escalated",
        why: "a person owns them",
        act: "Run it",
      },
    };
    const rule: AttentionRule = {
      signal: escalated,
      raisedBy: (e) => e.event_type === "task.accepted",
    };
    const result = delivered([
      event("task.accepted"),
      event("task.accepted"),
      event("plan.created"),
    ]);
    expect([...attentionCounts(result, [rule])]).toEqual([["TicketEscalated", 2]]);
  });
});
