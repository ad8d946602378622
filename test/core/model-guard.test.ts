import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ToolUse } from "../../functions/adapters/local-model";
import type { ModelPort, ModelRequest, ModelResponse } from "../../functions/core/model";
import {
  BudgetExhaustedError,
  DEFAULT_MODEL_BUDGETS,
  GuardedModel,
  InMemoryModelControls,
  type ModelBudgets,
  OperatorStopError,
  spendOf,
} from "../../functions/core/model-guard";
import { costMicros, priceOf, UNLISTED_MODEL_PRICE } from "../../functions/core/model-prices";
import { RUN, refundDesk } from "../roles/refund-desk";
import { referenceLocalModel } from "../support/reference";

/**
 * The model budgets and the operator's stops (functions/core/model-guard.ts) on the refund agent
 * through the real pipeline, in memory: a model that keeps asking for tools stops at the run's
 * or the tenant's budget (NEEDS_HUMAN, `budget.exhausted`); a stop lets no model or tool call
 * start and ends the run CANCELLED; a resume lets new work run.
 */

const TENANT = "acme";

/** A model that always asks for `get_order`, counting the calls that reached it. */
class LoopingModel implements ModelPort {
  readonly name = "looping";
  calls = 0;
  private readonly inner = referenceLocalModel({
    scripts: {
      "refund-review": (request: ModelRequest) =>
        new ToolUse([
          {
            id: `call_${request.messages.length}`,
            name: "get_order",
            input: { order_id: "123" },
          },
        ]),
    },
  });

  converse(request: ModelRequest): Promise<ModelResponse> {
    this.calls += 1;
    return this.inner.converse(request);
  }
}

/** The refund desk with a looping model behind a guard over `controls`. */
function loopingDesk(budgets: ModelBudgets, controls = new InMemoryModelControls(budgets)) {
  const looping = new LoopingModel();
  const desk = refundDesk({ maxTurns: 100 }, new GuardedModel(looping, controls));
  let toolCalls = 0;
  const orders = desk.orders;
  const get = orders.get.bind(orders);
  orders.get = async (...args: Parameters<typeof get>) => {
    toolCalls += 1;
    return get(...args);
  };
  return { desk, looping, controls, toolCalls: () => toolCalls };
}

const tokensOnly = (tokens: number): ModelBudgets => ({
  ...DEFAULT_MODEL_BUDGETS,
  run: { tokens, usd: 1_000 },
});

describe("model budgets", () => {
  it("prices a call by its model's family, an unlisted model as the dearest listed", () => {
    expect(priceOf("global.anthropic.claude-haiku-4-5-20251001-v1:0")).toEqual({
      input: 1,
      output: 5,
    });
    expect(priceOf("us.anthropic.claude-3-5-haiku-20241022-v1:0").input).toBe(0.8);
    expect(priceOf("deterministic-local-model")).toBe(UNLISTED_MODEL_PRICE);
    // 1,000 tokens in at $1/M and 200 out at $5/M: 1,000 + 1,000 millionths of a dollar.
    expect(
      costMicros("anthropic.claude-haiku-4-5-20251001-v1:0", {
        inputTokens: 1000,
        outputTokens: 200,
      }),
    ).toBe(2000);
  });

  it("a run whose model keeps calling tools stops at its token budget: NEEDS_HUMAN, budget.exhausted", async () => {
    const { desk, looping, toolCalls } = loopingDesk(tokensOnly(2_000));
    await desk.ask("123", "Refund order 123 please", undefined, TENANT);
    await desk.drain(500);
    const journal = await desk.journal();
    expect(journal?.status).toBe("NEEDS_HUMAN");
    expect(journal?.failure?.code).toBe("budget.exhausted");
    expect(journal?.failure?.message).toMatch(
      new RegExp(`^budget\\.exhausted: run ${RUN} spent \\d+ tokens of its 2000 tokens budget`),
    );
    expect(journal?.waiting?.kind).toBe("answer");
    const spent = (journal?.totals.input_tokens ?? 0) + (journal?.totals.output_tokens ?? 0);
    expect(spent).toBeGreaterThanOrEqual(2_000);
    // Every model call that started made a turn, and every turn's tool call ran once.
    expect(looping.calls).toBe(journal?.totals.model_turns);
    expect(toolCalls()).toBe(journal?.totals.tool_calls);
    expect(desk.facts("refund.review.needs_person")).toHaveLength(1);
  });

  it("property: no model call starts once a run has spent its budget, and none is refused before", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 20_000 }), async (limit) => {
        const { desk, looping } = loopingDesk(tokensOnly(limit));
        await desk.ask("123", "Refund order 123 please", undefined, TENANT);
        await desk.drain(1_000);
        const journal = await desk.journal();
        const totals = journal?.totals;
        const total = (totals?.input_tokens ?? 0) + (totals?.output_tokens ?? 0);
        const last = journal?.window.filter((s) => s.kind === "model").at(-1)?.tokens;
        // The run stopped having spent the budget; before its last turn it had not.
        expect(journal?.failure?.code).toBe("budget.exhausted");
        expect(total).toBeGreaterThanOrEqual(limit);
        expect(total - (last?.input ?? 0) - (last?.output ?? 0)).toBeLessThan(limit);
        expect(looping.calls).toBe(journal?.totals.model_turns);
      }),
      { numRuns: 25 },
    );
  });

  it("the tenant's dollar budget for the day is shared by its runs and stops the next one's first call", async () => {
    const budgets: ModelBudgets = {
      ...DEFAULT_MODEL_BUDGETS,
      tenantDay: { tokens: 1e9, usd: 0.05 },
    };
    const controls = new InMemoryModelControls(budgets);
    const first = loopingDesk(budgets, controls);
    await first.desk.ask("123", "Refund order 123 please", undefined, TENANT);
    await first.desk.drain(500);
    const ended = await first.desk.journal();
    expect(ended?.failure?.message).toMatch(
      /^budget\.exhausted: tenant acme spent \$0\.05\d+ of its \$0\.0500 budget for the day/,
    );
    const day = [...controls.days.values()][0];
    expect(day?.micros).toBeGreaterThanOrEqual(50_000);
    expect(day?.calls).toBe(first.looping.calls);
    expect(ended?.totals.cost_micros).toBe(day?.micros);

    const second = loopingDesk(budgets, controls);
    await second.desk.ask("123", "Refund order 123 please", undefined, TENANT);
    await second.desk.drain(500);
    expect(second.looping.calls).toBe(0);
    expect((await second.desk.journal())?.failure?.code).toBe("budget.exhausted");
    // Another tenant's run is not held by it.
    const other = loopingDesk(tokensOnly(500), controls);
    await other.desk.ask("123", "Refund order 123 please", undefined, "globex");
    await other.desk.drain(500);
    expect(other.looping.calls).toBeGreaterThan(0);
  });

  it("a guarded port refuses a call past a budget before it reaches the model", async () => {
    const model = new LoopingModel();
    const controls = new InMemoryModelControls(tokensOnly(10));
    const guarded = new GuardedModel(model, controls);
    const request: ModelRequest = {
      messages: [{ role: "user", text: "hi" }],
      metadata: { role: "refund-review", tenant_id: TENANT, run_id: "run_1" },
      runSpent: { tokens: 10, micros: 0 },
    };
    await expect(guarded.converse(request)).rejects.toBeInstanceOf(BudgetExhaustedError);
    expect(model.calls).toBe(0);
    const answered = await guarded.converse({ ...request, runSpent: { tokens: 9, micros: 0 } });
    expect([...controls.days.values()][0]).toMatchObject({ ...spendOf(answered), calls: 1 });
  });
});

