import { ulid } from "ulid";
import type { MapItemResult } from "../../../../functions/core/dag/map";
import {
  CONTENT_ROLES,
  type TopicSelectionOutput,
} from "../../../../functions/roles/content-agents/events";
import { childRunsOf } from "../../../../functions/roles/orchestrator/child-commands";
import type { OrchestratorState } from "../../../../functions/roles/orchestrator/state";
import { type Envelope, registry } from "../../../../schemas";
import type { LocalEnvironment } from "../environment";
import { putOnBus } from "../put-on-bus";
import { type Check, check } from "./check";
import { readDeadLetters } from "./dead-letters";

/** One content-production run of the scenario. */
export interface WorkflowRun {
  readonly label: string;
  readonly runId: string;
  readonly correlationId: string;
  readonly state: OrchestratorState | undefined;
  /** The child runs its child nodes started (long form's fact check), once it ended. */
  readonly children?: readonly ChildRun[];
  /** The types of the events stored in its correlation, once it ended. */
  readonly stored?: readonly string[];
}

/** Whether the stack runs the orchestrator and every content agent. */
export function hasContentWorkflow(env: LocalEnvironment): boolean {
  return ["orchestrator", ...CONTENT_ROLES].every((group) => env.groups.includes(group));
}

/** A child run of a run's node, with its final orchestrator state. */
export interface ChildRun {
  readonly nodeId: string;
  readonly runId: string;
  readonly state: OrchestratorState | undefined;
}

/** The child runs of a run's child nodes (`childRunsOf`), each with its stored state. */
export async function loadChildRuns(
  env: LocalEnvironment,
  state: OrchestratorState,
): Promise<ChildRun[]> {
  return Promise.all(
    childRunsOf(state).map(async (child) => ({ ...child, state: await loadRun(env, child.runId) })),
  );
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
    // The newest version of the type: producers write what consumers read.
    schema_version: registry.find(type)?.schemaVersion ?? 1,
    occurred_at: new Date().toISOString(),
    correlation_id: correlationId,
    causation_id: null,
    task_id: `task_${runId.slice(4)}`,
    aggregate: { type: "dag_run", id: runId, version: 0 },
    order_key: runId,
    producer: "content-desk",
    // A client's first send of a new message (a new event id): its first attempt.
    attempt: 1,
    payload: { run_id: runId, ...payload },
  };
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
      workflow_name: workflow,
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
      const where = state ? await describeRun(env, state) : "not started";
      const letters = (await readDeadLetters(env)).map((d) => `${d.queue}: ${d.code}`).join("; ");
      const errors = env.observations.errors
        .map((e) => `${e.group}: ${e.code}`)
        .slice(-5)
        .join("; ");
      throw new Error(
        `run ${runId} did not get there in ${timeoutMs} ms (${where}; dead letters ${letters || "none"}; last errors ${errors || "none"}; failures ${env.observations.failures.slice(-3).join(" | ") || "none"})`,
      );
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * Where a run stands, for a run that did not end in time: its status, each node's state (a map
 * node's items, a RUNNING node's lease expiry), what is held back and why, and each child run
 * its child nodes started, described the same way, e.g. `RUNNING: topic-selection=COMPLETED,
 * fact-check=RUNNING [child run_… RUNNING: fact-check=RUNNING items COMPLETED,PENDING
 * lease to …; held fact-check (queue_depth)]`.
 */
export async function describeRun(
  env: LocalEnvironment,
  state: OrchestratorState,
): Promise<string> {
  const children = new Map<string, string>();
  for (const child of await loadChildRuns(env, state))
    children.set(
      child.nodeId,
      `child ${child.runId} ${child.state ? await describeRun(env, child.state) : "not started"}`,
    );
  const nodes = Object.entries(state.run.nodes).map(([id, node]) => {
    const lease = node.state === "RUNNING" ? state.leases?.[id] : undefined;
    return [
      `${id}=${node.state}`,
      node.items && `items ${node.items.map((i) => i.state).join(",")}`,
      lease && `lease to ${lease.expires_at}${lease.started ? " (started)" : ""}`,
      node.state === "RUNNING" && children.has(id) && `[${children.get(id)}]`,
    ]
      .filter(Boolean)
      .join(" ");
  });
  const held = state.held.map((h) => `${h.node_id} (${h.reason})`).join(", ");
  return `${state.run.status}: ${nodes.join(", ") || "no nodes"}${held ? `; held ${held}` : ""}`;
}

