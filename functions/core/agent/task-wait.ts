import { nextPollAt, type StillGoingOn } from "../write-once";
import { type AgentJournal, moved, recorded, type Waiting } from "./agent";

/**
 * A run that waits for work a tool call started at an outside system and that outlived the call
 * (an MCP task still `working` at the call's timeout; ../write-once.ts keeps the work's id with
 * the ledger's record as soon as the system gave it):
 *
 * - The run is BLOCKED, waiting `task` on the call, the work named (`remote_task`: its id and
 *   status), its next poll as the wait's `deadline`. No person is asked and none is listed.
 * - At the deadline the lease sweeper sends the run's decision command `deadline`, as it does for
 *   an approval (../sweeper.ts): `taskPollDue` makes the run RUNNING again and the step it then
 *   takes settles the call by polling the work (the tool's `resume`: an MCP `tasks/get`), never
 *   by calling again. Completed -> the tool's output, and the model's turn goes on; failed or
 *   cancelled -> refused, the model is told; still going on -> BLOCKED again, a later poll;
 *   going on past the tool's `waitLimitSeconds` (24 h) after the call -> unknown, handed to a
 *   person (NEEDS_HUMAN, `agentbus resolve`), as an outcome still unknown after
 *   `maxUnknownAttempts` is.
 * - The next poll: `nextPollAt` (../write-once.ts: the wait the system asks for, an MCP task's
 *   `pollInterval`, or a quarter of the work's age, within 5 s .. 15 min), as for a workflow
 *   step that waits. The sweeper's schedule is the finest grain: a poll is sent by the first
 *   sweep at or after its deadline.
 */

export { MAX_TASK_POLL_MS, MIN_TASK_POLL_MS, nextPollAt } from "../write-once";

/** The run BLOCKED on the work its call started, until its next poll. */
export function blockedOnTask(
  journal: AgentJournal,
  call: { readonly id: string; readonly tool: string; readonly input: unknown },
  work: StillGoingOn & { readonly key: string },
  now: Date,
): AgentJournal {
  const waiting: Waiting = {
    kind: "task",
    tool_call_id: call.id,
    tool: call.tool,
    input: call.input,
    key: work.key,
    since: work.since,
    deadline: nextPollAt(work, now).toISOString(),
    reason: `${call.tool}: ${work.operation} is ${work.status}`,
    remote_task: { id: work.operation, status: work.status },
  };
  const step = {
    kind: "tool" as const,
    tool_call_id: call.id,
    tool: call.tool,
    outcome: `waiting: ${work.operation} ${work.status}`,
    key: work.key,
  };
  return recorded(journal, step, now, { status: moved(journal, "TaskBlocked"), waiting });
}

/** True when the run waits for outside work (no person is asked). */
export function waitsForTask(journal: Pick<AgentJournal, "status" | "waiting">): boolean {
  return journal.status === "BLOCKED" && journal.waiting?.kind === "task";
}

/**
 * The run made RUNNING again to poll the work it waits for, when its poll is due; undefined when
 * it waits for none, or not yet (a sweeper's message for an earlier poll, delivered late).
 */
export function taskPollDue(journal: AgentJournal, now: Date): AgentJournal | undefined {
  const deadline = journal.waiting?.deadline;
  if (!waitsForTask(journal) || !deadline || Date.parse(deadline) > now.getTime()) return undefined;
  const { waiting: _waiting, ...rest } = journal;
  return { ...rest, status: moved(journal, "ExternalUnblocked") };
}
