import { PutEventsCommand } from "@aws-sdk/client-eventbridge";
import { ReceiveMessageCommand } from "@aws-sdk/client-sqs";
import { ulid } from "ulid";
import { FAIL_FACT_CHECK_MARKER } from "../../functions/adapters/local-model";
import { DEAD_LETTER_ATTRIBUTES } from "../../functions/adapters/sqs/dead-letter-sink";
import type { Decision } from "../../functions/core/pipeline";
import { appendToStream } from "../../functions/core/producer";
import { systemClock, ulidSource } from "../../functions/core/runtime";
import type { OrchestratorState } from "../../functions/roles/orchestrator";
import type { TaskView } from "../../functions/roles/task-projection";
import { type Envelope, registry } from "../../schemas";
import { CONTENT_ROLES } from "../../schemas/events/workflow";
import type { LocalEnvironment } from "./environment";
import type { DeadLetter } from "./trace";

export interface Check {
  readonly name: string;
  readonly ok: boolean;
  readonly detail: string;
}

export interface ScenarioResult {
  readonly correlations: string[];
  readonly checks: Check[];
  readonly deadLetters: DeadLetter[];
  readonly views: Record<string, TaskView | undefined>;
  /** The content-production runs the scenario started, each with its final orchestrator state. */
  readonly runs: WorkflowRun[];
}

/** One content-production run of the scenario. */
export interface WorkflowRun {
  readonly label: string;
  readonly runId: string;
  readonly correlationId: string;
  readonly state: OrchestratorState | undefined;
}

/** The reference task's lifecycle events, in stream order (also used by the LocalStack suite). */
export const LIFECYCLE = [
  { type: "task.accepted", payload: { title: "Why has my refund not arrived?" } },
  {
    type: "plan.created",
    payload: { steps: ["look up the order", "check the refund", "draft a reply"] },
  },
  { type: "answer.generated", payload: { answer_ref: "ans_refund-eta" } },
  { type: "notification.sent", payload: { channel: "email" } },
];

/**
 * The reference scenario on the local stack, with the faults a real deployment meets:
 * - task A: a full lifecycle; the consumer's acknowledgement of v2 is lost, so v2 is delivered again;
 * - task B: v3 reaches the bus before v1 and v2 (the relay is held back and v3 is replayed ahead),
 *   so the consumer repairs the gap from the event store and the late originals are duplicates;
 * - task C: accepted, then client feedback sent with `put-events` (unsequenced): one is
 *   delivered twice, one has already expired on arrival;
 * - a poison message (an id that looks like a phone number) is put on the bus;
 * - content production: `workflow.start.requested` on the commands bus for a quick-news run
 *   (fact check and writing in parallel), a long-form run (serial) and a quick-news run whose
 *   request carries `[fail-fact-check]` (the local model's fact check fails: review cancelled,
 *   the run PARTIAL); each is waited for through its dag_run state.
 * Then every expectation is checked against the stored state and what the runtime observed.
 */
