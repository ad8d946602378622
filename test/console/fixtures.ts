import type { WorkflowDefinition } from "../../functions/core/dag/definition";
import { InMemoryWorkflowRegistry, type WorkflowRegistry } from "../../functions/core/dag/registry";
import { ALL_FEATURES, type Feature } from "../../functions/roles/features";
import { REFERENCE_WORKFLOWS } from "../../functions/roles/modules";
import { workflowCatalog } from "../../functions/roles/orchestrator/catalog";
import { type ListFilter, ListPageError } from "../../lib/operator/lists";
import type {
  AgentWaitView,
  DeadLetterView,
  GroupOutcome,
  ItemPage,
  ItemSummary,
  OpsSource,
  OverviewView,
  RunView,
  TraceEvent,
  TraceNode,
  TraceView,
} from "../../lib/operator/views";
import { findWorkflow, listWorkflows } from "../../lib/operator/workflows";

// A realistic console state: one content-production run that failed in `writing`, and the trace of
// a customer-support conversation with a superseded reply, a retrying audit and a poison message.

export const CORRELATION_ID = "corr_01J9Z3QW8Y7M4R2K6T5N1B0C9D";
export const TASK_ID = "task_01J9Z3QW8Y1A2B3C4D5E6F7G8H";
export const RUN_ID = "run_01J9Z3R0000CONTENT000000001";

export const EVENT_IDS = {
  clientMessage: "01J9Z3QW90CLIENTMESSAGE00001",
  routed: "01J9Z3QWA0MESSAGEROUTED00001",
  firstReply: "01J9Z3QWB0REPLYGENERATED0001",
  secondReply: "01J9Z3QWC0REPLYGENERATED0002",
  orderLookup: "01J9Z3QWD0ORDERLOOKUP0000001",
} as const;

const T0 = Date.parse("2026-05-04T09:15:00.000Z");
export const at = (ms: number): string => new Date(T0 + ms).toISOString();

/** A trace event of the support conversation; `ms` is its time after T0. */
function event(
  e: Pick<TraceEvent, "eventId" | "eventType" | "version" | "producer" | "causationId"> & {
    readonly ms: number;
    readonly aggregate?: TraceEvent["aggregate"];
  },
): TraceEvent {
  const { ms, aggregate = conversation, ...rest } = e;
  return {
    ...rest,
    aggregate,
    occurredAt: at(ms),
    correlationId: CORRELATION_ID,
    taskId: TASK_ID,
  };
}

function node(
  e: TraceEvent,
  outcomes: GroupOutcome[],
  children: TraceNode[] = [],
  extra: Partial<Pick<TraceNode, "sideEffects" | "deadLetters">> = {},
): TraceNode {
  return { event: e, outcomes, sideEffects: [], deadLetters: [], children, ...extra };
}

const conversation = { type: "conversation", id: "conv_01J9Z3QW8Y" };
const reply = { eventType: "reply.generated", producer: "reply-generation" } as const;

/** Two replies to the routed message: the first superseded by the second, which was sent. */
function replies(): TraceNode[] {
  const causationId = EVENT_IDS.routed;
  const first = node(
    event({ ...reply, eventId: EVENT_IDS.firstReply, version: 2, ms: 1_900, causationId }),
    [{ group: "sender", outcome: "discarded", reason: "superseded", at: at(2_600) }],
  );
  const sent = { key: "send#conv_01J9Z3QW8Y#3", state: "succeeded", attempts: 1 } as const;
  const second = node(
    event({ ...reply, eventId: EVENT_IDS.secondReply, version: 3, ms: 2_400, causationId }),
    [{ group: "sender", outcome: "applied", at: at(2_700) }],
    [],
    { sideEffects: [{ ...sent, updatedAt: at(2_750) }] },
  );
  return [first, second];
}

/** The router's message: applied (through gap repair) by reply-generation, audit retrying. */
function routed(): TraceNode {
  const throttled = { code: "THROTTLED", message: "Rate exceeded" };
  return node(
    event({
      eventId: EVENT_IDS.routed,
      eventType: "message.routed",
      version: 1,
      producer: "router",
      ms: 600,
      causationId: EVENT_IDS.clientMessage,
    }),
    [
      { group: "reply-generation", outcome: "applied", at: at(900), repaired: true },
      { group: "audit", outcome: "retrying", attempts: 3, error: throttled, at: at(4_000) },
    ],
    replies(),
  );
}

