import type { DeliveryFailed } from "../../../functions/roles/customer-support/events/conversation";
import { DELIVERY_FAILED } from "../../../functions/roles/customer-support/sender/sender";
import { payInsteadMarker } from "../../../functions/roles/refund-review/local-script";
import { type Envelope, registry } from "../../../schemas";
import { checkInvariants, type RunFacts, type Violation } from "../faults/invariants";
import { LIFECYCLE } from "../local/scenario";
import { playA2aBilling } from "./a2a-billing";
import { simulatedFacts } from "./facts";
import {
  APPROVAL_SIGNAL,
  headlineApproval,
  headlineReview,
  headlineScoring,
  submittedHeadlines,
} from "./headline-scoring";
import { playMcpDesk } from "./mcp-desk";
import { type SimPlan, simulatedPlan } from "./plan";
import type { PlantedBug } from "./planted";
import { SIM_CUSTOMERS, World } from "./world";

/**
 * One simulated schedule: a seed gives the workload (tasks with client feedback, content
 * workflows, one poison message), the fault plan and every choice of the scheduler; playing the
 * same seed again plays the same schedule.
 */
export interface ScheduleResult {
  readonly seed: number;
  readonly plan: SimPlan;
  readonly violations: readonly Violation[];
  /** What the scheduler did, by kind. */
  readonly counts: Readonly<Record<string, number>>;
  /** The faults injected, by `kind where`. */
  readonly injected: Readonly<Record<string, number>>;
}

export async function playSchedule(
  seed: number,
  options: { readonly bug?: PlantedBug; readonly plan?: SimPlan } = {},
): Promise<ScheduleResult> {
  const plan = options.plan ?? simulatedPlan(seed);
  const world = new World({ seed, plan, bug: options.bug });
  await seedWorkload(world);
  await world.run();
  const { counts, injected } = world;
  const facts = await simulatedFacts(world);
  countWorkflowRuns(facts.workflowRuns, counts);
  countEscalatedSends(world, counts);
  const violations = await checkInvariants(facts);
  for (const outside of [
    await playMcpDesk(seed, plan.rates.mcp, options.bug),
    await playA2aBilling(seed, plan.rates.a2a, options.bug),
  ]) {
    violations.push(...outside.violations);
    for (const [kind, n] of Object.entries(outside.counts)) counts[kind] = (counts[kind] ?? 0) + n;
    for (const [kind, n] of Object.entries(outside.injected))
      injected[kind] = (injected[kind] ?? 0) + n;
  }
  return { seed, plan, violations, counts, injected };
}

/**
 * Only the MCP write tools' part of a schedule (./mcp-desk.ts): the same seed, plan and draws as
 * in `playSchedule`, without the rest of the world (`npm run chaos -- --mcp-only`).
 */
export async function playMcpSchedule(
  seed: number,
  options: { readonly bug?: PlantedBug } = {},
): Promise<ScheduleResult> {
  const plan = simulatedPlan(seed);
  const { violations, counts, injected } = await playMcpDesk(seed, plan.rates.mcp, options.bug);
  return { seed, plan, violations, counts, injected };
}

/**
 * Only the A2A write tools' part of a schedule (./a2a-billing.ts): the same seed, plan and draws
 * as in `playSchedule`, without the rest of the world (`npm run chaos -- --a2a-only`).
 */
export async function playA2aSchedule(
  seed: number,
  options: { readonly bug?: PlantedBug } = {},
): Promise<ScheduleResult> {
  const plan = simulatedPlan(seed);
  const { violations, counts, injected } = await playA2aBilling(seed, plan.rates.a2a, options.bug);
  return { seed, plan, violations, counts, injected };
}

/** The replies the sender handed to a person, their outcome unknown after its attempts. */
function countEscalatedSends(world: World, counts: Record<string, number>): void {
  const escalated = world.memory.log.filter(
    (e) => e.event_type === DELIVERY_FAILED && (e.payload as DeliveryFailed).outcome === "unknown",
  ).length;
  if (escalated > 0) counts["send escalated unknown"] = escalated;
}

