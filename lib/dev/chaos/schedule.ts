import { GetQueueAttributesCommand } from "@aws-sdk/client-sqs";
import type { Violation } from "../faults/invariants";
import { Random } from "../faults/random";
import type { LocalEnvironment } from "../local/environment";
import { loadConversation, waitUntil } from "../local/scenario/customer-support";
import { loadRun } from "../local/scenario/workflow";
import { drainDeadLetters } from "./dead-letters";
import type { FaultInjector } from "./injector";
import { checkSchedule } from "./invariants";
import { newestMessage } from "./newest";
import { type FaultPlan, planOf } from "./plan";
import { playWorkload, type Workload } from "./workload";

/** One full-stack schedule, played and checked. */
export interface StackScheduleResult {
  readonly seed: number;
  readonly plan: FaultPlan;
  readonly workload: Workload;
  /** What was injected, by `fault where`. */
  readonly injected: Readonly<Record<string, number>>;
  /** Each fault injected, in order. */
  readonly injections: readonly string[];
  readonly violations: readonly Violation[];
  /** How the run ended and what became of the conversation's newest message. */
  readonly outcome: { readonly run: string; readonly reply: string };
  readonly ms: number;
  /**
   * SQS-invoked functions that failed as a whole (other than crashed ones): on AWS their batch
   * waits out its visibility timeout (minutes), holding back every entity in it. The runtime
   * releases it at once under fault injection; these are listed as findings.
   */
  readonly failedInvocations: readonly string[];
}

/** How long a schedule may take to settle before what has not ended is reported. */
const SETTLE_TIMEOUT_MS = 240_000;

/**
 * Plays one schedule on a running stack: its workload under its plan's faults, until the run has
 * ended, the conversation's newest message is answered and the runtime is idle; then checks the
 * invariants with the faults off. The dead-letter queues are emptied after each schedule.
 */
export async function playStackSchedule(
  env: LocalEnvironment,
  injector: FaultInjector,
  seed: number,
  options: {
    /** The faults (default: the seed's plan). */
    readonly plan?: FaultPlan;
    /** How long the workload may take to settle before that is a violation. */
    readonly settleMs?: number;
  } = {},
): Promise<StackScheduleResult> {
  const started = performance.now();
  const plan = options.plan ?? planOf(seed);
  const failuresBefore = env.observations.failures.length;
  injector.begin(plan);
  let injected: Record<string, number>;
  let injections: readonly string[];
  let workload: Workload;
  let unsettled: Violation[];
  try {
    workload = await playWorkload(env, new Random(seed));
    unsettled = await settle(env, workload, options.settleMs ?? SETTLE_TIMEOUT_MS);
  } finally {
    injections = injector.injections();
    injected = injector.end();
  }
  const violations = [
    ...unsettled,
    ...(await checkSchedule(env, workload, await drainDeadLetters(env))),
  ];
  return {
    seed,
    plan,
    workload,
    injected,
    injections,
    violations,
    outcome: await outcomeOf(env, workload),
    ms: performance.now() - started,
    failedInvocations: wholeBatchFailures(env, env.observations.failures.slice(failuresBefore)),
  };
}

/** Waits for the run's end, the newest reply and an idle runtime; what did not get there. */
async function settle(
  env: LocalEnvironment,
  workload: Workload,
  timeoutMs: number,
): Promise<Violation[]> {
  const deadline = Date.now() + timeoutMs;
  const left = () => Math.max(1, deadline - Date.now());
  try {
    await waitUntil(
      `run ${workload.run.runId} to end`,
      async () => (await loadRun(env, workload.run.runId))?.run.status !== "RUNNING" || undefined,
      left(),
    );
    await waitUntil(
      `the reply to the newest message of ${workload.conversation.id}`,
      async () => {
        const newest = await newestMessage(env, workload);
        const view = newest ? await loadConversation(env, workload.conversation.id) : undefined;
        return (newest && view?.turns[newest]?.status === "delivered") || undefined;
      },
      left(),
    );
    await env.runtime.idle({ timeoutMs: left() });
    return [];
  } catch (error) {
    const what = error instanceof Error ? error.message : String(error);
    const failures = env.observations.failures.slice(-3).join(" | ");
    return [
      {
        invariant: "settles",
        detail: `${what}; still queued: ${await queued(env)}; last failures: ${failures}`,
      },
    ];
  }
}

async function outcomeOf(env: LocalEnvironment, workload: Workload) {
  const run = await loadRun(env, workload.run.runId);
  const newest = (await newestMessage(env, workload)) ?? "";
  const view = await loadConversation(env, workload.conversation.id);
  return {
    run: `${workload.run.workflow}${workload.run.failing ? " [fail-fact-check]" : ""} ${run?.run.status ?? "not started"}`,
    reply: view?.turns[newest]?.status ?? "none",
  };
}

/** The stack's queues that still hold messages (visible/in flight), for a schedule that hung. */
async function queued(env: LocalEnvironment): Promise<string> {
  const held: string[] = [];
  for (const [group, urls] of Object.entries(env.names.groups))
    for (const [queue, url] of Object.entries(urls)) {
      if (typeof url !== "string") continue;
      const { Attributes = {} } = await env.clients.sqs.send(
        new GetQueueAttributesCommand({
          QueueUrl: url,
          AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        }),
      );
      const visible = Number(Attributes.ApproximateNumberOfMessages ?? 0);
      const inFlight = Number(Attributes.ApproximateNumberOfMessagesNotVisible ?? 0);
      if (visible + inFlight > 0) held.push(`${group} ${queue} ${visible}/${inFlight}`);
    }
  return held.join(", ") || "nothing";
}

/**
 * Reports of a whole SQS batch failing: of a function an SQS mapping invokes, not a crash
 * (injected), not the runtime's own calls (`ChangeMessageVisibility: ...`, `DeleteMessageBatch: ...`).
 */
function wholeBatchFailures(env: LocalEnvironment, reports: readonly string[]): string[] {
  const { functions, mappings } = env.deployment;
  const sqsInvoked = new Set(
    mappings
      .filter((m) => m.source === "sqs")
      .map((m) => functions.find((f) => f.logicalId === m.functionLogicalId)?.name),
  );
  return reports.filter((report) => {
    const [fn = "", error = ""] = report.split(/: (.*)/s);
    return (
      sqsInvoked.has(fn) &&
      !error.startsWith("InvocationCrash") &&
      !/^(ChangeMessageVisibility|DeleteMessageBatch)/.test(error)
    );
  });
}
