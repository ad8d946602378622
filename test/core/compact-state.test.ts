import { describe, expect, it } from "vitest";
import { consume } from "../../functions/core/pipeline";
import type { Role } from "../../functions/core/role";
import { contentAgentRole } from "../../functions/roles/content-agents/content-agent";
import { conversation } from "../../functions/roles/customer-support/conversation/conversation";
import { conversationProjection } from "../../functions/roles/customer-support/conversation-projection/conversation-projection";
import { taskProjection } from "../../functions/roles/task-projection/task-projection";
import { referenceLocalModel, referenceOrchestrator } from "../support/reference";
import { countingStore, feedback, makeDeps, newTaskId, seedTask } from "./fixtures";

/**
 * A role whose states only AgentBus reads says so (Role.compactState), and its commits carry it to
 * the store, which may keep a large state deflated; views that other systems read from the table
 * do not, so theirs stay readable maps.
 */
describe("compact states", () => {
  it("are the orchestrator's, the content agents' and the conversations', not the views'", () => {
    expect(referenceOrchestrator().compactState).toBe(true);
    expect(conversation.compactState).toBe(true);
    const writing = contentAgentRole({ role: "writing", model: referenceLocalModel() });
    expect(writing.compactState).toBe(true);
    expect(taskProjection.compactState).toBeUndefined();
    expect(conversationProjection.compactState).toBeUndefined();
  });

  it("reach the store with each state the role writes", async () => {
    const { deps, store } = makeDeps();
    const { store: counting, commits } = countingStore(store);
    const taskId = newTaskId();
    const [v1] = await seedTask(deps, 1, taskId);
    const compactView: Role<unknown> = { ...(taskProjection as Role<unknown>), compactState: true };
    await consume(v1, taskProjection, { ...deps, store: counting });
    await consume(feedback(taskId, 4), compactView, { ...deps, store: counting });
    expect(commits.map((c) => c.state?.compact)).toEqual([undefined, true]);
  });
});
