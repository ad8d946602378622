import type { FaultKind } from "./kinds";
import type { Random } from "./random";

/**
 * A schedule is a seed. The seed draws the schedule's fault plan (here) and its workload, and in
 * the simulation every choice of the scheduler as well; playing the seed again plays the schedule
 * again (on the stack: its plan and workload, not the interleaving of its calls). Both kinds of
 * `npm run chaos` print a plan and replay a seed the same way.
 */

/**
 * A fault a run can turn on, named by the kinds it injects (./kinds) and, where the run tells
 * them apart, the place it strikes (`throttle load`); its rates are off, light and heavy.
 */
export interface FaultSwitch {
  readonly kinds: readonly FaultKind[];
  readonly levels: readonly number[];
}

export type FaultSwitches<Name extends string> = Readonly<Record<Name, FaultSwitch>>;

/** A schedule's fault plan: its seed, and per switch the chance it strikes each time it may. */
export interface FaultPlan<Name extends string = string> {
  readonly seed: number;
  readonly rates: Readonly<Record<Name, number>>;
}

/** The plan `random` draws: each switch's level, in the switches' order. */
export function drawPlan<Name extends string>(
  seed: number,
  switches: FaultSwitches<Name>,
  random: Random,
): FaultPlan<Name> {
  const levels: [string, FaultSwitch][] = Object.entries(switches);
  const rates = Object.fromEntries(levels.map(([name, s]) => [name, random.pick(s.levels)]));
  return { seed, rates: rates as Record<Name, number> };
}

/** A plan with every switch off (the baseline). */
export function quietPlan<Name extends string>(
  seed: number,
  switches: FaultSwitches<Name>,
): FaultPlan<Name> {
  const rates = Object.fromEntries(Object.keys(switches).map((name) => [name, 0]));
  return { seed, rates: rates as Record<Name, number> };
}

/** One line: the seed, and each switch that is on with its rate. */
export function describePlan(plan: FaultPlan): string {
  const on = Object.entries<number>(plan.rates)
    .filter(([, rate]) => rate > 0)
    .map(([name, rate]) => `${name} ${rate}`);
  return `seed ${plan.seed}: ${on.join(", ") || "no faults"}`;
}

/** The command that plays one schedule again, alone. */
export function replayCommand(seed: number, where: "memory" | "stack"): string {
  return `npm run chaos --${where === "stack" ? " --stack" : ""} --seed ${seed} --schedules 1`;
}
