import type { LocalFunction, LocalSchedule } from "../deploy";
import { type Activity, sleep } from "./activity";
import type { Invoke } from "./events";

/** Default local interval of scheduled functions (the deployed sweeper runs every minute). */
export const DEFAULT_SCHEDULE_INTERVAL_MS = 2000;

/** The event EventBridge hands a function its schedule rule targets. */
export function scheduledEvent(
  schedule: LocalSchedule,
  place: { readonly accountId: string; readonly region: string },
  now = new Date(),
): Record<string, unknown> {
  return {
    version: "0",
    id: `local-${now.getTime()}`,
    "detail-type": "Scheduled Event",
    source: "aws.events",
    account: place.accountId,
    time: now.toISOString(),
    region: place.region,
    resources: [schedule.logicalId],
    detail: {},
  };
}

/**
 * Invoke a scheduled function every `intervalMs` until stopped (one invocation at a time). A run
 * that published something counts as activity (`idle()` waits for what it set going).
 */
export async function runSchedule(
  activity: Activity,
  schedule: LocalSchedule,
  fn: LocalFunction,
  invoke: Invoke,
  options: { readonly intervalMs: number; readonly accountId: string; readonly region: string },
): Promise<void> {
  while (!activity.stopped) {
    await sleep(options.intervalMs);
    if (activity.stopped) return;
    try {
      const report = (await invoke(scheduledEvent(schedule, options))) as
        | { published?: number }
        | undefined;
      if (report?.published) activity.touch();
    } catch (error) {
      if (activity.stopped) return;
      activity.report({ kind: "invocation-failed", function: fn.name, error: String(error) });
    }
  }
}
