import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { renderTraceText } from "../../operator/render-text";
import { traceOf } from "../../operator/source";
import type { LocalEnvironment } from "../local/environment";
import { withObservedDuplicates } from "../local/trace";
import type { StackScheduleResult } from "./schedule";

/** Where the account of a failing schedule is written (ignored by git). */
export const DIAGNOSIS_DIR = ".agentbus/chaos";

/**
 * Writes what is needed to understand a failing schedule: its plan and violations, every fault
 * injected in order (when, where, which invocation), and the operator's trace of each of its
 * correlations with the duplicates the runtime saw. Returns the file's path.
 */
export async function writeDiagnosis(
  env: LocalEnvironment,
  result: StackScheduleResult,
): Promise<string> {
  const { workload } = result;
  const lines = [
    `seed ${result.seed}, ${JSON.stringify(result.plan.rates)}`,
    "",
    "violations:",
    ...result.violations.map((v) => `  ${v.invariant}: ${v.detail}`),
    "",
    "faults injected:",
    ...result.injections.map((f) => `  ${f}`),
    "",
    "batches failed as a whole:",
    ...result.failedInvocations.map((f) => `  ${f}`),
  ];
  const correlations = [
    ["task", workload.task.correlationId],
    ["run", workload.run.correlationId],
    ...workload.conversation.messages.map((m) => [`message ${m.task_id}`, m.correlation_id]),
  ];
  for (const [label, id = ""] of correlations) {
    const view = await traceOf(env.ops, id);
    lines.push("", `trace of the ${label} (${id}):`);
    lines.push(view ? renderTraceText(withObservedDuplicates(view, env.observations)) : "  none");
  }
  await mkdir(DIAGNOSIS_DIR, { recursive: true });
  const path = join(DIAGNOSIS_DIR, `seed-${result.seed}.txt`);
  await writeFile(path, `${lines.join("\n")}\n`);
  return path;
}
