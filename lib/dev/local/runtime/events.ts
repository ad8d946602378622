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
  | { readonly kind: "subscribed"; readonly subscriber: string; readonly messages: number }
  | { readonly kind: "fault"; readonly description: string }
  | {
      /** One invocation of a function: how long its handler ran, at the memory it is billed at. */
      readonly kind: "invoked";
      readonly function: string;
      /** The function's kind (`consumer`, `relay`, `dispatch`, `sweeper`, ...). */
      readonly functionKind: string;
      readonly group: string;
      readonly memoryMb: number;
      readonly architecture: "arm64" | "x86_64";
      readonly ms: number;
      /** The records its event carried (an SQS or stream batch's size); 0 for any other event. */
      readonly records: number;
    };

export type Report = (event: RuntimeEvent) => void;

/** A loaded handler, as Lambda would call it. */
export type Invoke = (event: unknown, ...rest: unknown[]) => Promise<unknown>;
