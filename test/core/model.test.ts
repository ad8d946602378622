import { describe, expect, it } from "vitest";
import { z } from "zod";
import { classifyFailure, newRun } from "../../functions/core/agent-run";
import { AgentBusError, classify, TransientError } from "../../functions/core/errors";
import {
  extractJson,
  invokeStructured,
  ModelOutputInvalidError,
  type ModelPort,
  type ModelRequest,
  type ModelResponse,
  RAW_TEXT_LIMIT,
} from "../../functions/core/model";

/** A ModelPort that replays `replies` in order and records every request. */
function fakeModel(replies: readonly (string | Error)[]) {
  const requests: ModelRequest[] = [];
  const model: ModelPort = {
    name: "fake",
    async converse(request): Promise<ModelResponse> {
      requests.push(request);
      const reply = replies[requests.length - 1];
      if (reply === undefined) throw new Error(`unexpected call ${requests.length}`);
      if (reply instanceof Error) throw reply;
      return {
        text: reply,
        stopReason: "end_turn",
        usage: { inputTokens: 10, outputTokens: 5 },
        modelId: "fake-model",
        latencyMs: 1,
      };
    },
  };
  return { model, requests };
}

const Topic = z.object({ topic: z.string().min(1), sources: z.array(z.string()) });
const request: ModelRequest = {
  system: "You pick topics. Answer with JSON only.",
  messages: [{ role: "user", text: "Pick a topic about batteries." }],
  metadata: { role: "topic-selection", task_id: "t-1", correlation_id: "c-1" },
};
const valid = JSON.stringify({ topic: "Battery recycling", sources: ["a", "b"] });

describe("invokeStructured", () => {
  it("returns the parsed value of a valid first answer", async () => {
    const { model, requests } = fakeModel([valid]);
    const result = await invokeStructured(model, request, Topic);
    expect(result.value).toEqual({ topic: "Battery recycling", sources: ["a", "b"] });
    expect(result.attempts).toBe(1);
    expect(result.response.modelId).toBe("fake-model");
    expect(requests).toEqual([request]);
  });

  it("reads the first fenced ```json block of a reply with prose around it", async () => {
    const reply = `Here you go:\n\`\`\`json\n${valid}\n\`\`\`\nAnd another:\n\`\`\`json\n{"topic":"x","sources":[]}\n\`\`\``;
    const { model } = fakeModel([reply]);
    const result = await invokeStructured(model, request, Topic);
    expect(result.value.topic).toBe("Battery recycling");
    expect(result.attempts).toBe(1);
  });

  it("reads a bare object embedded in prose", () => {
    expect(extractJson(`Sure! ${valid} Hope that helps.`)).toEqual({
      ok: true,
      value: JSON.parse(valid),
    });
  });

  it("re-asks once with the validation errors and succeeds on the second attempt", async () => {
    const { model, requests } = fakeModel(["I think batteries are great.", valid]);
    const result = await invokeStructured(model, request, Topic);
    expect(result.attempts).toBe(2);
    expect(result.value.sources).toEqual(["a", "b"]);
    expect(requests).toHaveLength(2);
    const second = requests[1];
    expect(second?.system).toBe(request.system);
    expect(second?.metadata).toEqual(request.metadata);
    expect(second?.messages.slice(0, 1)).toEqual(request.messages);
    expect(second?.messages[1]).toEqual({
      role: "assistant",
      text: "I think batteries are great.",
    });
    const correction = second?.messages[2];
    expect(correction?.role).toBe("user");
    expect(correction?.text).toContain("Validation errors");
    expect(correction?.text).toContain("not JSON");
  });

  it("counts a schema violation (valid JSON, wrong shape) as invalid and names the paths", async () => {
    const { model, requests } = fakeModel([JSON.stringify({ topic: "", sources: "a" }), valid]);
    const result = await invokeStructured(model, request, Topic);
    expect(result.attempts).toBe(2);
    const correction = requests[1]?.messages.at(-1)?.text ?? "";
    expect(correction).toMatch(/- topic: /);
    expect(correction).toMatch(/- sources: /);
  });

  it("throws ModelOutputInvalidError (model.invalid_output, permanent) after maxAttempts", async () => {
    const long = `no json here ${"x".repeat(RAW_TEXT_LIMIT * 2)}`;
    const { model, requests } = fakeModel(["nope", "still nope", long, valid]);
    const error = await invokeStructured(model, request, Topic).catch((e: unknown) => e);
    expect(requests).toHaveLength(3);
    expect(error).toBeInstanceOf(ModelOutputInvalidError);
    expect(error).toBeInstanceOf(AgentBusError);
    const invalid = error as ModelOutputInvalidError;
    expect(invalid.code).toBe("model.invalid_output");
    expect(invalid.errorClass).toBe("permanent");
    expect(invalid.attempts).toBe(3);
    expect(invalid.rawText.length).toBeLessThanOrEqual(RAW_TEXT_LIMIT);
    expect(invalid.rawText.startsWith("no json here")).toBe(true);
    expect(invalid.issues[0]).toContain("not JSON");
    expect(invalid.details).toMatchObject({ attempts: 3, model_id: "fake-model" });
    // The conversation does not grow with the attempts: only the last answer is echoed.
    expect(requests[2]?.messages).toHaveLength(3);
    expect(requests[2]?.messages[1]?.text).toBe("still nope");
  });

  it("honours maxAttempts: 1 (no re-ask)", async () => {
    const { model, requests } = fakeModel(["nope", valid]);
    await expect(invokeStructured(model, request, Topic, { maxAttempts: 1 })).rejects.toThrow(
      ModelOutputInvalidError,
    );
    expect(requests).toHaveLength(1);
  });

  it("lets the agent run retry it within the budget, then hand it to a human", async () => {
    const { model } = fakeModel(["a", "b", "c"]);
    const error = await invokeStructured(model, request, Topic).catch((e: unknown) => e);
    const run = newRun({
      agent_run_key: "arun_1",
      task_id: "task_1",
      role: "topic-selection",
      now: new Date("2026-01-01T00:00:00Z"),
    });
    expect(classifyFailure(error, { ...run, attempt: 1 })).toBe("RetryScheduled");
    expect(classifyFailure(error, { ...run, attempt: run.max_attempts })).toBe("NeedsHuman");
  });

  it("propagates a transient error of the port unchanged, without retrying it", async () => {
    const throttled = new TransientError("model.throttled", "slow down");
    const { model, requests } = fakeModel([throttled, valid]);
    const error = await invokeStructured(model, request, Topic).catch((e: unknown) => e);
    expect(error).toBe(throttled);
    expect(classify(error)).toBe("transient");
    expect(requests).toHaveLength(1);
  });

  it("quotes the bad answer inside the correction when the conversation ends with an assistant prefill", async () => {
    const prefilled: ModelRequest = {
      messages: [
        { role: "user", text: "Pick a topic." },
        { role: "assistant", text: "{" },
      ],
    };
    const { model, requests } = fakeModel(["oops", valid]);
    await invokeStructured(model, prefilled, Topic);
    const messages = requests[1]?.messages ?? [];
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant", "user"]);
    expect(messages[2]?.text).toContain("oops");
  });

  it("rejects a maxAttempts below 1", async () => {
    const { model } = fakeModel([valid]);
    await expect(invokeStructured(model, request, Topic, { maxAttempts: 0 })).rejects.toThrow(
      RangeError,
    );
  });
});
