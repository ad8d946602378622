import { existsSync } from "node:fs";
import { isAbsolute, join } from "node:path";
import { pathToFileURL } from "node:url";
import type { AwsClient } from "../../../../functions/adapters/aws/client";
import type { ConsumeResult } from "../../../../functions/core/role";
import type { ConsumerFailure, ConsumerObserver } from "../../../../functions/handlers/consumer";
import { compiledHandler, INSTALLED } from "../../../infra/hub-handlers";
import { fromSdk } from "../../../operator/from-sdk";
import { inMeterScope } from "../../metering/metering";
import type { AwsClients, LocalFunction } from "../deploy";
import type { Invoke, Report, RuntimeEvent } from "./events";

/** The AWS clients a function's `create(options)` gets. */
export interface FunctionClients {
  readonly dynamodb: AwsClient;
  readonly sqs: AwsClient;
  readonly eventbridge: AwsClient;
  /** Where the emulator's clients have one: the functions' KMS calls (data keys). */
  readonly kms?: AwsClient;
}

/** The emulator's SDK clients as the functions' clients (their middleware applies). */
export function sdkFunctionClients(clients: AwsClients): FunctionClients {
  return {
    dynamodb: fromSdk(clients.dynamodb),
    sqs: fromSdk(clients.sqs),
    eventbridge: fromSdk(clients.eventbridge),
    ...(clients.kms ? { kms: fromSdk(clients.kms) } : {}),
  };
}

export interface HandlerOptions {
  readonly functionClients: FunctionClients;
  /** Repository root that relative `agentbus:entry` paths are relative to (absolute ones are not). */
  readonly root: string;
  readonly envOverrides?: Record<string, string>;
  readonly services?: Readonly<Record<string, unknown>>;
  readonly onEvent?: Report;
}

/**
 * Load a function's handler module and build its handler with `create(options)`: the function's
 * environment (with the local overrides), the emulator's clients, the shared services, and an
 * observer and report callback that become runtime events.
 */
export async function loadHandler(fn: LocalFunction, options: HandlerOptions): Promise<Invoke> {
  const file = handlerFile(fn.entry, options.root);
  const module = (await import(pathToFileURL(file).href)) as {
    create?: (options: Record<string, unknown>) => (...args: unknown[]) => Promise<unknown>;
  };
  if (typeof module.create !== "function")
    throw new Error(`${fn.entry} does not export create(options)`);
  const group = fn.group ?? fn.name;
  const report = options.onEvent ?? (() => {});
  const invoke = module.create({
    ...options.services,
    env: { ...fn.environment, ...options.envOverrides },
    ...options.functionClients,
    observer: {
      consumed: (result: ConsumeResult) => report({ kind: "consumed", group, result }),
      failed: (failure: ConsumerFailure) => report({ kind: "consume-failed", group, failure }),
    } satisfies ConsumerObserver,
    onReport: (r: unknown) => report(handlerReport(fn, group, r)),
  });
  // A meter on the shared clients (lib/dev/metering/metering.ts) counts each call under its group;
  // each invocation is reported with how long its handler ran, as Lambda bills its duration.
  // (A streaming function takes the response to write as a second argument.)
  const { memoryMb, architecture } = fn;
  return async (event: unknown, ...rest: unknown[]) => {
    const started = performance.now();
    try {
      return await inMeterScope(group, () => invoke(event, ...rest));
    } finally {
      const ms = performance.now() - started;
      const functionKind = fn.kind;
      report({
        kind: "invoked",
        function: fn.name,
        functionKind,
        group,
        memoryMb,
        architecture,
        ms,
        records: recordsOf(event),
      });
    }
  };
}

/** How many records an SQS or stream event carries; 0 for an event that is not a batch. */
function recordsOf(event: unknown): number {
  const records = (event as { Records?: unknown } | undefined)?.Records;
  return Array.isArray(records) ? records.length : 0;
}

/**
 * The file a function's entry runs from here. An application's own handler is recorded by its
 * absolute path (lib/infra/constructs/function.ts); the hub's, relative to the package root, run
 * from their sources in the checkout and from their compiled forms (`dist/`) where the package is
 * installed, whose users' Node.js has no TypeScript loader.
 */
export function handlerFile(entry: string, root: string, installed = INSTALLED): string {
  if (isAbsolute(entry)) return entry;
  if (!installed) return join(root, entry);
  const compiled = join(root, compiledHandler(entry));
  if (!existsSync(compiled))
    throw new Error(`${entry} has no compiled form in the package (looked at ${compiled})`);
  return compiled;
}

/** What a handler's report is, by the function's kind. */
export function handlerReport(fn: LocalFunction, group: string, report: unknown): RuntimeEvent {
  if (fn.kind === "relay") return { kind: "relayed", report };
  if (fn.kind === "sweeper") return { kind: "swept", function: fn.name, report };
  return { kind: "dispatched", group, report };
}
