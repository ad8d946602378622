import { type AttentionSignal, sameSignal } from "../../../functions/core/attention";
import { integerProblem, kebabCaseProblem } from "./consumer-group-rules";

/**
 * What makes the attention signals of a deployment usable (functions/core/attention.ts): each is
 * declared by the role that raises it, so the stack checks them before any alarm exists. A name
 * stands for one signal, a metric and an alarm id for one name; the same signal named by two
 * rules or two groups is one signal (one alarm per group).
 */

/** Longest signal name (a dashboard label and the key of a group's `attentionAlarms`). */
export const SIGNAL_NAME_MAX_LENGTH = 64;
/** Metric names and alarm ids: letters and digits, starting with a letter. */
const IDENTIFIER = /^[A-Za-z][A-Za-z0-9]{0,254}$/;
/** Largest count an alarm may tolerate within its window. */
const MAX_TOLERATED = 1_000_000;
/** Longest alarm window, in minutes (a day). */
const MAX_WINDOW_MINUTES = 1440;

/**
 * Everything wrong with `signals` (every one a deployment or a group declares, repeats included),
 * each problem naming the signal and the bad value: a name that is not kebab-case, a metric or
 * alarm id that is not letters and digits, empty words, a tolerance or window out of range, two
 * different signals under one name, one metric or alarm id under two names. Empty when sound.
 */
export function signalProblems(signals: readonly AttentionSignal[]): string[] {
  const problems: string[] = [];
  const byName = new Map<string, AttentionSignal>();
  const nameOf = { metric: new Map<string, string>(), "alarm id": new Map<string, string>() };
  for (const signal of signals) {
    const known = byName.get(signal.name);
    if (known) {
      if (!sameSignal(known, signal))
        problems.push(
          `two different attention signals are named ${JSON.stringify(signal.name)} (they differ in ${differences(known, signal).join(", ")}): one name, one signal`,
        );
      continue;
    }
    byName.set(signal.name, signal);
    problems.push(...oneSignalProblems(signal));
    for (const [what, value] of [
      ["metric", signal.metric],
      ["alarm id", signal.alarm?.id],
    ] as const) {
      const other = nameOf[what].get(value);
      if (other !== undefined)
        problems.push(
          `attention signals ${JSON.stringify(other)} and ${JSON.stringify(signal.name)} share the ${what} ${JSON.stringify(value)}: each signal needs its own`,
        );
      else nameOf[what].set(value, signal.name);
    }
  }
  return problems;
}

/** What is wrong with one signal on its own. */
function oneSignalProblems(signal: AttentionSignal): string[] {
  const named = `attention signal ${JSON.stringify(signal.name)}`;
  const alarm = signal.alarm ?? ({} as Partial<AttentionSignal["alarm"]>);
  const problems = [
    kebabCaseProblem("attention signal name", signal.name, SIGNAL_NAME_MAX_LENGTH),
    identifierProblem(`${named}: metric`, signal.metric),
    identifierProblem(`${named}: alarm id`, alarm.id),
    ...(["what", "why", "act"] as const).map((field) =>
      typeof alarm[field] === "string" && alarm[field].trim() !== ""
        ? undefined
        : `${named}: alarm.${field} must be words (it is part of the alarm's description)`,
    ),
    integerProblem(`${named}: alarm.tolerated`, alarm.tolerated ?? 0, 0, MAX_TOLERATED),
    integerProblem(
      `${named}: alarm.windowMinutes`,
      alarm.windowMinutes ?? 5,
      1,
      MAX_WINDOW_MINUTES,
    ),
  ];
  return problems.filter((p): p is string => p !== undefined);
}

function identifierProblem(what: string, value: unknown): string | undefined {
  if (typeof value === "string" && IDENTIFIER.test(value)) return undefined;
  return `${what} ${JSON.stringify(value)} must be letters and digits, starting with a letter, at most 255 characters`;
}

/** The fields in which two signals of one name differ. */
function differences(a: AttentionSignal, b: AttentionSignal): string[] {
  const alarmFields = ["id", "what", "why", "act", "tolerated", "windowMinutes"] as const;
  return [
    ...(a.metric === b.metric ? [] : ["metric"]),
    ...alarmFields.filter((f) => a.alarm?.[f] !== b.alarm?.[f]).map((f) => `alarm.${f}`),
  ];
}