/**
 * How the simulated workflows' runs, their map nodes, loops and waits ended, their items'
 * answers, and what the signals sent to them did.
 */
function countWorkflowRuns(runs: RunFacts["workflowRuns"], counts: Record<string, number>): void {
  const add = (kind: string, n = 1) => {
    counts[kind] = (counts[kind] ?? 0) + n;
  };
  for (const { definition, run, answers, parent, waitEnds = [], signals = [] } of runs) {
    add(`${definition.name} run ${run?.status ?? "not started"}`);
    if (parent) add(`child run ${run?.status ?? "not started"}`);
    for (const node of definition.nodes)
      if (node.map) add(`map node ${run?.nodes[node.id]?.state ?? "not started"}`);
    for (const { from: exit, loop } of definition.edges)
      if (loop && run?.nodes[exit]?.state === "COMPLETED") {
        add(`loop ended ${run.loops?.[exit]?.ended ?? "without saying how"}`);
        add("loop rounds", run.loops?.[exit]?.round ?? 1);
      }
    const items = answers.filter((a) => a.item !== undefined);
    add("map item answers", items.length);
    add("map item answers failed", items.filter((a) => "error" in a.outcome).length);
    for (const end of waitEnds)
      add(["wait", end.state, end.releasedBy ?? end.error].filter(Boolean).join(" "));
    for (const { applied } of signals)
      add(
        !applied
          ? "signal refused"
          : applied.released.length > 0
            ? "signal released"
            : applied.timedOut.length > 0
              ? "signal unmatched after its wait timed out"
              : "signal unmatched",
      );
  }
}

/**
 * Tasks with client feedback, content workflow runs, a headline scoring run, a headline approval
 * run and its signals, conversations and one poison message.
 */
async function seedWorkload(world: World): Promise<void> {
  await seedTasks(world);
  seedContentRuns(world);
  seedScoringRun(world);
  seedApproval(world);
  seedConversations(world);
  world.publishExternal(JSON.stringify({ event_id: "555-0100", payload: "not an envelope" }));
}

/** One to three tasks through part of their lifecycle, each with a client's feedback. */
async function seedTasks(world: World): Promise<void> {
  const tasks = 1 + world.random.below(3);
  for (let i = 0; i < tasks; i++) {
    const taskId = `task_${world.deps.ids.next()}`;
    await world.produceTask(taskId, LIFECYCLE.slice(0, 1 + world.random.below(LIFECYCLE.length)));
    world.publishExternal(
      external(
        world,
        "task.feedback.received",
        { type: "task", id: taskId },
        {
          rating: 1 + world.random.below(5),
        },
      ),
    );
  }
}

/** One or two content-production runs, some of whose fact checks fail. */
function seedContentRuns(world: World): void {
  const runs = 1 + world.random.below(2);
  for (let i = 0; i < runs; i++) {
    const runId = `run_${world.deps.ids.next()}`;
    const hint = world.random.chance(0.3) ? "[fail-fact-check] energy storage" : "energy storage";
    startRun(world, runId, world.random.pick(["quick-news", "long-form"]), { topic_hint: hint });
  }
}

/** A headline scoring run, scored directly or reviewed, now and then cancelled by an operator. */
function seedScoringRun(world: World): void {
  const scoringRun = `run_${world.deps.ids.next()}`;
  // Scored directly, or reviewed: a run whose child run scores them.
  const workflow = world.random.pick([headlineScoring, headlineReview]);
  startRun(world, scoringRun, workflow.name, {
    topic_hint: "headlines",
    headlines: submittedHeadlines(world.random),
  });
  // Now and then an operator cancels it, whenever the request reaches the orchestrator.
  if (world.random.chance(0.2))
    world.publishLater(
      external(
        world,
        "workflow.cancel.requested",
        { type: "dag_run", id: scoringRun },
        { run_id: scoringRun, requested_by: "sim-operator" },
      ),
      world.random.below(60),
    );
}

