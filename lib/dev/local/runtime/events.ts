import type { ConsumeResult } from "../../../../functions/core/role";
import type { ConsumerFailure } from "../../../../functions/handlers/consumer";

/** What the runtime reports while it runs (the local trace is built from these). */
export type RuntimeEvent =
  | { readonly kind: "consumed"; readonly group: string; readonly result: ConsumeResult }
  | { readonly kind: "consume-failed"; readonly group: string; readonly failure: ConsumerFailure }
  | { readonly kind: "dispatched"; readonly group: string; readonly report: unknown }
  | { readonly kind: "relayed"; readonly report: unknown }
  | { readonly kind: "swept"; readonly function: string; readonly report: unknown }
  | { readonly kind: "invocation-failed"; readonly function: string; readonly error: string }
  | { readonly kind: "stream-batch-dropped"; readonly function: string; readonly records: number }
  | { readonly kind: "piped"; readonly pipe: string; readonly messages: number }
  | { readonly kind: "fault"; readonly description: string };

export type Report = (event: RuntimeEvent) => void;

/** A loaded handler, as Lambda would call it. */
export type Invoke = (event: unknown, ...rest: unknown[]) => Promise<unknown>;
