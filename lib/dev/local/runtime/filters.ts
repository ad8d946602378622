import { matches } from "../../../../functions/core/event-pattern";

/** Lambda event filtering's and EventBridge's matching: one home, in the core. */
export { matches };

/** The records a mapping hands over: all without filters, else those some filter matches. */
export function selected<T>(records: readonly T[], filters: readonly unknown[]): T[] {
  return records.filter((r) => filters.length === 0 || filters.some((p) => matches(r, p)));
}
