import { describe, expect, it, vi } from "vitest";
import { type LocalScript, ToolUse } from "../../functions/adapters/local-model";
import { toolOutputsSeen } from "../../functions/core/agent/content";
import type { ModelRequest } from "../../functions/core/model";
import { guardOutput } from "../../functions/core/output-guard";
import { refundReview } from "../../functions/roles/refund-review/local-script";
import { refundDesk } from "./refund-desk";

/**
 * The refund review's reason guard (functions/roles/refund-review/reason-guard.ts) sees every tool
 * output the run's model saw, and reads nothing the step that ended the run had not read: a model's
 * answer hands on the conversation its step read, a person's answer reads it once.
 */

/**
 * The longest run of a tool output's JSON text without a brace (40+ characters across its fields):
 * only a guard told the tool outputs finds it a copy (the negative control below).
 */
function copiedFrom(output: string): string {
  const copied = output
    .split(/[{}]/)
    .reduce((longest, part) => (part.length > longest.length ? part : longest), "");
  if (copied.length < 40) throw new Error(`too short to be found as a copy: ${copied}`);
  return copied;
}

/** The get_order output of the run's first turn, as the model saw it. */
function getOrderOutput(request: ModelRequest): string {
  const [first] = request.messages.flatMap((m) => m.toolResults ?? []);
  return JSON.stringify(first?.content ?? null);
}

/** Kinds of the guard's findings on `refund.review.completed`. */
function guardKinds(completed: { payload: unknown } | undefined): string[] {
  const payload = completed?.payload as
    | { output_guard?: { findings: { kind: string }[] } }
    | undefined;
  return (payload?.output_guard?.findings ?? []).map((f) => f.kind);
}

describe("the refund review's reason guard", () => {
  it("reads nothing the final model step did not: the conversation it read is handed on", async () => {
    const desk = refundDesk();
    const reads = vi.spyOn(desk.content, "getMany");
    await desk.ask("456", "Refund please");
    await desk.drain();
    const journal = await desk.journal();
    expect(journal?.status).toBe("COMPLETED");
    const read = reads.mock.calls.map(([refs]) => refs);
    // The answering step read every message before its answer; nothing read them all again.
    expect(read).toContainEqual(journal?.messages.slice(0, -1));
    expect(read).not.toContainEqual(journal?.messages);
    expect(desk.facts("refund.review.completed")[0]?.payload).toMatchObject({
      decision: "approved",
      output_guard: { verdict: "pass", findings: [] },
    });
  });

  it("a review resumed after an approval guards its reason with the tool outputs of the turns before the wait", async () => {
    let copied = "";
    const leaking: LocalScript = (request) => {
      const answer = refundReview(request);
      if (answer instanceof ToolUse || typeof answer !== "object" || !("reason" in answer))
        return answer;
      copied = copiedFrom(getOrderOutput(request));
      return { ...answer, reason: `${String(answer.reason)} ${copied}` };
    };
    const desk = refundDesk({}, leaking);
    await desk.ask("A-1002", "I cancelled this jacket, refund it");
    await desk.drain();
    expect((await desk.journal())?.status).toBe("BLOCKED");
    await desk.decide({ tool_call_id: "call_2_1", decision: "approve", reason: "checked" });
    await desk.drain();
    const [completed] = desk.facts("refund.review.completed");
    expect(completed?.payload).toMatchObject({
      decision: "approved",
      output_guard: { verdict: "refuse" },
    });
    expect(guardKinds(completed)).toContain("raw_tool_output");
    expect(JSON.stringify(completed?.payload)).not.toContain(copied);
    // The negative control: a guard not told the tool outputs does not find the copy.
    const blind = guardOutput(copied, {});
    expect(blind.findings.map((f) => f.kind)).not.toContain("raw_tool_output");
  });

  it("a review a person's answer ends reads its conversation for the guard, once", async () => {
    // One model turn (the look-ups), then the turn budget hands the run to a person.
    const desk = refundDesk({ maxTurns: 1 });
    await desk.ask("456", "Refund please");
    await desk.drain();
    const waiting = await desk.journal();
    expect(waiting?.waiting?.kind).toBe("answer");
    const messages = waiting?.messages ?? [];
    const [getOrder] = toolOutputsSeen(await desk.content.getMany(messages));
    const copied = copiedFrom(getOrder ?? "");
    const reads = vi.spyOn(desk.content, "getMany");
    const reason = `We could not refund it yet. ${copied}`;
    await desk.decide({ decision: "answer", output: { decision: "rejected", reason } });
    expect((await desk.journal())?.status).toBe("COMPLETED");
    expect(reads.mock.calls.map(([refs]) => refs)).toEqual([messages]);
    const [completed] = desk.facts("refund.review.completed");
    expect(completed?.payload).toMatchObject({ output_guard: { verdict: "refuse" } });
    expect(guardKinds(completed)).toContain("raw_tool_output");
  });
});