describe("the operator's stop", () => {
  it("after a tenant's stop no model or tool call starts for it, its run ends CANCELLED; a resume lets new work run", async () => {
    const { desk, looping, controls, toolCalls } = loopingDesk(DEFAULT_MODEL_BUDGETS);
    await desk.ask("123", "Refund order 123 please", undefined, TENANT);
    await desk.drain(3);
    const before = { model: looping.calls, tools: toolCalls(), reads: controls.reads };
    expect(before.model).toBeGreaterThan(0);

    await controls.stop({
      scope: "tenant",
      id: TENANT,
      by: "ops_anna",
      at: "2026-01-01T00:00:00Z",
      reason: "runaway",
    });
    await desk.drain(50);
    expect(looping.calls).toBe(before.model);
    expect(toolCalls()).toBe(before.tools);
    // One read of the controls for the one step that was refused.
    expect(controls.reads).toBe(before.reads + 1);
    const journal = await desk.journal();
    expect(journal?.status).toBe("CANCELLED");
    expect(journal?.failure).toEqual({
      code: "operator.stopped",
      message:
        "tenant acme was stopped by ops_anna at 2026-01-01T00:00:00Z (runaway); nothing new starts for it until `agentbus resume --tenant acme`",
    });
    expect(desk.nextSteps()).toEqual([]);

    expect((await controls.resume("tenant", TENANT, "ops_anna", new Date()))?.by).toBe("ops_anna");
    const next = loopingDesk(tokensOnly(1_000), controls);
    await next.desk.ask("123", "Refund order 123 please", undefined, TENANT);
    await next.desk.drain(500);
    expect(next.looping.calls).toBeGreaterThan(0);
  });

  it("property: a stop at any step lets no later model or tool call start", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 12 }), fc.boolean(), async (after, byRun) => {
        const { desk, looping, controls, toolCalls } = loopingDesk(DEFAULT_MODEL_BUDGETS);
        await desk.ask("123", "Refund order 123 please", undefined, TENANT);
        await desk.drain(after);
        const counted = { model: looping.calls, tools: toolCalls() };
        const stop = byRun
          ? { scope: "run" as const, id: RUN }
          : { scope: "tenant" as const, id: TENANT };
        await controls.stop({ ...stop, by: "ops_anna", at: "2026-01-01T00:00:00Z" });
        await desk.drain(50);
        expect({ model: looping.calls, tools: toolCalls() }).toEqual(counted);
        expect((await desk.journal())?.status).toBe("CANCELLED");
      }),
      { numRuns: 30 },
    );
  });

  it("a guarded port refuses a stopped tenant's call and a stopped run's tool call", async () => {
    const model = new LoopingModel();
    const controls = new InMemoryModelControls();
    const guarded = new GuardedModel(model, controls);
    await controls.stop({ scope: "run", id: "run_1", by: "ops", at: "2026-01-01T00:00:00Z" });
    await expect(guarded.admit({ tenant: TENANT, run: "run_1" }, "tool")).rejects.toBeInstanceOf(
      OperatorStopError,
    );
    await expect(guarded.admit({ tenant: TENANT, run: "run_2" }, "tool")).resolves.toBeUndefined();
    const again = await controls.stop({
      scope: "run",
      id: "run_1",
      by: "bob",
      at: "2026-01-02T00:00:00Z",
    });
    expect(again).toMatchObject({ recorded: false, standing: { by: "ops" } });
    expect(model.calls).toBe(0);
  });
});
