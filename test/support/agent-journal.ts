import { type AgentJournal, newJournal } from "../../functions/core/agent/agent";
import type { ContentStore } from "../../functions/core/agent/content";

/**
 * A new agent run's journal, as an agent test begins one: the user's `text` put in the content
 * store as its first message; its start, decision type and correlation named after `stem`
 * (`<stem>.requested`, `<stem>.decision.requested`, `corr_<stem>`).
 */
export async function firstJournal(
  content: Pick<ContentStore, "put">,
  run: {
    readonly runId: string;
    readonly taskId: string;
    readonly agent: string;
    readonly stem: string;
    readonly subject: Readonly<Record<string, string>>;
    readonly text: string;
    readonly now: Date;
    /** The starting event's payload. */
    readonly payload?: Record<string, unknown>;
  },
): Promise<AgentJournal> {
  const first = await content.put(JSON.stringify({ role: "user", text: run.text }));
  return newJournal({
    runId: run.runId,
    taskId: run.taskId,
    agent: run.agent,
    subject: run.subject,
    startedBy: { event_type: `${run.stem}.requested`, payload: run.payload ?? {} },
    correlationId: `corr_${run.stem}`,
    decisionType: `${run.stem}.decision.requested`,
    firstMessage: first,
    now: run.now,
  });
}
