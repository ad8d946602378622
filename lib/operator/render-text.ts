import { ALL_FEATURES, type Feature, whyLacking } from "../../functions/roles/features";
import type { RedriveReport } from "./redrive";
import type {
  DeadLetterView,
  GroupOutcome,
  ItemSummary,
  StatusView,
  TraceNode,
  TraceRun,
  TraceView,
  WaitingView,
} from "./views";

/** Plain-text forms of the operator views, for the CLI. */

export function outcomeText(o: GroupOutcome): string {
  let text: string = o.outcome;
  if (o.reason && (o.outcome === "discarded" || o.outcome === "rejected")) text += `: ${o.reason}`;
  if (o.outcome === "dead-lettered" || o.outcome === "retrying")
    text += ` after ${o.attempts ?? "?"} receive(s): ${o.error?.code ?? o.reason ?? "?"}`;
  else if (o.error) text += ` (after ${o.attempts} receive(s), last error ${o.error.code})`;
  if (o.repaired) text += " (gap repair)";
  if (o.duplicates) text += `, duplicate×${o.duplicates}`;
  return `${o.group}: ${text}`;
}

function eventLine(n: TraceNode): string {
  const e = n.event;
  const where =
    e.version > 0 ? `${e.aggregate.type}/${e.aggregate.id} v${e.version}` : "unsequenced";
  const stored = e.storedSchemaVersion ? ` (stored as schema v${e.storedSchemaVersion})` : "";
  const step = e.agentStep ? ` after ${e.agentStep}` : "";
  const tenant = e.tenantId ? ` for tenant ${e.tenantId}` : "";
  const resumed = e.resumedFrom ? ` (run ${e.runId} resumed ${e.resumedFrom})` : "";
  return `${e.eventType}${stored} [${where}] ${e.eventId} by ${e.producer || "?"}${tenant} at ${e.occurredAt}${step}${resumed}`;
}

function nodeLines(n: TraceNode, prefix: string, branch: string): string[] {
  const lines = [`${prefix}${branch}${eventLine(n)}`];
  const inner = `${prefix}${branch === "" ? "" : branch === "└─ " ? "   " : "│  "}`;
  const pad = `${inner}${n.children.length > 0 ? "│" : " "}    `;
  for (const o of n.outcomes) lines.push(`${pad}${outcomeText(o)}`);
  if (n.outcomes.length === 0) lines.push(`${pad}(not consumed by any group yet)`);
  for (const s of n.sideEffects)
    lines.push(`${pad}side effect ${s.key}: ${s.state}, ${s.attempts} attempt(s)`);
  for (const d of n.deadLetters) lines.push(`${pad}in the dead-letter queue of ${d.group}`);
  n.children.forEach((c, i) => {
    lines.push(...nodeLines(c, inner, i === n.children.length - 1 ? "└─ " : "├─ "));
  });
  return lines;
}

/** A workflow run of a trace, with its parent run and its child runs. */
function runLine(run: TraceRun): string {
  const parent = run.parentRunId ? `, child of ${run.parentRunId}` : "";
  const children = run.childRunIds.length ? `, child runs ${run.childRunIds.join(", ")}` : "";
  return `  run         ${run.runId}${parent}${children}`;
}

export function renderTraceText(view: TraceView): string {
  const lines = [
    `trace of ${view.query}`,
    `  correlation ${view.correlationIds.join(", ")}`,
    `  task        ${view.taskIds.join(", ")}`,
    ...(view.traceIds?.length ? [`  trace id    ${view.traceIds.join(", ")}`] : []),
    ...(view.runs ?? []).map(runLine),
    "",
  ];
  for (const root of view.roots) lines.push(...nodeLines(root, "", ""), "");
  if (view.related?.length) {
    lines.push("made moot by this trace (other traces):");
    for (const r of view.related) lines.push(...nodeLines(r, "  ", ""));
  }
  return lines.join("\n").trimEnd();
}

/**
 * `agentbus status` as text: the groups and the relay, then what the stack serves of the
 * reference applications (`view.features`): runs and the sweeper with runs, held replies and
 * hand-offs with conversations; a line names what it does not serve.
 */