/** One or two conversations, each of one to three customer messages sent back to back. */
function seedConversations(world: World): void {
  const conversations = 1 + world.random.below(2);
  for (let i = 0; i < conversations; i++) {
    const conversationId = `conv_${world.deps.ids.next()}`;
    // Sent back to back, each with its client sequence: the dispatcher may swap them.
    const messages = 1 + world.random.below(3);
    for (let m = 0; m < messages; m++) {
      const text = world.random.pick(CUSTOMER_TEXTS);
      world.publishExternal(
        external(
          world,
          "conversation.message.received",
          { type: "conversation", id: conversationId },
          { text, customer_id: SIM_CUSTOMERS[i % SIM_CUSTOMERS.length], client_seq: m + 1 },
          conversationId,
        ),
      );
    }
  }
}

/**
 * What the simulated customers ask (orders of the local sample, and a question with no order): a
 * refund that exists (once with an instruction to refund another order smuggled in), a refund to
 * make (conversations that ask it at once race for it), an order's status, a question with no
 * order.
 */
const CUSTOMER_TEXTS = [
  // With an instruction smuggled into the message, which the model obeys: the review must refuse it.
  `Has the refund for order 123 gone through? ${payInsteadMarker("A-1002")}`,
  "Please refund order A-1002, I cancelled it.",
  "Was order 456 delivered?",
  "Where is my order A-1001?",
  "Is the shop open today?",
];

/**
 * A headline approval run and the signals an editor sends it: the approval, mostly at a moment
 * before its deadline, now and then before the run waits for it or not at all; now and then the
 * approval a second time, a signal nothing waits for, and the approval once everything else is
 * over (the wait released or timed out, the run ended).
 */
function seedApproval(world: World): void {
  const runId = `run_${world.deps.ids.next()}`;
  startRun(world, runId, headlineApproval.name, {
    topic_hint: "headlines",
    headlines: submittedHeadlines(world.random),
  });
  const signal = (key: string) =>
    external(
      world,
      "workflow.signal.requested",
      { type: "dag_run", id: runId },
      { run_id: runId, signal: key, payload: { editor: "sim-editor" }, requested_by: "sim-editor" },
    );
  if (world.random.chance(0.8))
    world.publishLater(signal(APPROVAL_SIGNAL), world.random.below(150));
  if (world.random.chance(0.3))
    world.publishLater(signal(APPROVAL_SIGNAL), world.random.below(150));
  if (world.random.chance(0.2))
    world.publishLater(signal("headlines-rejected"), world.random.below(150));
  if (world.random.chance(0.3)) world.publishLast(signal(APPROVAL_SIGNAL));
}

/** A workflow run asked for from outside (the CLI, a service): its start request on the bus. */
function startRun(world: World, runId: string, workflowName: string, request: object): void {
  world.publishExternal(
    external(
      world,
      "workflow.start.requested",
      { type: "dag_run", id: runId },
      { run_id: runId, workflow_name: workflowName, request },
    ),
  );
}

/** An unsequenced message from outside the store (a client, the CLI), with the world's ids. */
function external(
  world: World,
  type: string,
  aggregate: { type: string; id: string },
  payload: Record<string, unknown>,
  conversationId?: string,
): Envelope {
  const parsed = registry.parse({
    event_id: world.deps.ids.next(),
    event_type: type,
    // The newest version of the type: producers write what consumers read.
    schema_version: registry.find(type)?.schemaVersion ?? 1,
    occurred_at: world.clock.now().toISOString(),
    correlation_id: `corr_${world.deps.ids.next()}`,
    causation_id: null,
    task_id: aggregate.type === "task" ? aggregate.id : `task_${world.deps.ids.next()}`,
    ...(conversationId ? { conversation_id: conversationId } : {}),
    aggregate: { ...aggregate, version: 0 },
    producer: "sim-client",
    payload,
  });
  if (!parsed.ok) throw new Error(`the simulation built an invalid ${type}: ${parsed.message}`);
  return parsed.envelope;
}
