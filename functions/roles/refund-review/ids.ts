/** The run of a review: one per task (`rrun_<task token>`), on `agent_run/<it>`. */
export function refundRunId(taskId: string): string {
  return `rrun_${taskId.slice(taskId.indexOf("_") + 1)}`;
}
