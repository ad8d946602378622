/** How the id of a review's run begins. */
export const REFUND_RUN_PREFIX = "rrun_";

/** The run of a review: one per task (`rrun_<task token>`), on `agent_run/<it>`. */
export function refundRunId(taskId: string): string {
  return `${REFUND_RUN_PREFIX}${taskId.slice(taskId.indexOf("_") + 1)}`;
}