export async function runScenario(
  env: LocalEnvironment,
  log: (line: string) => void = () => {},
): Promise<ScenarioResult> {
  const deps = { store: env.store, registry, clock: systemClock, ids: ulidSource() };
  const bus = env.buses.events;
  if (!bus) throw new Error("the stack has no events bus");
  const tasks = { A: `task_${ulid()}`, B: `task_${ulid()}`, C: `task_${ulid()}` };
  const correlations = { A: `corr_${ulid()}`, B: `corr_${ulid()}`, C: `corr_${ulid()}` };

  const append = async (task: keyof typeof tasks, steps: number, cause?: Envelope) => {
    const out: Envelope[] = [];
    let previous = cause;
    for (const step of LIFECYCLE.slice(0, steps)) {
      const emitted = await appendToStream(deps, {
        aggregate: { type: "task", id: tasks[task] },
        producer: "task-api",
        correlationId: correlations[task],
        taskId: tasks[task],
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
  };

  const put = async (envelopes: unknown[], source = "agentbus.client") => {
    const response = await env.clients.eventbridge.send(
      new PutEventsCommand({
        Entries: envelopes.map((e) => ({
          EventBusName: bus,
          Source: source,
          DetailType: String((e as { event_type?: string }).event_type ?? "unknown"),
          Detail: JSON.stringify(e),
        })),
      }),
    );
    if (response.FailedEntryCount)
      throw new Error(`put-events failed: ${JSON.stringify(response.Entries)}`);
  };

  const feedback = (rating: number, extra: Record<string, unknown> = {}) => ({
    event_id: ulid(),
    event_type: "task.feedback.received",
    schema_version: 1,
    occurred_at: new Date().toISOString(),
    correlation_id: correlations.C,
    causation_id: null,
    task_id: tasks.C,
    aggregate: { type: "task", id: tasks.C, version: 0 },
    order_key: tasks.C,
    producer: "web-client",
    payload: { rating },
    ...extra,
  });

  // Task A: full lifecycle, the consumer's ack of v2 is lost once.
  log("task A: the task API commits 4 events; the consumer's acknowledgement of v2 will be lost");
  env.runtime.pauseStream();
  const a = await append("A", 4);
  const aV2 = a[1] as Envelope;
  env.runtime.loseAckOnce(aV2.event_id, "task-projection");
  env.runtime.resumeStream();
  await env.runtime.idle();

  // Task B: v3 overtakes v1 and v2.
  log("task B: the relay is held back; v3 is replayed to the bus ahead of v1 and v2");
  env.runtime.pauseStream();
  const b = await append("B", 3);
  const bV3 = b[2] as Envelope;
  await put([bV3], "agentbus.replay");
  await waitFor(
    () =>
      env.observations.deliveries.get(bV3.event_id)?.some((d) => d.status === "applied") ?? false,
    60_000,
  );
  env.runtime.resumeStream();
  await env.runtime.idle();

  // Task C: feedback from a client (unsequenced), a duplicate delivery, an expired one, and poison.
  log(
    "task C: accepted; a client sends feedback twice over (one ack lost), one already expired, and one poison message",
  );
  await append("C", 1);
  await env.runtime.idle();
  const good = feedback(5);
  const late = feedback(1, { expires_at: new Date(Date.now() - 1000).toISOString() });
  const poison = feedback(3, { correlation_id: "user_138_phone_13800138000" });
  env.runtime.loseAckOnce(good.event_id, "task-projection");
  await put([good, late, poison]);
  await env.runtime.idle();

  // Content production: three runs through the orchestrator and the four content agents (only
  // in a stack that has them: tests of other topologies run the task part alone).
  let runs: WorkflowRun[] = [];
  if (hasContentWorkflow(env)) {
    log(
      "content: a quick-news run, a long-form run, and a quick-news run whose fact check fails ([fail-fact-check])",
    );
    const started = await Promise.all([
      startWorkflow(env, "quick news", "quick-news", "battery recycling in small towns"),
      startWorkflow(env, "long form", "long-form", "how cities measure heat islands"),
      startWorkflow(
        env,
        "failure path",
        "quick-news",
        `rural broadband subsidies ${FAIL_FACT_CHECK_MARKER}`,
      ),
    ]);
    runs = await Promise.all(
      started.map(async (run) => ({
        ...run,
        state: await waitForRunEnd(env, run.runId, 180_000),
      })),
    );
    await env.runtime.idle();
  }

  const deadLetters = await readDeadLetters(env);
  const views: Record<string, TaskView | undefined> = {};
  for (const [name, id] of Object.entries(tasks)) {
    const { state } = await env.store.load({ state: { type: "task_view", id } });
    views[name] = state?.data as TaskView | undefined;
  }
  const group = "task-projection";
  const o = env.observations;
  const history = (name: string) => views[name]?.history.map((h) => h.version).join(",") ?? "none";
  const checks: Check[] = [
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
    check(
      "poison message dead-lettered with its reason",
      deadLetters.some((d) => d.eventId === poison.event_id && d.code === "envelope.invalid"),
      deadLetters.map((d) => `${d.code}`).join(", ") || "no dead letters",
    ),
    ...(runs.length === 3
      ? workflowChecks(env, runs as [WorkflowRun, WorkflowRun, WorkflowRun])
      : []),
    check(
      "no unexpected failures",
      o.failures.length === 0,
      o.failures.slice(0, 3).join(" | ") || "none",
    ),
  ];
  return {
    correlations: [...Object.values(correlations), ...runs.map((r) => r.correlationId)],
    checks,
    deadLetters,
    views,
    runs,
  };
}

/** Whether the stack runs the orchestrator and every content agent. */
export function hasContentWorkflow(env: LocalEnvironment): boolean {
  return ["orchestrator", ...CONTENT_ROLES].every((group) => env.groups.includes(group));
}

/** A client's command about a run (unsequenced, aggregate dag_run/<run_id>, order key = run id). */
export function runCommand(
  type: string,
  runId: string,
  correlationId: string,
  payload: Record<string, unknown>,
): Envelope {
  return {
    event_id: ulid(),
    event_type: type,
    schema_version: 1,
    occurred_at: new Date().toISOString(),
    correlation_id: correlationId,
    causation_id: null,
    task_id: `task_${runId.slice(4)}`,
    aggregate: { type: "dag_run", id: runId, version: 0 },
    order_key: runId,
    producer: "content-desk",
    attempt: 1,
    payload: { run_id: runId, ...payload },
  };
}

/** Put envelopes on a topic's bus as a client would (`put-events`). */
export async function putOnBus(
  env: LocalEnvironment,
  topic: string,
  envelopes: readonly Envelope[],
): Promise<void> {
  const bus = env.buses[topic];
  if (!bus) throw new Error(`the stack has no ${topic} bus`);
  const response = await env.clients.eventbridge.send(
    new PutEventsCommand({
      Entries: envelopes.map((e) => ({
        EventBusName: bus,
        Source: "agentbus.client",
        DetailType: e.event_type,
        Detail: JSON.stringify(e),
      })),
    }),
  );
  if (response.FailedEntryCount)
    throw new Error(`put-events failed: ${JSON.stringify(response.Entries)}`);
}

/** Start a content-production run: `workflow.start.requested` on the commands bus. */
export async function startWorkflow(
  env: LocalEnvironment,
  label: string,
  workflow: string,
  topicHint: string,
): Promise<Omit<WorkflowRun, "state">> {
  const runId = `run_${ulid()}`;
  const correlationId = `corr_${ulid()}`;
  await putOnBus(env, "commands", [
    runCommand("workflow.start.requested", runId, correlationId, {
      workflow,
      request: { topic_hint: topicHint },
    }),
  ]);
  return { label, runId, correlationId };
}

/** The orchestrator's state of a run (the dag_run item of the state table). */
export async function loadRun(
  env: LocalEnvironment,
  runId: string,
): Promise<OrchestratorState | undefined> {
  const { state } = await env.store.load({ state: { type: "dag_run", id: runId } });
  return state?.data as OrchestratorState | undefined;
}

/** Poll the run's state until `done` holds for it (by default: the run has ended). */
export async function waitForRunEnd(
  env: LocalEnvironment,
  runId: string,
  timeoutMs: number,
  done: (state: OrchestratorState) => boolean = (s) => s.run.status !== "RUNNING",
): Promise<OrchestratorState> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const state = await loadRun(env, runId);
    if (state && done(state)) return state;
    if (Date.now() > deadline) {
      // Say where it stopped: each node's state, what is in the dead-letter queues, what failed.
      const nodes = Object.entries(state?.run.nodes ?? {})
        .map(([id, n]) => `${id}=${n.state}`)
        .join(", ");
      const letters = (await readDeadLetters(env)).map((d) => `${d.queue}: ${d.code}`).join("; ");
      const errors = env.observations.errors
        .map((e) => `${e.group}: ${e.code}`)
        .slice(-5)
        .join("; ");
      throw new Error(
        `run ${runId} did not get there in ${timeoutMs} ms (status ${state?.run.status ?? "not started"}; nodes ${nodes || "none"}; dead letters ${letters || "none"}; last errors ${errors || "none"}; failures ${env.observations.failures.slice(-3).join(" | ") || "none"})`,
      );
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The step of the run's timeline that released `node` (its first release). */
function releaseOf(state: OrchestratorState | undefined, node: string) {
  return state?.timeline.find((t) => t.event === "node.released" && t.node_id === node);
}

function workflowChecks(
  env: LocalEnvironment,
  [quick, long, failing]: [WorkflowRun, WorkflowRun, WorkflowRun],
): Check[] {
  const status = (run: WorkflowRun) => run.state?.run.status ?? "not started";
  const nodeStates = (run: WorkflowRun) =>
    Object.entries(run.state?.run.nodes ?? {})
      .map(([id, n]) => `${id} ${n.state}`)
      .join(", ");
  const quickFact = releaseOf(quick.state, "fact-check");
  const quickWriting = releaseOf(quick.state, "writing");
  const cause = (state: OrchestratorState | undefined, node: string) =>
    releaseOf(state, node)?.cause ?? "never released";
  const ended = (run: WorkflowRun, type: string) =>
    [...env.observations.envelopes.values()].some(
      (e) => e.event_type === type && e.correlation_id === run.correlationId,
    );
  const failedNode = failing.state?.run.nodes["fact-check"];
  return [
    check(
      "quick news: COMPLETED, every node completed",
      status(quick) === "COMPLETED" &&
        Object.values(quick.state?.run.nodes ?? {}).every((n) => n.state === "COMPLETED"),
      `${status(quick)}: ${nodeStates(quick)}`,
    ),
    check(
      "quick news: fact check and writing released together after topic selection",
      quickFact?.cause === "topic_selection.completed" &&
        quickWriting?.cause === "topic_selection.completed" &&
        quickFact.at === quickWriting.at &&
        cause(quick.state, "review") !== "topic_selection.completed",
      `fact-check by ${cause(quick.state, "fact-check")}, writing by ${cause(quick.state, "writing")}`,
    ),
    check(
      "long form: COMPLETED, serial (each node released by its predecessor's completion)",
      status(long) === "COMPLETED" &&
        cause(long.state, "fact-check") === "topic_selection.completed" &&
        cause(long.state, "writing") === "fact_check.completed" &&
        cause(long.state, "review") === "writing.completed",
      `${status(long)}: fact-check by ${cause(long.state, "fact-check")}, writing by ${cause(long.state, "writing")}, review by ${cause(long.state, "review")}`,
    ),
    check(
      "failure path: PARTIAL, fact check FAILED (fact_check.rejected), review CANCELLED",
      status(failing) === "PARTIAL" &&
        failedNode?.state === "FAILED" &&
        failedNode.error?.code === "fact_check.rejected" &&
        failing.state?.run.nodes.review?.state === "CANCELLED",
      `${status(failing)}: ${nodeStates(failing)}`,
    ),
    check(
      "run ends announced: workflow.completed x2, workflow.partial x1",
      ended(quick, "workflow.completed") &&
        ended(long, "workflow.completed") &&
        ended(failing, "workflow.partial"),
      "see trace",
    ),
  ];
}

function check(name: string, ok: boolean, detail: string): Check {
  return { name, ok, detail };
}

async function waitFor(condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("timed out waiting for the scenario to progress");
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Peek at every dead-letter queue of the stack (messages stay where they are). */
export async function readDeadLetters(env: LocalEnvironment): Promise<DeadLetter[]> {
  const out: DeadLetter[] = [];
  for (const url of new Set(env.names.deadLetterQueues)) {
    const response = await env.clients.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: 10,
        VisibilityTimeout: 0,
        MessageAttributeNames: ["All"],
      }),
    );
    for (const m of response.Messages ?? []) {
      let eventId: string | undefined;
      try {
        const body = JSON.parse(m.Body ?? "") as {
          event_id?: string;
          detail?: { event_id?: string };
        };
        eventId = body.event_id ?? body.detail?.event_id;
      } catch {
        eventId = undefined;
      }
      out.push({
        queue: url.split("/").at(-1) ?? url,
        code: m.MessageAttributes?.[DEAD_LETTER_ATTRIBUTES.code]?.StringValue ?? "unknown",
        reason: m.MessageAttributes?.[DEAD_LETTER_ATTRIBUTES.reason]?.StringValue ?? "",
        eventId,
      });
    }
  }
  return out;
}