/** A poison order lookup, dead-lettered after five receives and still in the DLQ. */
function orderLookup(): TraceNode {
  const invalid = { code: "INVALID_PAYLOAD", message: "order_id is not a string" };
  return node(
    event({
      eventId: EVENT_IDS.orderLookup,
      eventType: "order.lookup.requested",
      aggregate: { type: "order", id: "ord_4711" },
      version: 0,
      producer: "router",
      ms: 700,
      causationId: EVENT_IDS.clientMessage,
    }),
    [
      {
        group: "order-lookup",
        outcome: "dead-lettered",
        reason: "poison",
        attempts: 5,
        error: invalid,
        at: at(9_000),
      },
    ],
    [],
    { deadLetters: [{ group: "order-lookup", queue: "agentbus-order-lookup-dlq.fifo" }] },
  );
}

export function supportTrace(query: string): TraceView {
  const root = node(
    event({
      eventId: EVENT_IDS.clientMessage,
      eventType: "client.message.received",
      version: 0,
      producer: "channel-api",
      ms: 0,
    }),
    [{ group: "router", outcome: "applied", at: at(400) }],
    [routed(), orderLookup()],
  );
  return { query, correlationIds: [CORRELATION_ID], taskIds: [TASK_ID], roots: [root] };
}

/** topic_selection, then fact_check and writing in parallel, then review; writing failed. */
function runNodes(): RunView["nodes"] {
  const done = (id: string, role: string, from: number, to: number) => ({
    id,
    role,
    state: "COMPLETED",
    attempt: 1,
    startedAt: at(from),
    endedAt: at(to),
    durationMs: to - from,
  });
  const timeout = { code: "MODEL_TIMEOUT", message: "the model did not answer within 15 s" };
  const failedAfter = { startedAt: at(2_200), endedAt: at(48_000), error: timeout };
  return [
    done("topic_selection", "topic-selection", 0, 2_100),
    done("fact_check", "fact-check", 2_200, 6_500),
    { id: "writing", role: "writing", state: "FAILED", attempt: 3, ...failedAfter },
    { id: "review", role: "review", state: "CANCELLED", attempt: 0 },
  ];
}

function runTimeline(): RunView["timeline"] {
  const step = (ms: number, event: string, nodeId: string | undefined, cause: string) => ({
    at: at(ms),
    event,
    ...(nodeId ? { nodeId } : {}),
    generation: 1,
    cause,
  });
  return [
    step(0, "run.started", undefined, "content request accepted"),
    step(10, "node.assigned", "topic_selection", "no upstream"),
    step(2_100, "node.completed", "topic_selection", "agent answered"),
    step(2_200, "node.assigned", "fact_check", "upstream completed"),
    step(2_200, "node.assigned", "writing", "upstream completed"),
    step(6_500, "node.completed", "fact_check", "agent answered"),
    step(48_000, "node.failed", "writing", "MODEL_TIMEOUT after 3 attempts"),
    step(48_000, "node.cancelled", "review", "upstream writing failed"),
    step(48_010, "run.failed", undefined, "node writing failed"),
  ];
}

export function contentRun(): RunView {
  return {
    runId: RUN_ID,
    workflow: { name: "content-production", version: 2 },
    status: "FAILED",
    generation: 1,
    correlationId: CORRELATION_ID,
    taskId: TASK_ID,
    nodes: runNodes(),
    edges: [
      { from: "topic_selection", to: "fact_check" },
      { from: "topic_selection", to: "writing" },
      { from: "fact_check", to: "review", condition: 'verdict = "pass"' },
      { from: "writing", to: "review" },
    ],
    timeline: runTimeline(),
  };
}

export const CHILD_RUN_ID = "run_01J9Z3R0000FACTCHECK0000001";

/**
 * A parent run whose fact-check node ran as a child run, and that child: the parent names its
 * child runs, the child its parent.
 */
export function parentAndChildRuns(): RunView[] {
  const parent = contentRun();
  return [
    { ...parent, childRuns: [{ nodeId: "fact_check", runId: CHILD_RUN_ID }] },
    {
      ...parent,
      runId: CHILD_RUN_ID,
      workflow: { name: "content.fact-check", version: 1 },
      status: "COMPLETED",
      parentRunId: RUN_ID,
      nodes: [],
      edges: [],
      timeline: [],
    },
  ];
}

export function deadLetters(): DeadLetterView[] {
  return [
    {
      group: "order-lookup",
      queue: "queue",
      messageId: "5f1c7a2e-0d7e-4c1b-9a55-2b7f3f6d9e10",
      eventId: EVENT_IDS.orderLookup,
      eventType: "order.lookup.requested",
      orderKey: "order#ord_4711",
      code: "INVALID_PAYLOAD",
      reason: "poison",
      receiveCount: 5,
      sentAt: at(9_000),
      correlationId: CORRELATION_ID,
      taskId: TASK_ID,
    },
  ];
}

