import { DynamoDBStreamsClient } from "@aws-sdk/client-dynamodb-streams";
import { inMeterScope, SERVICE_SCOPES } from "../metering/metering";
import type {
  AwsClients,
  LocalDeployment,
  LocalFunction,
  LocalMapping,
  LocalSchedule,
} from "./deploy";
import { Activity, sleep } from "./runtime/activity";
import type { Invoke, RuntimeEvent } from "./runtime/events";
import { type FaultInjection, Faults } from "./runtime/faults";
import { type FunctionClients, loadHandler } from "./runtime/handlers";
import { runPipe } from "./runtime/pipes";
import { mappedQueueUrls, queuesEmpty, queueUrlOf } from "./runtime/queues";
import { DEFAULT_SCHEDULE_INTERVAL_MS, runSchedule } from "./runtime/schedules";
import { runSqsMapping } from "./runtime/sqs-mapping";
import { StreamMapping } from "./runtime/stream-mapping";
import { LocalSubscriberBuses, runBridge } from "./runtime/subscriber-buses";

export type { RuntimeEvent } from "./runtime/events";
export { DEFAULT_SCHEDULE_INTERVAL_MS } from "./runtime/schedules";

export interface RuntimeOptions {
  readonly deployment: LocalDeployment;
  readonly clients: AwsClients;
  /** The clients the functions get (`clients` are the runtime's own, for its pollers). */
  readonly functionClients: FunctionClients;
  readonly endpoint: string;
  /** Repository root that relative `agentbus:entry` paths are relative to. */
  readonly root: string;
  /** Environment values that differ locally (e.g. a shorter retry backoff). */
  readonly envOverrides?: Record<string, string>;
  readonly onEvent?: (event: RuntimeEvent) => void;
  /**
   * How often scheduled functions (EventBridge schedule rules) run locally, in milliseconds,
   * whatever their rate in the template. @default 2000
   */
  readonly scheduleIntervalMs?: number;
  /**
   * Stand-ins handed to every handler's `create(options)` (e.g. `model`, `channel`): what the
   * deployed functions build from their environment, the local runtime shares across handlers so
   * it can observe them.
   */
  readonly services?: Readonly<Record<string, unknown>>;
  /** Faults injected from outside (lib/dev/chaos): lost acknowledgements, crashed invocations. */
  readonly faultInjection?: FaultInjection;
}

/** SQS pollers per mapping: its MaximumConcurrency (2 if unset), at most 4. */
const MAX_POLLERS = 4;
const DEFAULT_POLLERS = 2;
/** How often `idle()` looks whether the runtime has settled. */
const IDLE_POLL_MS = 100;
/** How long the runtime must have been quiet to count as idle. */
const DEFAULT_QUIET_MS = 300;

/**
 * Runs the stack's Lambda handlers in-process and emulates what invokes them, each in its module
 * under `runtime/`:
 * - SQS event source mappings (`sqs-mapping.ts`): MaximumConcurrency pollers per queue, batch
 *   invoke, partial batch response;
 * - DynamoDB stream mappings (`stream-mapping.ts`): shards in order, filters, retries, bisection,
 *   on-failure destination;
 * - EventBridge Pipes from SQS to SQS (`pipes.ts`);
 * - EventBridge's new buses and their subscribers to SQS (`subscriber-buses.ts`), handed to the
 *   functions as the `subscriberBus` service (the relay publishes to them);
 * - EventBridge schedule rules (`schedules.ts`): each target function every `scheduleIntervalMs`;
 * - fault injection (`faults.ts`): a held-back stream, paused consumer groups, lost acks, and
 *   every invocation run in a scope that injected faults can crash.
 * Every loop reports a failed call as `invocation-failed` and carries on.
 */
export class LocalRuntime {
  private readonly activity: Activity;
  private readonly faults: Faults;
  private readonly loops: Promise<void>[] = [];
  private readonly invokers = new Map<string, Invoke>();
  private readonly streams: DynamoDBStreamsClient;
  /** The new buses of the template and their subscribers, if it has any. */
  readonly subscriberBuses?: LocalSubscriberBuses;

  constructor(private readonly options: RuntimeOptions) {
    const report = (event: RuntimeEvent) => options.onEvent?.(event);
    this.activity = new Activity(report);
    this.faults = new Faults(report, options.faultInjection);
    this.streams = new DynamoDBStreamsClient({
      endpoint: options.endpoint,
      region: options.deployment.region,
      credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
    });
    const { deployment } = options;
    if ((deployment.subscriberBuses ?? []).length > 0)
      this.subscriberBuses = new LocalSubscriberBuses({
        buses: deployment.subscriberBuses,
        subscribers: deployment.subscribers,
        sqs: options.clients.sqs,
        queueUrl: (arn) => queueUrlOf(deployment, arn),
        region: deployment.region,
        accountId: deployment.accountId,
        report,
      });
  }

