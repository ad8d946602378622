import { DEFAULT_TENANT } from "../../schemas/ids";
import { BUDGET_EXHAUSTED } from "./agent-run-model";
import { AgentBusError } from "./errors";
import type { ModelPort, ModelRequest, ModelResponse, ModelScope, Spend } from "./model";
import { costMicros } from "./model-prices";

export type { ModelScope, Spend } from "./model";

/**
 * What bounds a tenant's model-driven work, checked where it starts (AWS-free):
 *
 * - **Budgets.** A run (an agent run, a workflow run, a customer's turn) and a tenant (per UTC
 *   day) may spend so many tokens and so many dollars on model calls (ModelBudgets; the price of a
 *   call from ./model-prices.ts). Spent, no new model call starts: `BudgetExhaustedError`
 *   (`budget.exhausted`, naming the run or tenant, what it spent and its limit), which an agent
 *   run answers by handing itself to a person (NEEDS_HUMAN).
 * - **Stops.** An operator stops a tenant or a run (`agentbus stop`): an OperatorStop record,
 *   written once with a conditional write, until `agentbus resume` lifts it. While it stands, no
 *   model call and no tool call starts for it: `OperatorStopError` (`operator.stopped`), which an
 *   agent run answers by ending CANCELLED.
 *
 * `GuardedModel` wraps whatever model port a role is given: before each call it reads the
 * controls once (ModelControls.read: the stops on the tenant and the run, the tenant's spend
 * today), and after it adds the call's spend to the tenant's day (ModelControls.spend). A run's
 * own spend is not written again: the caller keeps it in the run's state, which it writes anyway,
 * and sends it with the request (`ModelRequest.runSpent`). Before a tool call an agent run asks
 * `admit(scope, "tool")`: the stops only.
 */

export interface Budget {
  readonly tokens: number;
  /** US$. */
  readonly usd: number;
}

export interface ModelBudgets {
  /** What one run may spend on model calls. */
  readonly run: Budget;
  /** What one tenant may spend on model calls in one UTC day. */
  readonly tenantDay: Budget;
  /**
   * Model calls a tenant may start in one minute before the front door slows its new work (429):
   * below what the model's service would throttle.
   */
  readonly tenantCallsPerMinute: number;
}

export const DEFAULT_MODEL_BUDGETS: ModelBudgets = {
  run: { tokens: 2_000_000, usd: 5 },
  tenantDay: { tokens: 100_000_000, usd: 250 },
  tenantCallsPerMinute: 600,
};

/** An operator's stop of a tenant or of a run: who, when, why. */
export interface OperatorStop {
  readonly scope: "tenant" | "run";
  readonly id: string;
  readonly by: string;
  readonly at: string;
  readonly reason?: string;
}

/** A tenant's model spend on one UTC day, and its calls in the latest minute it made one. */
export interface DaySpend extends Spend {
  /** `2026-12-05`. */
  readonly day: string;
  readonly calls: number;
  /** The minute of its latest call (`2026-12-05T10:04`) and how many calls that minute had. */
  readonly minute?: string;
  readonly minuteCalls?: number;
}

/** What one read of the controls gives. */
export interface ControlReading {
  /** The stops in force on the scope's tenant and run. */
  readonly stops: readonly OperatorStop[];
  readonly tenantDay: DaySpend;
  readonly budgets: ModelBudgets;
}

/** Where stops and spend are kept, as the work that calls models sees them. */
export interface ModelControls {
  /** The stops on the scope's tenant and run and the tenant's spend on `now`'s day: one read. */
  read(scope: ModelScope, now: Date): Promise<ControlReading>;
  /** Add one model call's spend to the tenant's day and its minute. */
  spend(scope: ModelScope, spent: Spend, now: Date): Promise<void>;
}

/** Where stops are kept, as operators change them. */
export interface StopRecords {
  /** Record `stop` unless one stands for its tenant or run: the stop that stands after. */
  stop(
    stop: OperatorStop,
  ): Promise<{ readonly standing: OperatorStop; readonly recorded: boolean }>;
  /** Lift the stop of a tenant or run (by whom, when): the stop lifted, or undefined if none stood. */
  resume(
    scope: OperatorStop["scope"],
    id: string,
    by: string,
    at: Date,
  ): Promise<OperatorStop | undefined>;
  /** The stop that stands for a tenant or run, if one does. */
  stopOf(scope: OperatorStop["scope"], id: string): Promise<OperatorStop | undefined>;
}