/** The step of the run's timeline that released `node` (its first release). */
function releaseOf(state: OrchestratorState | undefined, node: string) {
  return state?.timeline.find((t) => t.event === "node.released" && t.node_id === node);
}

/** The claims topic selection stated in a run: the fact check's map items. */
const claimsOf = (run: WorkflowRun) => {
  const output = run.state?.run.nodes["topic-selection"]?.output as
    | TopicSelectionOutput
    | undefined;
  return output?.claims;
};

/** The fact check's item results of a run that completed it. */
const checkedItems = (run: WorkflowRun) =>
  (run.state?.run.nodes["fact-check"]?.output as { items?: MapItemResult[] } | undefined)?.items;

/**
 * The checks of what the language's constructs did: the fact check's items, review's rounds, and
 * long form's fact check as a child run whose map checked each claim.
 */
function constructChecks(quick: WorkflowRun, long: WorkflowRun): Check[] {
  const items = checkedItems(quick);
  const claims = claimsOf(quick);
  const rounds = long.state?.run.loops?.review;
  const child = long.children?.find((c) => c.nodeId === "fact-check");
  const childItems = child && checkedItems({ ...long, state: child.state });
  const longClaims = claimsOf(long);
  const parent = child?.state?.parent;
  return [
    check(
      "long form: the fact check ran as a child run (content.fact-check), each claim a map item, its parent told",
      child?.state?.run.status === "COMPLETED" &&
        child.state.workflow === "content.fact-check" &&
        parent?.run_id === long.runId &&
        parent.node_id === "fact-check" &&
        childItems?.length === longClaims?.length &&
        long.state?.run.nodes["fact-check"]?.state === "COMPLETED",
      `child ${child?.runId ?? "none"} ${child?.state?.run.status ?? "not started"}, parent ${parent?.run_id ?? "none"}, ${childItems?.length ?? "no"} items for ${longClaims?.length ?? "no"} claims`,
    ),
    check(
      "quick news: each claim fact-checked as a map item, every one passed",
      items !== undefined &&
        items.length === claims?.length &&
        items.every((i) => i.status === "completed"),
      `${claims?.length ?? "no"} claims, items ${items?.map((i) => i.status).join(", ") ?? "none"}`,
    ),
    check(
      "long form: review sent the first draft back and approved the revision (2 rounds)",
      rounds?.round === 2 && rounds.ended === "condition",
      `review rounds ${rounds?.round ?? "none"}, ended ${rounds?.ended ?? "never"}`,
    ),
  ];
}

/** The event that released `node` in a run. */
const releasedBy = (state: OrchestratorState | undefined, node: string) =>
  releaseOf(state, node)?.cause ?? "never released";

/** Long form ran one node after the other, its fact check a child run that writing waited for. */
function longFormOrderCheck(long: WorkflowRun): Check {
  const status = long.state?.run.status ?? "not started";
  const childStartedBy =
    long.state?.timeline.find((t) => t.event === "child.started" && t.node_id === "fact-check")
      ?.cause ?? "never started";
  const writingBy = releasedBy(long.state, "writing");
  const reviewBy = releasedBy(long.state, "review");
  return check(
    "long form: COMPLETED, serial (each node started by its predecessor's end, writing by its child run's)",
    status === "COMPLETED" &&
      childStartedBy === "topic_selection.completed" &&
      writingBy === "workflow.child.ended" &&
      reviewBy === "writing.completed",
    `${status}: fact-check's child by ${childStartedBy}, writing by ${writingBy}, review by ${reviewBy}`,
  );
}

/** The checks of the scenario's three content-production runs: quick news, long form, failure path. */
export function workflowChecks([quick, long, failing]: [
  WorkflowRun,
  WorkflowRun,
  WorkflowRun,
]): Check[] {
  const status = (run: WorkflowRun) => run.state?.run.status ?? "not started";
  const nodeStates = (run: WorkflowRun) =>
    Object.entries(run.state?.run.nodes ?? {})
      .map(([id, n]) => `${id} ${n.state}`)
      .join(", ");
  const quickFact = releaseOf(quick.state, "fact-check");
  const quickWriting = releaseOf(quick.state, "writing");
  const cause = releasedBy;
  const ended = (run: WorkflowRun, type: string) => run.stored?.includes(type) === true;
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
    longFormOrderCheck(long),
    ...constructChecks(quick, long),
    check(
      "failure path: PARTIAL, fact check FAILED on more claims than tolerated (dag.map_failed), review CANCELLED",
      status(failing) === "PARTIAL" &&
        failedNode?.state === "FAILED" &&
        failedNode.error?.code === "dag.map_failed" &&
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
