import { PutEventsCommand } from "@aws-sdk/client-eventbridge";
import { ulid } from "ulid";
import { appendToStream } from "../../../functions/core/producer";
import type { Decision } from "../../../functions/core/role";
import { systemClock, ulidSource } from "../../../functions/core/runtime";
import {
  FAIL_FACT_CHECK_MARKER,
  NEEDS_REVISION_MARKER,
} from "../../../functions/roles/content-agents/local-scripts";
import type { TaskView } from "../../../functions/roles/task-projection/task-projection";
import { type Envelope, registry } from "../../../schemas";
import type { LocalEnvironment } from "./environment";
import { type Check, check } from "./scenario/check";
import { readDeadLetters } from "./scenario/dead-letters";
import {
  hasContentWorkflow,
  loadChildRuns,
  startWorkflow,
  type WorkflowRun,
  waitForRunEnd,
  workflowChecks,
} from "./scenario/workflow";
import type { DeadLetter } from "./trace";

export interface ScenarioResult {
  readonly correlations: string[];
  readonly checks: Check[];
  readonly deadLetters: DeadLetter[];
  readonly views: Record<string, TaskView | undefined>;
  /** The content-production runs the scenario started, each with its final orchestrator state. */
  readonly runs: WorkflowRun[];
}

/** The reference task's lifecycle events, in stream order (also used by the LocalStack suite). */
export const LIFECYCLE = [
  { type: "task.accepted", payload: { title: "Why has my refund not arrived?" } },
  {
    type: "plan.created",
    payload: {
      steps: [
        { title: "look up the order", tool: "orders.get" },
        { title: "check the refund", tool: "refunds.status" },
        { title: "draft a reply" },
      ],
    },
  },
  { type: "answer.generated", payload: { answer_ref: "ans_refund-eta" } },
  { type: "notification.sent", payload: { channel: "email" } },
];

type TaskName = "A" | "B" | "C";

/** What the task part of the scenario works with: the stack, its events bus, the three tasks. */
interface TaskContext {
  readonly env: LocalEnvironment;
  readonly deps: ReturnType<typeof producerDeps>;
  readonly bus: string;
  readonly tasks: Record<TaskName, string>;
  readonly correlations: Record<TaskName, string>;
}

/** What the task part left behind for the checks. */
interface TaskOutcome {
  /** Task A's v2, whose acknowledgement was lost. */
  readonly aV2: Envelope;
  /** Task B's v1..v3. */
  readonly b: Envelope[];
  /** The poison message put on the bus. */
  readonly poison: { readonly event_id: string };
}

/**
 * The reference scenario on the local stack, with the faults a real deployment meets:
 * - task A: a full lifecycle; the consumer's acknowledgement of v2 is lost, so v2 is delivered again;
 * - task B: v3 reaches the bus before v1 and v2 (the relay is held back and v3 is replayed ahead),
 *   so the consumer repairs the gap from the event store and the late originals are duplicates;
 * - task C: accepted, then client feedback sent with `put-events` (unsequenced): one is
 *   delivered twice, one has already expired on arrival;
 * - a poison message (an id that looks like a phone number) is put on the bus;
 * - content production: `workflow.start.requested` on the commands bus for a quick-news run
 *   (each claim's fact check and writing in parallel), a long-form run (serial, its fact check
 *   a child run; its request carries `[needs-revision]`, so review sends the first draft back
 *   once) and a quick-news run
 *   whose request carries `[fail-fact-check]` (every claim's check fails: the fact check fails,
 *   review is cancelled, the run PARTIAL); each is waited for through its dag_run state.
 * Then every expectation is checked against the stored state and what the runtime observed.
 */
export async function runScenario(
  env: LocalEnvironment,
  log: (line: string) => void = () => {},
): Promise<ScenarioResult> {
  const ctx = taskContext(env);
  const aV2 = await runTaskA(ctx, log);
  const b = await runTaskB(ctx, log);
  const poison = await runTaskC(ctx, log);
  const runs = await runContentWorkflows(env, log);
  const deadLetters = await readDeadLetters(env);
  const views = await loadTaskViews(env, ctx.tasks);
  const checks = scenarioChecks(env, views, deadLetters, runs, { aV2, b, poison });
  return {
    correlations: [...Object.values(ctx.correlations), ...runs.map((r) => r.correlationId)],
    checks,
    deadLetters,
    views,
    runs,
  };
}

function producerDeps(env: LocalEnvironment) {
  return { store: env.store, registry, clock: systemClock, ids: ulidSource() };
}

function taskContext(env: LocalEnvironment): TaskContext {
  const deps = producerDeps(env);
  const bus = env.buses.events;
  if (!bus) throw new Error("the stack has no events bus");
  const tasks = { A: `task_${ulid()}`, B: `task_${ulid()}`, C: `task_${ulid()}` };
  const correlations = { A: `corr_${ulid()}`, B: `corr_${ulid()}`, C: `corr_${ulid()}` };
  return { env, deps, bus, tasks, correlations };
}