/** The day and the minute of `now`, as DaySpend keys them (UTC). */
export function dayOf(now: Date): { readonly day: string; readonly minute: string } {
  const iso = now.toISOString();
  return { day: iso.slice(0, 10), minute: iso.slice(0, 16) };
}

/** The spend of a day with no call yet. */
export function noSpend(now: Date): DaySpend {
  return { day: dayOf(now).day, tokens: 0, micros: 0, calls: 0 };
}

/** The model calls the tenant started in `now`'s minute, as a reading counts them. */
export function callsThisMinute(day: DaySpend, now: Date): number {
  return day.minute === dayOf(now).minute ? (day.minuteCalls ?? 0) : 0;
}

/** What a model response spent. */
export function spendOf(response: Pick<ModelResponse, "modelId" | "usage">): Spend {
  const inputTokens = Math.max(0, response.usage?.inputTokens ?? 0);
  const outputTokens = Math.max(0, response.usage?.outputTokens ?? 0);
  return {
    tokens: inputTokens + outputTokens,
    micros: costMicros(response.modelId, { inputTokens, outputTokens }),
  };
}

export function addSpend(a: Spend, b: Spend): Spend {
  return { tokens: a.tokens + b.tokens, micros: a.micros + b.micros };
}

/** How a stop is said: what stopped, by whom, when, why, and how to lift it. */
export function stopMessage(stop: OperatorStop): string {
  const why = stop.reason ? ` (${stop.reason})` : "";
  return `${stop.scope} ${stop.id} was stopped by ${stop.by} at ${stop.at}${why}; nothing new starts for it until \`agentbus resume --${stop.scope} ${stop.id}\``;
}

/** No model or tool call starts: the operator stopped the tenant or the run. */
export class OperatorStopError extends AgentBusError {
  readonly stop: OperatorStop;
  constructor(stop: OperatorStop) {
    super("business", "operator.stopped", stopMessage(stop), { details: { ...stop } });
    this.stop = stop;
  }
}

/** A budget a run or tenant has spent. */
export interface Exhausted {
  readonly scope: "run" | "tenant";
  readonly id: string;
  readonly unit: "tokens" | "usd";
  readonly spent: number;
  readonly limit: number;
}

function amount(unit: Exhausted["unit"], value: number): string {
  return unit === "usd" ? `$${value.toFixed(4)}` : `${value} tokens`;
}

/** How a spent budget is said: `budget.exhausted: run R spent $5.0012 of its $5.0000 budget`. */
export function exhaustedMessage(e: Exhausted): string {
  const per = e.scope === "tenant" ? " for the day" : "";
  return `${BUDGET_EXHAUSTED}: ${e.scope} ${e.id} spent ${amount(e.unit, e.spent)} of its ${amount(e.unit, e.limit)} budget${per}; no new model call starts`;
}

/** No new model call starts: the run's or the tenant's budget is spent. */
export class BudgetExhaustedError extends AgentBusError {
  readonly exhausted: Exhausted;
  constructor(exhausted: Exhausted) {
    super("business", BUDGET_EXHAUSTED, exhaustedMessage(exhausted), {
      details: { ...exhausted },
    });
    this.exhausted = exhausted;
  }
}

/** The stop that stands on the scope's tenant or run, the tenant's first. */
export function stopOn(reading: ControlReading, scope: ModelScope): OperatorStop | undefined {
  return (
    reading.stops.find((s) => s.scope === "tenant" && s.id === scope.tenant) ??
    reading.stops.find((s) => s.scope === "run" && s.id === scope.run)
  );
}

