import type { AggregateRef, Envelope } from "../../schemas";
import { AGENT_RUN_AGGREGATE } from "../core/agent/agent-role";
import { assignmentKey, STEP_RUN_AGGREGATE, stepRunKey } from "../core/step-role";
import { isNodeAnswer, nodeFactEvents, runFactEvents, type Thread } from "./agui-events";
import { FINAL_VERSION, type PlacedFact, type Position } from "./agui-position";
import { type AguiPoll, type AguiPorts, notFound, readAfter, sendPending } from "./agui-stream";
import { toolCallReadsOf } from "./agui-tool-args";
import { DAG_RUN } from "./api";
import { fail } from "./http";
import type { Caller } from "./identity";
import { loadStoredRun } from "./stored-run";

/**
 * A run's AG-UI stream (`GET /v1/runs/{id}/agui`): the run's own stream `dag_run/<id>` (key `r`)
 * and the stream of each assignment its commands name, where the node's role answers:
 *
 * - a role whose commands are the hub's derived ones (`<stem>.node.requested`, the kit's step
 *   roles: functions/core/step-role.ts) answers on `step_run/<stepRunKey(run, node, generation,
 *   item)>`;
 * - a role with commands of its own (the content agents) on `agent_run/<assignmentKey("arun",
 *   ...)>`, the agent run of the assignment (functions/roles/content-agents/ids.ts), where an
 *   agent that loops over tools also records each tool call.
 *
 * Assignments are numbered in the order their first command stands in the run's stream (1, 2,
 * ...), which is the same on every read, and each is its number's key in the position. Once an
 * assignment's answer is sent its stream sends nothing more (`isNodeAnswer`): the answer is placed
 * at FINAL_VERSION, so the position of a run whose assignments ended is a few ranges
 * (`1-40=f,r=93`), and the stream reads no ended assignment again. A run shows the answers of its
 * first MAX_SHOWN_ASSIGNMENTS assignments; the id stays under 8 KB even when each of them is
 * under way at its own version.
 *
 * What is read, and when: the run's state once per poll; only when its revision moved, the run's
 * stream after what was read (all of it when the stream opens: the assignments' numbers come
 * from it) and the stream of each assignment not yet answered. A fresh read sends the run's facts
 * by version, each assignment's facts right after the command that opened it. Once the run has
 * ended and everything is sent, the stream closes; a start the orchestrator refused (its state
 * null, ./stored-run.ts) ends with its `workflow.rejected`, the one fact of its stream. An agent's
 * tool call shows its input and its output, read from the content store (./agui-tool-args.ts).
 */

export const RUN_KEY = "r";
/** The streams a run's assignments answer on (what the stream function may read besides). */
export const ASSIGNMENT_STREAMS = [STEP_RUN_AGGREGATE, AGENT_RUN_AGGREGATE] as const;
/** The assignments of a run whose streams are read (the rest show their commands only). */
export const MAX_SHOWN_ASSIGNMENTS = 500;

/** A fact of a run's stream or of one of its assignments' streams. */
export interface RunFact {
  readonly envelope: Envelope;
  readonly source: "run" | "assignment";
  /** The command that opened the run's first assignment. */
  readonly opensNodes?: boolean;
}

/** One assignment: its key in the position, the stream its role answers on, its command's place. */
interface Assignment {
  readonly key: string;
  readonly stream: AggregateRef;
  readonly commandVersion: number;
}

interface RunReads {
  /** Per key, the highest version read. */
  readonly read: Record<string, number>;
  /** The run's assignments by stream id, in the order their commands opened them. */
  readonly assignments: Map<string, Assignment>;
  /** The keys of the assignments whose answer was read. */
  readonly answered: Set<string>;
}