  async start(): Promise<void> {
    const { deployment } = this.options;
    const services = this.subscriberBuses
      ? { ...this.options.services, subscriberBus: this.subscriberBuses }
      : this.options.services;
    for (const fn of deployment.functions)
      this.invokers.set(fn.logicalId, await loadHandler(fn, { ...this.options, services }));
    for (const mapping of deployment.mappings) this.startMapping(mapping);
    for (const pipe of deployment.pipes) {
      const urls = {
        source: queueUrlOf(deployment, pipe.sourceArn),
        target: queueUrlOf(deployment, pipe.targetArn),
      };
      const loop = inMeterScope(SERVICE_SCOPES.pipe, () =>
        runPipe(this.activity, this.options.clients.sqs, pipe, urls),
      );
      this.loops.push(this.activity.reportEnd(pipe.logicalId, loop));
    }
    for (const bridge of deployment.bridges ?? []) {
      const buses = this.subscriberBuses;
      if (!buses) throw new Error(`bridge ${bridge.logicalId} forwards to a bus the stack lacks`);
      const loop = inMeterScope(SERVICE_SCOPES.subscriber, () =>
        runBridge(this.activity, this.options.clients.sqs, bridge, buses),
      );
      this.loops.push(this.activity.reportEnd(bridge.logicalId, loop));
    }
    for (const schedule of deployment.schedules ?? [])
      for (const logicalId of schedule.functionLogicalIds)
        this.loops.push(
          this.activity.reportEnd(logicalId, this.runScheduleTarget(schedule, logicalId)),
        );
  }

  private async runScheduleTarget(schedule: LocalSchedule, logicalId: string): Promise<void> {
    const { fn, invoke } = this.handler(logicalId, `schedule ${schedule.logicalId} targets`);
    const { deployment } = this.options;
    const invocation = {
      function: fn.name,
      kind: fn.kind,
      group: fn.name,
      attempt: 1,
      messageIds: [],
    };
    const scoped = (event: unknown) => this.faults.invoke(invocation, () => invoke(event));
    await runSchedule(this.activity, schedule, fn, scoped, {
      intervalMs: this.options.scheduleIntervalMs ?? DEFAULT_SCHEDULE_INTERVAL_MS,
      accountId: deployment.accountId,
      region: deployment.region,
    });
  }

  private startMapping(mapping: LocalMapping): void {
    const { fn, invoke } = this.handler(
      mapping.functionLogicalId,
      `mapping ${mapping.logicalId} points at`,
    );
    const { deployment, clients } = this.options;
    const ctx = {
      activity: this.activity,
      faults: this.faults,
      sqs: clients.sqs,
      region: deployment.region,
    };
    if (mapping.source === "sqs") {
      const url = queueUrlOf(deployment, mapping.eventSourceArn);
      const pollers = Math.max(
        1,
        Math.min(mapping.maximumConcurrency ?? DEFAULT_POLLERS, MAX_POLLERS),
      );
      for (let i = 0; i < pollers; i++)
        this.loops.push(
          this.activity.reportEnd(
            fn.name,
            // Counted as the Lambda service's calls (lib/dev/metering), not the function's.
            inMeterScope(SERVICE_SCOPES.sqsPoller, () =>
              runSqsMapping(ctx, mapping, fn, invoke, url),
            ),
          ),
        );
      return;
    }
    const queueUrl = (arn: string) => queueUrlOf(deployment, arn);
    const stream = new StreamMapping(
      { ...ctx, streams: this.streams, queueUrl },
      mapping,
      fn,
      invoke,
    );
    this.loops.push(this.activity.reportEnd(fn.name, stream.run()));
  }

  /** The loaded function of a kind (the front door), if the deployment has one. */
  invokerOfKind(kind: string): Invoke | undefined {
    const fn = this.options.deployment.functions.find((f) => f.kind === kind);
    return fn && this.invokers.get(fn.logicalId);
  }

  /** A loaded function of the deployment, by logical id. */
  private handler(logicalId: string, what: string): { fn: LocalFunction; invoke: Invoke } {
    const invoke = this.invokers.get(logicalId);
    const fn = this.options.deployment.functions.find((f) => f.logicalId === logicalId);
    if (!invoke || !fn) throw new Error(`${what} an unknown function ${logicalId}`);
    return { fn, invoke };
  }

  async stop(): Promise<void> {
    this.activity.stop();
    await Promise.allSettled(this.loops);
    this.streams.destroy();
  }

  /** Hold the relay (stream reading) back, e.g. to deliver an event ahead of its predecessors. */
  pauseStream(): void {
    this.faults.pauseStream();
  }

  /** Let the relay read on; idle() then waits for a read of every shard begun after this. */
  resumeStream(): void {
    this.faults.resumeStream();
    this.activity.touch();
  }

  /**
   * Fault injection: the next time this consumer group's function handles the event successfully,
   * its acknowledgement is lost (the message becomes visible again at once, as after a crash).
   */
  loseAckOnce(eventId: string, group: string): void {
    this.faults.loseAckOnce(eventId, group);
  }

  /**
   * Fault injection: this consumer group's function stops receiving (as if its workers were
   * gone) from its next receive on; its messages wait in the queue until `resumeGroup`.
   */
  pauseGroup(group: string): void {
    this.faults.pauseGroup(group);
  }

  resumeGroup(group: string): void {
    this.faults.resumeGroup(group);
  }

  /**
   * Wait until nothing is in flight, every mapped queue is empty and the stream is read up, with
   * no activity for `quietMs` (longer than the stream poller's idle pause, so a commit the relay
   * has not read yet is not missed).
   */
  async idle(options: { quietMs?: number; timeoutMs?: number } = {}): Promise<void> {
    const quietMs = options.quietMs ?? DEFAULT_QUIET_MS;
    const deadline = Date.now() + (options.timeoutMs ?? 120_000);
    const queues = mappedQueueUrls(this.options.deployment);
    for (;;) {
      if (Date.now() > deadline) throw new Error("the local runtime did not settle in time");
      // Quiet before and after the queues were looked at, with nothing in between.
      const since = this.activity.lastActive;
      if (
        this.activity.quiet(quietMs) &&
        (await queuesEmpty(this.options.clients.sqs, queues)) &&
        this.activity.lastActive === since &&
        this.activity.quiet(quietMs)
      )
        return;
      await sleep(IDLE_POLL_MS);
    }
  }
}