/** The first budget spent: the run's (given what it spent), then the tenant's day. */
export function budgetSpent(
  reading: ControlReading,
  scope: ModelScope,
  runSpent: Spend | undefined,
): Exhausted | undefined {
  const { run, tenantDay } = reading.budgets;
  const checks: [Exhausted["scope"], string, Spend, Budget][] = [];
  if (runSpent && scope.run !== undefined) checks.push(["run", scope.run, runSpent, run]);
  checks.push(["tenant", scope.tenant, reading.tenantDay, tenantDay]);
  for (const [kind, id, spent, limit] of checks) {
    if (spent.tokens >= limit.tokens)
      return { scope: kind, id, unit: "tokens", spent: spent.tokens, limit: limit.tokens };
    if (spent.micros >= limit.usd * 1e6)
      return { scope: kind, id, unit: "usd", spent: spent.micros / 1e6, limit: limit.usd };
  }
  return undefined;
}

/** The scope of a request: its tenant (the default tenant's when it names none) and run. */
export function scopeOfRequest(request: ModelRequest): ModelScope {
  const { tenant_id, run_id } = request.metadata ?? {};
  return { tenant: tenant_id ?? DEFAULT_TENANT, ...(run_id ? { run: run_id } : {}) };
}

/** A model port whose calls are bounded by the budgets and stopped by the stops (see top). */
export class GuardedModel implements ModelPort {
  readonly name: string;

  constructor(
    private readonly inner: ModelPort,
    private readonly controls: ModelControls,
    private readonly clock: () => Date = () => new Date(),
  ) {
    this.name = inner.name;
  }

  /**
   * Throws OperatorStopError when the tenant or run is stopped, and for `model` work
   * BudgetExhaustedError when the run (having spent `runSpent`) or the tenant is out of budget.
   */
  async admit(scope: ModelScope, work: "model" | "tool", runSpent?: Spend): Promise<void> {
    const reading = await this.controls.read(scope, this.clock());
    const stop = stopOn(reading, scope);
    if (stop) throw new OperatorStopError(stop);
    if (work === "tool") return;
    const spent = budgetSpent(reading, scope, runSpent);
    if (spent) throw new BudgetExhaustedError(spent);
  }

  async converse(request: ModelRequest): Promise<ModelResponse> {
    const scope = scopeOfRequest(request);
    await this.admit(scope, "model", request.runSpent);
    const response = await this.inner.converse(request);
    await this.controls.spend(scope, spendOf(response), this.clock());
    return response;
  }
}

/** The stops and spend in memory: the role kit's, tests', and the simulation's. */
export class InMemoryModelControls implements ModelControls, StopRecords {
  readonly stops = new Map<string, OperatorStop>();
  readonly days = new Map<string, DaySpend>();
  /** Reads made, for tests that count them. */
  reads = 0;

  constructor(public budgets: ModelBudgets = DEFAULT_MODEL_BUDGETS) {}

  async read(scope: ModelScope, now: Date): Promise<ControlReading> {
    this.reads += 1;
    const keys = [`tenant#${scope.tenant}`, ...(scope.run ? [`run#${scope.run}`] : [])];
    const stops = keys.flatMap((k) => this.stops.get(k) ?? []);
    const day = this.days.get(`${scope.tenant}#${dayOf(now).day}`) ?? noSpend(now);
    return { stops, tenantDay: day, budgets: this.budgets };
  }

  async spend(scope: ModelScope, spent: Spend, now: Date): Promise<void> {
    const { day, minute } = dayOf(now);
    const key = `${scope.tenant}#${day}`;
    const was = this.days.get(key) ?? noSpend(now);
    this.days.set(key, {
      ...was,
      ...addSpend(was, spent),
      calls: was.calls + 1,
      minute,
      minuteCalls: callsThisMinute(was, now) + 1,
    });
  }

  async stop(stop: OperatorStop) {
    const standing = this.stops.get(`${stop.scope}#${stop.id}`);
    if (standing) return { standing, recorded: false };
    this.stops.set(`${stop.scope}#${stop.id}`, stop);
    return { standing: stop, recorded: true };
  }

  async resume(scope: OperatorStop["scope"], id: string, _by: string, _at: Date) {
    const standing = this.stops.get(`${scope}#${id}`);
    this.stops.delete(`${scope}#${id}`);
    return standing;
  }

  async stopOf(scope: OperatorStop["scope"], id: string) {
    return this.stops.get(`${scope}#${id}`);
  }
}