/** A run's AG-UI stream from `position` (the caller's run: checked first). */
export async function runAgui(
  ports: AguiPorts,
  caller: Caller,
  runId: string,
  position: Position,
): Promise<AguiPoll> {
  // The run's state, and its stream where a refused start says why and whose it was.
  const runSource = { store: ports.store, streams: ports };
  const opened = await loadStoredRun(runSource, runId, caller.tenantId);
  if (opened.kind === "not_found") fail("not_found", `no run ${runId}`);
  const thread: Thread = { threadId: runId };
  const sent = Object.entries(position.sent);
  const reads: RunReads = {
    read: Object.fromEntries(sent.filter(([key]) => key !== RUN_KEY)),
    assignments: new Map(),
    answered: new Set(sent.filter(([, v]) => v === FINAL_VERSION).map(([key]) => key)),
  };
  let at = position;
  let revision = -1;
  return async (sink) => {
    const run = await loadStoredRun(runSource, runId, caller.tenantId);
    if (run.kind === "unstored") return "more";
    if (run.kind === "not_found") return notFound(sink, `no run ${runId}`);
    if (run.revision === revision) return "more";
    revision = run.revision;
    const facts = await runFacts(ports, runId, reads);
    const assignments = facts.filter((f) => f.fact.source === "assignment");
    const calls = await toolCallReadsOf(
      ports.content,
      assignments.map((f) => f.fact.envelope),
    );
    at = sendPending(sink, facts, at, (fact) =>
      fact.source === "run"
        ? runFactEvents(thread, fact.envelope, fact.opensNodes)
        : nodeFactEvents(thread, fact.envelope, calls.get(fact.envelope.event_id)),
    );
    // A refused start ended there: its `workflow.rejected`, just sent, is the run's end.
    return run.kind === "run" && run.state.run.status === "RUNNING" ? "more" : "done";
  };
}

/** The facts read since the last read: the run's new facts, and its assignments' not answered. */
async function runFacts(
  ports: AguiPorts,
  runId: string,
  reads: RunReads,
): Promise<PlacedFact<RunFact>[]> {
  const facts: PlacedFact<RunFact>[] = [];
  for (const envelope of await readAfter(
    ports,
    { type: DAG_RUN, id: runId },
    reads.read[RUN_KEY] ?? 0,
  )) {
    const version = envelope.aggregate.version;
    reads.read[RUN_KEY] = version;
    const opensNodes = openAssignment(reads, runId, envelope)?.key === "1";
    const fact: RunFact = { envelope, source: "run", ...(opensNodes ? { opensNodes } : {}) };
    facts.push({ key: RUN_KEY, version, sort: [version], fact });
  }
  for (const assignment of reads.assignments.values())
    if (!reads.answered.has(assignment.key))
      facts.push(...(await assignmentFacts(ports, assignment, reads)));
  return facts;
}

/** An assignment's facts after what was read, up to its answer. */
async function assignmentFacts(
  ports: AguiPorts,
  assignment: Assignment,
  reads: RunReads,
): Promise<PlacedFact<RunFact>[]> {
  const { key, stream, commandVersion } = assignment;
  const facts: PlacedFact<RunFact>[] = [];
  for (const envelope of await readAfter(ports, stream, reads.read[key] ?? 0)) {
    const version = envelope.aggregate.version;
    reads.read[key] = version;
    const answer = isNodeAnswer(envelope);
    facts.push({
      key,
      version: answer ? FINAL_VERSION : version,
      sort: [commandVersion, version],
      fact: { envelope, source: "assignment" },
    });
    if (answer) {
      reads.answered.add(key);
      break;
    }
  }
  return facts;
}

/** The assignment a command of the run's stream opens (none when it names one already known). */
function openAssignment(reads: RunReads, runId: string, command: Envelope): Assignment | undefined {
  const stream = assignmentStreamOf(runId, command);
  if (!stream || reads.assignments.has(stream.id)) return undefined;
  if (reads.assignments.size >= MAX_SHOWN_ASSIGNMENTS) return undefined;
  const key = String(reads.assignments.size + 1);
  const assignment = { key, stream, commandVersion: command.aggregate.version };
  reads.assignments.set(stream.id, assignment);
  return assignment;
}

/**
 * The stream where the role a command of the run is for answers its assignment (see the module
 * comment); undefined for a fact that is no step role's command (a run's end, a child run's).
 */
export function assignmentStreamOf(runId: string, command: Envelope): AggregateRef | undefined {
  const type = command.event_type;
  if (!type.endsWith(".requested") || type.startsWith("workflow.")) return undefined;
  const payload = command.payload as Readonly<Record<string, unknown>> | null;
  const nodeId = payload?.node_id;
  const generation = payload?.generation;
  if (payload?.run_id !== runId || typeof nodeId !== "string") return undefined;
  if (typeof generation !== "number") return undefined;
  const item = payload.item;
  const index = typeof item === "number" ? item : (item as { index?: unknown } | undefined)?.index;
  const at = typeof index === "number" ? index : undefined;
  return type.includes(".node.")
    ? { type: STEP_RUN_AGGREGATE, id: stepRunKey(runId, nodeId, generation, at) }
    : { type: AGENT_RUN_AGGREGATE, id: assignmentKey("arun", runId, nodeId, generation, at) };
}