const item = (
  kind: "run" | "conversation" | "task",
  id: string,
  status: string,
  ms: number,
  label?: string,
) => ({
  kind,
  id,
  status,
  // Listed (first summarized) a second before its last change.
  listedAt: at(ms - 1_000),
  updatedAt: at(ms),
  label,
});

export function overview(): OverviewView {
  const failedRun = item("run", RUN_ID, "FAILED", 48_010, "content-production v2");
  return {
    runs: [
      failedRun,
      item("run", "run_01J9Z3R0000CONTENT000000002", "COMPLETED", 30_000, "content-production v2"),
    ],
    conversations: [item("conversation", "conv_01J9Z3QW8Y", "REPLIED", 2_750, "reply sent")],
    tasks: [item("task", TASK_ID, "DONE", 2_750)],
    waiting: {
      heldReplies: [
        {
          ...item("conversation", "conv_01J9Z3HELD", "HELD", 5_000, "reply held for review"),
          waitingSince: at(4_500),
        },
      ],
      unknownSideEffects: [
        { key: `${TASK_ID}:reply:2`, state: "unknown", attempts: 2, updatedAt: at(7_000) },
      ],
      awaitingApproval: [],
      needsHuman: [],
      failedRuns: [failedRun],
      handedOff: [
        {
          ...item("conversation", "conv_01J9Z3HANDOFF", "failed", 6_000, "order_status"),
          waitingSince: at(6_000),
        },
      ],
    },
    status: {
      features: ALL_FEATURES,
      groups: [
        { group: "router", depth: 0, inFlight: 0, oldestAgeSeconds: 0, deadLetters: 0 },
        { group: "audit", depth: 1, inFlight: 1, oldestAgeSeconds: 42, deadLetters: 0 },
        {
          group: "order-lookup",
          depth: 0,
          inFlight: 0,
          deadLetters: 1,
          bufferDepth: 0,
          bufferDeadLetters: 0,
        },
      ],
      relayIteratorAgeMs: 350,
      relayFailures: 0,
      lastSweepAt: at(9_000),
      runsByStatus: { FAILED: 1, COMPLETED: 1 },
      counts: {
        heldReplies: 1,
        unknownSideEffects: 1,
        awaitingApproval: 0,
        needsHumanNodes: 0,
        failedNodes: 1,
        handedOff: 1,
      },
    },
  };
}

export const APPROVAL_RUN = "rrun_01J9Z3S0000REFUND00000001";
export const OUTCOME_RUN = "rrun_01J9Z3S0000REFUND00000002";
export const ANSWER_RUN = "rrun_01J9Z3S0000REFUND00000003";
export const REFUND_TASK = "task_01J9Z3S0000REFUND0000000A";
export const REFUND_KEY = `${REFUND_TASK}:${OUTCOME_RUN}:call_2_1`;

/** Two refund reviews waiting: one BLOCKED on approving a refund, one NEEDS_HUMAN on its outcome. */
export function agentWaits(): AgentWaitView[] {
  const refund = (runId: string, orderId: string, amount: number) => ({
    runId,
    agent: "refund-review",
    taskId: REFUND_TASK,
    toolCallId: "call_2_1",
    tool: "issue_refund",
    input: { order_id: orderId, amount_cents: amount, currency: "USD" },
  });
  return [
    {
      ...refund(APPROVAL_RUN, "R-1001", 20_000),
      status: "BLOCKED",
      kind: "approval",
      since: at(60_000),
      deadline: at(86_460_000),
      reason: "issue_refund needs a person's approval: a refund above 100.00",
    },
    {
      ...refund(OUTCOME_RUN, "R-1002", 4_999),
      status: "NEEDS_HUMAN",
      kind: "outcome",
      key: REFUND_KEY,
      since: at(70_000),
      reason: "issue_refund: the query by key could not tell",
    },
  ];
}

/** A refund review handed over for good: NEEDS_HUMAN waiting for a person's answer. */
export function answerWait(): AgentWaitView {
  return {
    runId: ANSWER_RUN,
    agent: "refund-review",
    taskId: REFUND_TASK,
    status: "NEEDS_HUMAN",
    kind: "answer",
    answerExample: {
      decision: "approved",
      reason: "<reason>",
      amount_cents: 0,
      refund_id: "<refund_id>",
    },
    since: at(80_000),
    reason: "3 model turns in a row went wrong (the answer did not fit)",
  };
}