export function renderStatusText(view: StatusView, waiting?: WaitingView, tenant?: string): string {
  const header = ["group", "depth", "in-flight", "oldest", "dlq", "buffer", "buffer-dlq"];
  const rows = view.groups.map((g) => [
    g.group,
    String(g.depth),
    String(g.inFlight),
    g.oldestAgeSeconds === undefined ? "-" : `${g.oldestAgeSeconds}s`,
    String(g.deadLetters),
    g.bufferDepth === undefined ? "-" : String(g.bufferDepth),
    g.bufferDeadLetters === undefined ? "-" : String(g.bufferDeadLetters),
  ]);
  const lines = ["consumer groups", ...table(header, rows)];
  const age = view.relayIteratorAgeMs;
  const served = (feature: Feature, ...text: string[]) =>
    view.features.includes(feature) ? text : [];
  const lacking = ALL_FEATURES.filter((f) => !view.features.includes(f));
  lines.push(
    "",
    `relay: iterator age ${age === undefined ? "- (no CloudWatch data)" : `${age} ms`}, ${view.relayFailures} batch(es) in its failure queue`,
    ...served(
      "runs",
      `sweeper: last sweep ${view.lastSweepAt ?? "- (none in the last hour, or no CloudWatch data)"}`,
    ),
    ...(tenant === undefined
      ? []
      : [`tenant ${tenant} (runs and waits; the queues are every tenant's)`]),
    ...served(
      "runs",
      `runs: ${
        Object.entries(view.runsByStatus)
          .map(([s, n]) => `${n} ${s}`)
          .join(", ") || "none"
      }`,
    ),
    ...lacking.map((f) => `not served: ${whyLacking(f)}`),
    "waiting for a person:",
    ...served("conversations", `  held replies          ${view.counts.heldReplies}`),
    `  unknown side effects  ${view.counts.unknownSideEffects}`,
    `  awaiting approval     ${view.counts.awaitingApproval}`,
    `  NEEDS_HUMAN nodes     ${view.counts.needsHumanNodes}`,
    ...served("runs", `  FAILED nodes          ${view.counts.failedNodes}`),
    ...served("conversations", `  handed off            ${view.counts.handedOff}`),
  );
  if (waiting) lines.push(...waitingLines(waiting));
  return lines.join("\n");
}

/** Since when an item waits (`since ...`), or when it last changed where that is not known. */
const since = (c: ItemSummary) =>
  c.waitingSince === undefined ? c.updatedAt : `since ${c.waitingSince}`;

/** The tenant an item names, as the lines end with it (nothing where it names none). */
const tenantOf = (item: { readonly tenant?: string }) =>
  item.tenant === undefined ? "" : ` tenant ${item.tenant}`;

function waitingLines(w: WaitingView): string[] {
  const lines: string[] = [];
  for (const c of w.heldReplies)
    lines.push(`  held reply     ${c.kind} ${c.id} (${since(c)})${tenantOf(c)}`);
  for (const s of w.unknownSideEffects)
    lines.push(
      `  unknown        side effect ${s.key} (${s.attempts} attempt(s), ${s.updatedAt})${tenantOf(s)}`,
    );
  for (const c of w.awaitingApproval)
    lines.push(`  approval       ${c.label ?? c.id} (${since(c)})${tenantOf(c)}`);
  for (const c of w.needsHuman)
    lines.push(`  NEEDS_HUMAN    ${c.label ?? c.id} (${since(c)})${tenantOf(c)}`);
  for (const c of w.failedRuns)
    lines.push(`  ${c.status.padEnd(14)} run ${c.id} ${c.label ?? ""} (${since(c)})${tenantOf(c)}`);
  for (const c of w.handedOff)
    lines.push(`  handed off     ${c.kind} ${c.id} (${since(c)})${tenantOf(c)}`);
  return lines;
}

export function renderDeadLettersText(letters: readonly DeadLetterView[]): string {
  if (letters.length === 0) return "no dead letters";
  const header = ["group", "queue", "event id", "type", "order key", "code", "receives", "sent"];
  const rows = letters.map((d) => [
    d.group,
    d.queue,
    d.eventId ?? "-",
    d.eventType ?? "-",
    d.orderKey ?? "-",
    d.code,
    d.receiveCount === undefined ? "-" : String(d.receiveCount),
    d.sentAt ?? "-",
  ]);
  const lines = table(header, rows);
  lines.push("", "reasons:");
  for (const d of letters) lines.push(`  ${d.eventId ?? d.messageId}: ${d.reason}`);
  return lines.join("\n");
}

function table(header: string[], rows: string[][]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]?.length ?? 0)));
  const line = (cells: string[]) =>
    `  ${cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join("  ")
      .trimEnd()}`;
  return [line(header), ...rows.map(line)];
}

/** What a redrive moved (or would move), what it left and what failed. */
export function renderRedriveText(report: RedriveReport): string {
  const verb = report.dryRun ? "would move" : "moved";
  const lines = [
    `${report.group}: ${verb} ${report.moved.length} dead letter(s) back to ${report.to}`,
    ...report.moved.map(
      (m) =>
        `  ${m.orderKey ?? "-"}  ${m.eventId ?? m.messageId}  (dead-lettered ${m.sentAt ?? "?"})`,
    ),
  ];
  if (report.left > 0) lines.push(`${report.left} left in the dead-letter queue`);
  for (const f of report.failed) lines.push(`  not re-queued: ${f.messageId}: ${f.error}`);
  for (const f of report.notDeleted)
    lines.push(
      `  re-queued, but not deleted from the dead-letter queue (its copy there is harmless to redrive again): ${f.eventId ?? f.messageId}: ${f.error}`,
    );
  return lines.join("\n");
}
