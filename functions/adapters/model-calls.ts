import { AsyncLocalStorage } from "node:async_hooks";

/**
 * Metering of language model calls: the model adapters report each call they complete (what
 * answered, how long it took, the tokens in and out); whoever runs the work that makes the calls
 * (a consumer handler, for one batch) decides where the reports go with `meterModelCalls`. The
 * sink travels with the work's async context, so consumers running side by side in one process
 * (the local runtime) each get their own calls, and the model adapters need no wiring for it.
 * Outside `meterModelCalls` a report goes nowhere.
 */
export interface ModelCall {
  readonly modelId: string;
  /** The call's latency as the service measured it (the wall time of the call when absent). */
  readonly latencyMs: number;
  readonly inputTokens: number;
  readonly outputTokens: number;
}

export type ModelCallSink = (call: ModelCall) => void;

const modelCallSinks = new AsyncLocalStorage<ModelCallSink>();

/** Runs `work` with every model call made inside it (and in what it awaits) reported to `sink`. */
export function meterModelCalls<T>(sink: ModelCallSink, work: () => T): T {
  return modelCallSinks.run(sink, work);
}

/** Reports a completed model call to the sink of the work in progress, if there is one. */
export function reportModelCall(call: ModelCall): void {
  modelCallSinks.getStore()?.(call);
}
