import type { StepStatus } from "../../../functions/core/role";
import type { Envelope } from "../../../schemas";
import type { TraceNode, TraceView } from "../../operator/views";
import type { RuntimeEvent } from "./runtime";

interface Delivery {
  readonly group: string;
  readonly status: StepStatus;
  readonly reason?: string;
  readonly repaired: boolean;
}

export interface DeadLetter {
  readonly queue: string;
  readonly code: string;
  readonly reason: string;
  readonly eventId?: string;
}

/** Collects what the runtime reported: every handled event per consumer group, faults, failures. */
export class Observations {
  readonly deliveries = new Map<string, Delivery[]>();
  readonly envelopes = new Map<string, Envelope>();
  readonly errors: { group: string; code: string; errorClass: string; message: string }[] = [];
  readonly faults: string[] = [];
  readonly failures: string[] = [];
  readonly deadLetters: DeadLetter[] = [];
  /** Messages each group's dispatcher sent straight to the buffer dead-letter queue. */
  readonly dispatchDeadLetters = new Map<string, number>();

  readonly listener = (event: RuntimeEvent): void => {
    switch (event.kind) {
      case "consume-failed":
        this.errors.push({ group: event.group, ...event.failure.error });
        return;
      case "consumed": {
        const result = event.result;
        this.envelopes.set(result.event.event_id, result.event);
        for (const step of result.steps) {
          const list = this.deliveries.get(step.eventId) ?? [];
          list.push({
            group: event.group,
            status: step.status,
            reason: step.reason,
            repaired: step.repaired,
          });
          this.deliveries.set(step.eventId, list);
        }
        return;
      }
      case "dispatched": {
        const report = event.report as { deadLettered?: number; failedRecordIds?: string[] };
        if (report.failedRecordIds?.length)
          this.errors.push({
            group: event.group,
            code: "dispatch.send_failed",
            errorClass: "transient",
            message: `${report.failedRecordIds.length} buffer records not sent to the FIFO queue; retried`,
          });
        this.dispatchDeadLetters.set(
          event.group,
          (this.dispatchDeadLetters.get(event.group) ?? 0) + (report.deadLettered ?? 0),
        );
        return;
      }
      case "fault":
        this.faults.push(event.description);
        return;
      case "invocation-failed":
        this.failures.push(`${event.function}: ${event.error}`);
        return;
      case "stream-batch-dropped":
        this.failures.push(
          `${event.function}: gave up on a stream batch of ${event.records} records (sent to its on-failure destination)`,
        );
        return;
      default:
        return;
    }
  };

  count(group: string, status: StepStatus, reason?: string): number {
    let n = 0;
    for (const list of this.deliveries.values()) {
      n += list.filter(
        (d) =>
          d.group === group && d.status === status && (reason === undefined || d.reason === reason),
      ).length;
    }
    return n;
  }
}

/**
 * A trace read from the stack, with the duplicate deliveries the local runtime observed beside
 * each group's outcome (duplicates cost no write, so the stack itself does not record them).
 */
export function withObservedDuplicates(view: TraceView, observed: Observations): TraceView {
  const decorate = (node: TraceNode): TraceNode => {
    const seen = observed.deliveries.get(node.event.eventId) ?? [];
    return {
      ...node,
      outcomes: node.outcomes.map((o) => {
        const duplicates = seen.filter((d) => d.group === o.group && d.status === "duplicate");
        return duplicates.length > 0 ? { ...o, duplicates: duplicates.length } : o;
      }),
      children: node.children.map(decorate),
    };
  };
  return {
    ...view,
    roots: view.roots.map(decorate),
    ...(view.related ? { related: view.related.map(decorate) } : {}),
  };
}

/** Per consumer group: how many events were applied, duplicate, discarded (by reason), rejected. */
export function renderSummary(groups: readonly string[], observed: Observations): string {
  const lines = ["consumer group        applied  duplicate  discarded  rejected  dead-lettered"];
  for (const group of groups) {
    const discards = new Map<string, number>();
    for (const list of observed.deliveries.values()) {
      for (const d of list)
        if (d.group === group && d.status === "discarded")
          discards.set(d.reason ?? "?", (discards.get(d.reason ?? "?") ?? 0) + 1);
    }
    const discardText = [...discards].map(([r, n]) => `${n} ${r}`).join(", ") || "0";
    const dead =
      observed.errors.filter((e) => e.group === group && e.errorClass === "permanent").length +
      (observed.dispatchDeadLetters.get(group) ?? 0);
    lines.push(
      `${group.padEnd(22)}${String(observed.count(group, "applied")).padStart(7)}${String(observed.count(group, "duplicate")).padStart(11)}  ${discardText.padStart(9)}${String(observed.count(group, "rejected")).padStart(10)}${String(dead).padStart(15)}`,
    );
  }
  return lines.join("\n");
}

/**
 * What `renderTimeline` needs of a run: the orchestrator state's workflow, run and timeline, and
 * its parent for a child run.
 */
export interface TimelineSource {
  readonly workflow: string;
  readonly parent?: { readonly run_id: string; readonly node_id: string };
  readonly run: {
    readonly run_id: string;
    readonly status: string;
    readonly generation: number;
    readonly nodes: Readonly<Record<string, { readonly state: string }>>;
  };
  readonly timeline: readonly {
    readonly at: string;
    readonly event: string;
    readonly node_id?: string;
    readonly generation?: number;
    readonly cause: string;
  }[];
}

/**
 * A run's node timeline from the orchestrator's state: each step the DAG reported, its time from
 * the first step, and the event that caused it; then the final state of every node.
 */
export function renderTimeline(label: string, state: TimelineSource | undefined): string {
  if (!state) return `${label}: no run state`;
  const { run } = state;
  const { parent } = state;
  const lines = [
    `${label}: run ${run.run_id} (${state.workflow}) ${run.status}, generation ${run.generation}`,
    ...(parent ? [`  child of run ${parent.run_id}, node ${parent.node_id}`] : []),
  ];
  const start = Date.parse(state.timeline[0]?.at ?? "");
  for (const step of state.timeline) {
    const offset = Number.isNaN(start) ? "" : `+${Date.parse(step.at) - start} ms`;
    const what = `${step.event}${step.node_id ? ` ${step.node_id}` : ""}${step.generation !== undefined ? ` g${step.generation}` : ""}`;
    lines.push(`  ${offset.padStart(10)}  ${what.padEnd(34)} <- ${step.cause}`);
  }
  lines.push(
    `  nodes: ${Object.entries(run.nodes)
      .map(([id, node]) => `${id} ${node.state}`)
      .join(", ")}`,
  );
  return lines.join("\n");
}