/** The task API commits the task's first `steps` lifecycle events, each caused by the previous. */
async function appendLifecycle(
  ctx: TaskContext,
  task: TaskName,
  steps: number,
  cause?: Envelope,
): Promise<Envelope[]> {
  const out: Envelope[] = [];
  let previous = cause;
  for (const step of LIFECYCLE.slice(0, steps)) {
    const emitted = await appendToStream(ctx.deps, {
      aggregate: { type: "task", id: ctx.tasks[task] },
      producer: "task-api",
      correlationId: ctx.correlations[task],
      taskId: ctx.tasks[task],
      cause: previous,
      decide: (state): Decision<{ status: string }> => ({
        state: { status: step.type, ...(state?.data as object | undefined) },
        emit: [step],
      }),
    });
    out.push(...emitted);
    previous = emitted.at(-1);
  }
  return out;
}

/** Put raw envelopes on the events bus (`put-events`), as a client or a replay would. */
async function putEvents(
  ctx: TaskContext,
  envelopes: unknown[],
  source = "agentbus.client",
): Promise<void> {
  const response = await ctx.env.clients.eventbridge.send(
    new PutEventsCommand({
      Entries: envelopes.map((e) => ({
        EventBusName: ctx.bus,
        Source: source,
        DetailType: String((e as { event_type?: string }).event_type ?? "unknown"),
        Detail: JSON.stringify(e),
      })),
    }),
  );
  if (response.FailedEntryCount)
    throw new Error(`put-events failed: ${JSON.stringify(response.Entries)}`);
}

/** A client's feedback on task C (unsequenced). */
function feedback(ctx: TaskContext, rating: number, extra: Record<string, unknown> = {}) {
  return clientFeedback({ id: ctx.tasks.C, correlationId: ctx.correlations.C }, rating, extra);
}

/**
 * A client's feedback on a task (unsequenced), as the client puts it on the bus; `extra`
 * overrides any field (an expired or a poison message is made this way, so it is not validated).
 */
export function clientFeedback(
  task: { readonly id: string; readonly correlationId: string },
  rating: number,
  extra: Record<string, unknown> = {},
): Envelope {
  return {
    event_id: ulid(),
    event_type: "task.feedback.received",
    schema_version: 1,
    occurred_at: new Date().toISOString(),
    correlation_id: task.correlationId,
    causation_id: null,
    task_id: task.id,
    aggregate: { type: "task", id: task.id, version: 0 },
    order_key: task.id,
    producer: "web-client",
    payload: { rating },
    ...extra,
  } as Envelope;
}

/** Task A: full lifecycle, the consumer's ack of v2 is lost once. Returns v2. */
async function runTaskA(ctx: TaskContext, log: (line: string) => void): Promise<Envelope> {
  const { runtime } = ctx.env;
  log("task A: the task API commits 4 events; the consumer's acknowledgement of v2 will be lost");
  runtime.pauseStream();
  const a = await appendLifecycle(ctx, "A", 4);
  const aV2 = a[1] as Envelope;
  runtime.loseAckOnce(aV2.event_id, "task-projection");
  runtime.resumeStream();
  await runtime.idle();
  return aV2;
}

/** Task B: v3 overtakes v1 and v2. Returns v1..v3. */
async function runTaskB(ctx: TaskContext, log: (line: string) => void): Promise<Envelope[]> {
  const { runtime, observations } = ctx.env;
  log("task B: the relay is held back; v3 is replayed to the bus ahead of v1 and v2");
  runtime.pauseStream();
  const b = await appendLifecycle(ctx, "B", 3);
  const bV3 = b[2] as Envelope;
  await putEvents(ctx, [bV3], "agentbus.replay");
  await waitFor(
    () => observations.deliveries.get(bV3.event_id)?.some((d) => d.status === "applied") ?? false,
    60_000,
  );
  runtime.resumeStream();
  await runtime.idle();
  return b;
}

/**
 * Task C: feedback from a client (unsequenced), a duplicate delivery, an expired one, and poison.
 * Returns the poison message.
 */
async function runTaskC(
  ctx: TaskContext,
  log: (line: string) => void,
): Promise<{ event_id: string }> {
  const { runtime } = ctx.env;
  log(
    "task C: accepted; a client sends feedback twice over (one ack lost), one already expired, and one poison message",
  );
  await appendLifecycle(ctx, "C", 1);
  await runtime.idle();
  const good = feedback(ctx, 5);
  const late = feedback(ctx, 1, { expires_at: new Date(Date.now() - 1000).toISOString() });
  const poison = feedback(ctx, 3, { correlation_id: "user_138_phone_13800138000" });
  runtime.loseAckOnce(good.event_id, "task-projection");
  await putEvents(ctx, [good, late, poison]);
  await runtime.idle();
  return poison;
}

