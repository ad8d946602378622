import type { Envelope, EventPayloads, EventType } from "../../schemas";

/**
 * Attention signals: what a role's consumer can emit that a person must act on. A signal is a
 * value declared by whoever raises it (`AttentionSignal`: its name, the metric it is counted
 * under, its alarm's words); a role module lists, in `deployment.attention`, the rules that say
 * which of its emitted events raise which signal (`AttentionRule`). The consumer counts, per
 * emitted event, the signals its module's rules find (functions/handlers/consumer-metrics.ts); the
 * stack gives each group one alarm per signal its rules name (lib/infra/constructs). The core
 * knows the idea of a signal and the hub's own signals below, never an application's: an
 * application declares its own beside the role that raises it (functions/roles/...).
 *
 * The metric name and the alarm's id are deployed names: changing either replaces the alarm and
 * starts the dashboard's graph anew.
 */

/** How a signal is watched: an alarm per group that raises it, whose description tells a person what to do. */
export interface AttentionAlarm {
  /** The alarm's construct id within its group (`NeedsHumanAlarm`). */
  readonly id: string;
  /** What happened, as a plural a count may precede ("agent runs ended NEEDS_HUMAN"). */
  readonly what: string;
  /** Why it needs a person ("the run waits for a person"). */
  readonly why: string;
  /** The sentence that says what to run (`operatorCommand`), without its final full stop. */
  readonly act: string;
  /** Occurrences within the window that do not yet alarm (0..1,000,000). @default 0 */
  readonly tolerated?: number;
  /** The window occurrences are counted over, in whole minutes (1..1440). @default 5 */
  readonly windowMinutes?: number;
}

/** Something a person must act on, declared once by whoever raises it. */
export interface AttentionSignal {
  /** Kebab-case, unique among the signals of a deployment (`needs-human`). */
  readonly name: string;
  /** The CloudWatch metric it is counted under, unique too (`AgentRunNeedsHuman`). */
  readonly metric: string;
  readonly alarm: AttentionAlarm;
}

/** A role's declaration that some of the events it emits raise a signal. */
export interface AttentionRule {
  readonly signal: AttentionSignal;
  /** Whether this emitted event raises the signal. */
  raisedBy(event: Envelope): boolean;
}

/** How the operator CLI is typed. */
export const OPERATOR_CLI = "npx agentbus";

/** An operator command as typed, in backquotes: `` `npx agentbus status` ``. */
export function operatorCommand(command: string): string {
  return `\`${OPERATOR_CLI} ${command}\``;
}

/**
 * The rule that an emitted event of type `type` raises `signal`, when `when` says so of its
 * payload (typed by the registry); left out: every such event does.
 */
export function raiseOn<T extends EventType>(
  type: T,
  signal: AttentionSignal,
  when?: (payload: EventPayloads[T]) => boolean,
): AttentionRule {
  return {
    signal,
    raisedBy: (event) =>
      event.event_type === type && (when?.(event.payload as EventPayloads[T]) ?? true),
  };
}

/** The signals `event` raises under `rules`, each once (two rules of one signal count once). */
export function signalsRaisedBy(
  event: Envelope,
  rules: readonly AttentionRule[],
): AttentionSignal[] {
  const raised = new Map<string, AttentionSignal>();
  for (const rule of rules)
    if (!raised.has(rule.signal.name) && rule.raisedBy(event))
      raised.set(rule.signal.name, rule.signal);
  return [...raised.values()];
}

/** The signals the rules name, each once by name, in the order the rules first name them. */
export function signalsOf(rules: readonly AttentionRule[]): AttentionSignal[] {
  return uniqueSignals(rules.map((rule) => rule.signal));
}

/** The signals, each once by name (the first of a name), in order. */
export function uniqueSignals(signals: readonly AttentionSignal[]): AttentionSignal[] {
  const byName = new Map<string, AttentionSignal>();
  for (const signal of signals) if (!byName.has(signal.name)) byName.set(signal.name, signal);
  return [...byName.values()];
}

/** Whether two signals are the same declaration (the same value, or equal field by field). */
export function sameSignal(a: AttentionSignal, b: AttentionSignal): boolean {
  if (a === b) return true;
  const fields = ["id", "what", "why", "act", "tolerated", "windowMinutes"] as const;
  return (
    a.name === b.name &&
    a.metric === b.metric &&
    fields.every((field) => a.alarm[field] === b.alarm[field])
  );
}

// The hub's own signals, each of a concept of the core.

/**
 * An agent run gave up and waits for a person: a DAG agent's run ended NEEDS_HUMAN
 * (./agent-run.ts), or an agent loop handed over for good (./agent).
 */
export const NEEDS_HUMAN: AttentionSignal = {
  name: "needs-human",
  metric: "AgentRunNeedsHuman",
  alarm: {
    id: "NeedsHumanAlarm",
    what: "agent runs ended NEEDS_HUMAN",
    why: "the run waits for a person",
    act: `Run ${operatorCommand("status")}, then ${operatorCommand("workflow show <run id>")} or ${operatorCommand("approvals")}; answer with ${operatorCommand("workflow resolve")} or ${operatorCommand("resolve")}`,
  },
};

/** Something waits for a person's yes or no (./approval.ts): a tool call, a confirmation. */
export const AWAITING_APPROVAL: AttentionSignal = {
  name: "awaiting-approval",
  metric: "ApprovalRequested",
  alarm: {
    id: "AwaitingApprovalAlarm",
    what: "approvals requested",
    why: "BLOCKED until a person decides or the deadline passes",
    act: `Run ${operatorCommand("approvals")}, then ${operatorCommand("approve <id> --step <step>")} or ${operatorCommand("reject <id> --step <step>")}`,
  },
};

/** A side effect whose outcome could not be learnt (./side-effects.ts): a send, a refund. */
export const UNKNOWN_SIDE_EFFECTS: AttentionSignal = {
  name: "unknown-side-effects",
  metric: "UnknownSideEffectOutcome",
  alarm: {
    id: "UnknownSideEffectAlarm",
    what: "sends whose outcome stayed unknown",
    why: "the customer may or may not have the reply",
    act: `Run ${operatorCommand("send list")}; check with the channel, then ${operatorCommand("send resolve <key> --as delivered|resend|abandon")}, never a new send`,
  },
};

const FIX_RUN = `Run ${operatorCommand("status")}, then ${operatorCommand("workflow show <run id>")}; after the fix, ${operatorCommand("workflow reset <run id> --node <node>")}`;

/** A workflow run (./dag) ended without any node completed. */
export const FAILED_RUNS: AttentionSignal = {
  name: "failed-runs",
  metric: "WorkflowFailed",
  alarm: {
    id: "FailedRunAlarm",
    what: "workflow runs failed",
    why: "no node completed",
    act: FIX_RUN,
  },
};

/** A workflow run (./dag) ended with some nodes completed and some not. */
export const PARTIAL_RUNS: AttentionSignal = {
  name: "partial-runs",
  metric: "WorkflowPartial",
  alarm: {
    id: "PartialRunAlarm",
    what: "workflow runs ended PARTIAL",
    why: "some nodes did not complete",
    act: FIX_RUN,
  },
};
