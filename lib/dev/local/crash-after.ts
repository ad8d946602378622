import type { FaultableClient } from "../chaos/middleware";
import type { AwsClients } from "./deploy";
import { crash, currentInvocation, type FaultInjection } from "./runtime/faults";

type Next = (args: { input: unknown }) => Promise<{ output: unknown }>;

/** A call the functions make to a service of the emulator, as `crashAfter` matches it. */
export interface CallMatch {
  /** The client it goes through. */
  readonly service: keyof Pick<AwsClients, "dynamodb" | "sqs" | "eventbridge">;
  /** The operation (`PutItem`), its command's name without `Command`. */
  readonly operation: string;
  /** Which calls of it, by their input. @default every call */
  readonly when?: (input: Record<string, unknown>) => boolean;
}

/**
 * Fault injection for `startLocal({ faultInjection })`: the process of the function invocation that
 * makes the matching call dies just after the call succeeds, `times` times (default once): the
 * call is applied, the invocation's response is lost, and its messages come back at once, as after
 * a Lambda crash the queue redelivers them. What a test of exactly-once runs against: the write
 * happened, nothing of the step was committed, and the redelivery must not write again.
 */
export function crashAfter(
  match: CallMatch,
  times = 1,
): FaultInjection & { readonly crashes: number } {
  let crashes = 0;
  return {
    get crashes() {
      return crashes;
    },
    attach(clients) {
      const client: FaultableClient = clients[match.service];
      client.middlewareStack.add(
        (next: Next, context: { commandName?: string }) => async (args: { input: unknown }) => {
          const result = await next(args);
          const invocation = currentInvocation();
          const operation = (context.commandName ?? "").replace(/Command$/, "");
          const input = args.input as Record<string, unknown>;
          if (
            invocation &&
            !invocation.crashed &&
            crashes < times &&
            operation === match.operation &&
            (match.when?.(input) ?? true)
          ) {
            crashes += 1;
            throw crash(invocation, operation);
          }
          return result;
        },
        { step: "initialize", name: "agentbusCrashAfter", priority: "high", override: true },
      );
    },
  };
}