/**
 * Content production: three runs through the orchestrator and the four content agents (only
 * in a stack that has them: tests of other topologies run the task part alone).
 */
async function runContentWorkflows(
  env: LocalEnvironment,
  log: (line: string) => void,
): Promise<WorkflowRun[]> {
  if (!hasContentWorkflow(env)) return [];
  log(
    "content: a quick-news run, a long-form run revised once ([needs-revision]), and a quick-news run whose fact check fails ([fail-fact-check])",
  );
  const started = await Promise.all([
    startWorkflow(env, "quick news", "quick-news", "battery recycling in small towns"),
    startWorkflow(
      env,
      "long form",
      "long-form",
      `how cities measure heat islands ${NEEDS_REVISION_MARKER}`,
    ),
    startWorkflow(
      env,
      "failure path",
      "quick-news",
      `rural broadband subsidies ${FAIL_FACT_CHECK_MARKER}`,
    ),
  ]);
  const runs = await Promise.all(
    started.map(async (run) => {
      const state = await waitForRunEnd(env, run.runId, 180_000);
      return { ...run, state, children: await loadChildRuns(env, state) };
    }),
  );
  await env.runtime.idle();
  // What each run announced, from the event store (no group consumes a run's end event).
  return Promise.all(
    runs.map(async (run) => ({
      ...run,
      stored: (await env.store.eventsByCorrelation(run.correlationId)).map((e) => e.event_type),
    })),
  );
}

/** Each task's read model (the task projection's state), by task name. */
async function loadTaskViews(
  env: LocalEnvironment,
  tasks: Record<TaskName, string>,
): Promise<Record<string, TaskView | undefined>> {
  const views: Record<string, TaskView | undefined> = {};
  for (const [name, id] of Object.entries(tasks)) {
    const { state } = await env.store.load({ state: { type: "task_view", id } });
    views[name] = state?.data as TaskView | undefined;
  }
  return views;
}

/** Every expectation of the scenario, in report order. */
function scenarioChecks(
  env: LocalEnvironment,
  views: Record<string, TaskView | undefined>,
  deadLetters: DeadLetter[],
  runs: WorkflowRun[],
  outcome: TaskOutcome,
): Check[] {
  const o = env.observations;
  return [
    ...taskChecks(env, views, outcome),
    check(
      "poison message dead-lettered with its reason",
      deadLetters.some(
        (d) => d.eventId === outcome.poison.event_id && d.code === "envelope.invalid",
      ),
      deadLetters.map((d) => `${d.code}`).join(", ") || "no dead letters",
    ),
    ...(runs.length === 3 ? workflowChecks(runs as [WorkflowRun, WorkflowRun, WorkflowRun]) : []),
    check(
      "no unexpected failures",
      o.failures.length === 0,
      o.failures.slice(0, 3).join(" | ") || "none",
    ),
  ];
}

/** The checks of tasks A, B and C. */
function taskChecks(
  env: LocalEnvironment,
  views: Record<string, TaskView | undefined>,
  { aV2, b }: TaskOutcome,
): Check[] {
  const group = "task-projection";
  const o = env.observations;
  const history = (name: string) => views[name]?.history.map((h) => h.version).join(",") ?? "none";
  return [
    check(
      "A: view delivered with v1..v4 applied once each",
      views.A?.status === "delivered" && history("A") === "1,2,3,4",
      `status ${views.A?.status}, history ${history("A")}`,
    ),
    check(
      "A: lost ack of v2 -> redelivered -> duplicate",
      (o.deliveries.get(aV2.event_id) ?? []).some((d) => d.status === "duplicate"),
      "see trace",
    ),
    check(
      "B: v3 first -> gap v1, v2 repaired from the event store",
      (o.deliveries.get(b[0]?.event_id ?? "") ?? []).some(
        (d) => d.repaired && d.status === "applied",
      ),
      "see trace",
    ),
    check(
      "B: view generated with v1..v3 in order",
      views.B?.status === "generated" && history("B") === "1,2,3",
      `status ${views.B?.status}, history ${history("B")}`,
    ),
    check(
      "C: feedback applied once despite a second delivery",
      views.C?.feedback.count === 1 && views.C.feedback.rating_total === 5,
      JSON.stringify(views.C?.feedback),
    ),
    check(
      "C: expired feedback discarded with reason",
      o.count(group, "discarded", "expired") === 1,
      `${o.count(group, "discarded", "expired")} expired discards`,
    ),
  ];
}

async function waitFor(condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("timed out waiting for the scenario to progress");
    await new Promise((r) => setTimeout(r, 100));
  }
}