/** The overview with the refund reviews listed as waiting, and what their journals say. */
export function agentOverview(waits: readonly AgentWaitView[] = agentWaits()): OverviewView {
  const base = overview();
  const listed = (w: AgentWaitView) => ({
    ...item("task", w.runId, w.status, Date.parse(w.since) - Date.parse(at(0)), ""),
    label: `refund-review ${w.runId} waits for ${w.kind}${w.tool ? ` of ${w.tool} ${w.toolCallId}` : ""}`,
    waitingSince: w.since,
  });
  const blocked = waits.filter((w) => w.kind === "approval").map(listed);
  const needsHuman = waits.filter((w) => w.kind !== "approval").map(listed);
  const unknown = {
    key: REFUND_KEY,
    state: "unknown",
    attempts: 6,
    updatedAt: at(70_000),
  } as const;
  return {
    ...base,
    waiting: {
      ...base.waiting,
      awaitingApproval: blocked,
      needsHuman,
      unknownSideEffects: [...base.waiting.unknownSideEffects, unknown],
    },
    status: { ...base.status, counts: { ...base.status.counts, awaitingApproval: 1 } },
    agentWaits: waits,
  };
}

function eventIds(nodes: readonly TraceNode[]): string[] {
  return nodes.flatMap((n) => [n.event.eventId, ...eventIds(n.children)]);
}

/** An in-memory OpsSource: the trace is found by its correlation, task or any event id. */
export function fakeSource(
  data: {
    readonly overview?: OverviewView;
    readonly traces?: readonly TraceView[];
    readonly runs?: readonly RunView[];
    readonly deadLetters?: readonly DeadLetterView[];
    /** @default every feature, as the reference stack has them */
    readonly features?: readonly Feature[];
    /** The registered workflows (besides the stack's). @default an empty registry */
    readonly registry?: WorkflowRegistry;
    /** The workflows the stack was given besides the reference stack's (content production's). @default none */
    readonly stackWorkflows?: readonly WorkflowDefinition[];
    /** The runs `/runs` lists, newest first. @default the overview's runs */
    readonly runList?: readonly ItemSummary[];
    /** How many runs a page of `/runs` holds. @default 50 */
    readonly runPageSize?: number;
  } = {},
): OpsSource {
  const catalog = {
    compiled: workflowCatalog([...REFERENCE_WORKFLOWS, ...(data.stackWorkflows ?? [])]),
    registry: data.registry ?? new InMemoryWorkflowRegistry(),
  };
  return {
    features: data.features ?? ALL_FEATURES,
    overview: async () => data.overview ?? overview(),
    runList: async (filter, after) =>
      pageOfRuns(data.runList ?? overview().runs, filter, data.runPageSize ?? 50, after),
    trace: async (id) => {
      const found = (data.traces ?? [supportTrace("")]).find(
        (t) =>
          t.correlationIds.includes(id) || t.taskIds.includes(id) || eventIds(t.roots).includes(id),
      );
      return found && { ...found, query: id };
    },
    run: async (runId) => (data.runs ?? [contentRun()]).find((r) => r.runId === runId),
    deadLetters: async () => data.deadLetters ?? deadLetters(),
    workflows: (tenant) => listWorkflows(catalog, tenant),
    workflow: (name, options) => findWorkflow(catalog, name, options),
  };
}

/**
 * A page of `runs` as the stack's lists give it: filtered, `size` at most, continued from the
 * `next` of the page before (its offset here).
 */
function pageOfRuns(
  runs: readonly ItemSummary[],
  filter: ListFilter,
  size: number,
  after: string | undefined,
): ItemPage {
  const from = after === undefined ? 0 : Number(/^at-(\d+)$/.exec(after)?.[1] ?? Number.NaN);
  if (Number.isNaN(from))
    throw new ListPageError(`${JSON.stringify(after)} is not where a page of a list ended`);
  const listed = (run: ItemSummary) => run.listedAt ?? run.updatedAt;
  const matching = runs.filter(
    (run) =>
      (filter.tenant === undefined || (run.tenant ?? "default") === filter.tenant) &&
      (filter.status === undefined || run.status === filter.status) &&
      (filter.since === undefined || listed(run) >= filter.since) &&
      (filter.before === undefined || listed(run) < filter.before),
  );
  const rows = matching.slice(from, from + size);
  return from + size < matching.length ? { rows, next: `at-${from + size}` } : { rows };
}

/** A source whose every read fails, as DynamoDB does when the table is missing. */
export function failingSource(message: string): OpsSource {
  const fail = async (): Promise<never> => {
    throw new Error(message);
  };
  return {
    features: ALL_FEATURES,
    overview: fail,
    runList: fail,
    trace: fail,
    run: fail,
    deadLetters: fail,
    workflows: fail,
    workflow: fail,
  };
}
