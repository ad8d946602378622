import { DynamoEventStore } from "../../../functions/adapters/dynamodb/event-store";
import { localModelOf } from "../../../functions/integrations/model";
import type { Topology } from "../../infra/topology";
import { fromSdk } from "../../operator/from-sdk";
import { type StackNames, stackNames } from "../../operator/names";
import {
  connect,
  LOCAL_EVENTBRIDGEV2_ENDPOINT,
  type OpsStack,
  publishOutputs,
  stackVault,
} from "../../operator/stack";
import {
  type AwsClients,
  deployTemplate,
  emulatorClients,
  emulatorConfig,
  type LocalDeployment,
} from "./deploy";
import {
  type FrontDoorFunctions,
  type LocalFrontDoor,
  type LocalIssuer,
  localIssuer,
  serveFrontDoor,
} from "./front-door";
import { functionClientsOf } from "./function-clients";
import { RecordingModel } from "./model";
import { type MotoServer, resetMoto, startMoto } from "./moto";
import { LocalRuntime, type RuntimeEvent } from "./runtime";
import type { FaultInjection, StandIns } from "./runtime/faults";
import type { FunctionClients } from "./runtime/handlers";
import { refuseIfPresent } from "./stack-present";
import { type SubscriberBusEndpoint, serveSubscriberBuses } from "./subscriber-bus-endpoint";
import { type LocalStack, ROOT, synthesize } from "./synth";
import { Observations } from "./trace";

export interface LocalEnvironment {
  readonly endpoint: string;
  /** The emulator this process started, if it started one. */
  readonly moto?: MotoServer;
  readonly region: string;
  readonly clients: AwsClients;
  readonly deployment: LocalDeployment;
  readonly runtime: LocalRuntime;
  readonly observations: Observations;
  readonly store: DynamoEventStore;
  /** The stack as the operator tools see it (trace, status, dead letters, the console). */
  readonly ops: OpsStack;
  /** The stack's tables, buses, queue URLs and topics, read from its outputs. */
  readonly names: StackNames;
  /** Bus name of each topic in the stack (`names.buses`). */
  readonly buses: Record<string, string>;
  /** Consumer groups in the stack. */
  readonly groups: string[];
  /**
   * The model every agent calls (unless `standIns` give another): the DeterministicLocalModel
   * with the scripts each group's use of the model gives (`localScripts`), every call recorded.
   */
  readonly model: RecordingModel;
  /**
   * The front door (the HTTP API) on 127.0.0.1, as API Gateway serves it, with a local issuer of
   * development tokens (./front-door.ts).
   */
  readonly frontDoor?: LocalFrontDoor;
  /**
   * The `eventbridgev2` API on 127.0.0.1 over the emulated new buses, when the stack has any
   * (./subscriber-bus-endpoint.ts): what `agentbus replay` creates a point-in-time subscriber
   * through. Published in the outputs as `LocalEventBridgeV2Endpoint`. The relay publishes to the
   * emulation in-process.
   */
  readonly subscriberBusEndpoint?: SubscriberBusEndpoint;
  /** How long each start-up step took, in milliseconds. */
  readonly timings: { emulator: number; synth: number; deploy: number };
  stop(): Promise<void>;
}

export interface LocalOptions {
  /**
   * The stack to deploy: the application's roles and the infrastructure of its integrations
   * (`{ roles, integrations }`, what `new AgentBus(app, id, ...)` is given), or a topology written
   * out with its integrations.
   */
  readonly stack: LocalStack;
  /**
   * Stand-ins the handlers get instead of an integration's AWS adapter, by the integration's name
   * (`{ payments: new LocalPayments() }`): for an outside system the emulator does not have. The
   * model's is the DeterministicLocalModel unless given here.
   * @default - the model's only: every other integration runs its AWS adapter on the emulator
   */
  readonly standIns?: Readonly<Record<string, unknown>>;
  /** Use a running emulator instead of starting moto_server. */
  readonly endpoint?: string;
  /** Port for the moto_server this starts (default: a free one). */
  readonly port?: number;
  readonly stage?: string;
  readonly region?: string;
  /** Forward handler logs and metrics (Powertools) to stdout. */
  readonly verbose?: boolean;
  readonly onEvent?: (event: RuntimeEvent) => void;
  /**
   * With `endpoint`: wipe the emulator (moto's reset) before deploying. Without it, an emulator
   * that already has this stage's stack is left as it is and the start is refused
   * (StackPresentError); other stages and anything else there are never touched.
   */
  readonly reset?: boolean;
  /**
   * More environment values for every handler, over the local defaults (e.g. a short
   * `ORCHESTRATOR_LEASE_SECONDS` so the sweeper finds hung nodes within seconds).
   */
  readonly envOverrides?: Record<string, string>;
  /** Port of the front door on 127.0.0.1. @default 0, any free port */
  readonly frontDoorPort?: number;
  /** How often scheduled functions (the lease sweeper) run, in milliseconds. @default 2000 */
  readonly scheduleIntervalMs?: number;
  /**
   * Faults to inject (lib/dev/chaos): SDK middleware on the clients the functions get, wrapped
   * stand-ins, lost acknowledgements and crashed invocations in the runtime.
   */
  readonly faultInjection?: FaultInjection;
  /** More CDK context for the synth, as `-c key=value` gives it. */
  readonly context?: Readonly<Record<string, unknown>>;
}

/**
 * Bring up an application's AgentBus stack locally: an emulator (moto_server on 127.0.0.1 unless
 * an endpoint is given), the synthesized stack deployed to it, and the stack's handlers running
 * in-process (an application's `.ts` handlers need a TypeScript loader in the process, as tsx or
 * vitest give). Names (tables, buses, queues) come from the stack's outputs, as for a deployed
 * stack.
 */
export async function startLocal(options: LocalOptions): Promise<LocalEnvironment> {
  const region = options.region ?? "us-east-1";
  process.env.POWERTOOLS_LOG_LEVEL ??= options.verbose ? "INFO" : "SILENT";
  process.env.POWERTOOLS_METRICS_DISABLED ??= options.verbose ? "false" : "true";
  const lap = lapTimer();
  const moto = options.endpoint ? undefined : await startMoto({ port: options.port });
  const emulatorMs = lap();
  const endpoint = options.endpoint ?? moto?.endpoint ?? "";
  try {
    const clients = emulatorClients(endpoint, region);
    options.faultInjection?.attach?.(clients);
    const { stackName, template, topology } = synthesizeFor(options);
    if (options.endpoint) await makeRoom(options.endpoint, region, stackName, options.reset);
    const synthMs = lap();
    const deployment = await deployTemplate(template, clients, { stackName, region });
    const deployMs = lap();
    const names = stackNames(deployment.outputs, topology);
    const config = emulatorConfig(endpoint, region);
    const functions = functionClientsOf(clients, options.faultInjection, config);
    const { issuer, ...running } = await startRuntime(
      topology,
      deployment,
      clients,
      functions.functionClients,
      endpoint,
      options,
    );
    const ops = connect(emulatorConfig(endpoint, region), stackName, deployment.outputs, topology);
    const frontDoor = await serveFrontDoorOf(running.runtime, issuer, options.frontDoorPort);
    const subscriberBusEndpoint = await publish(running.runtime, config, stackName, deployment);
    return {
      ...running,
      endpoint,
      moto,
      region,
      clients,
      deployment,
      names,
      ops,
      store: eventStoreOf(clients, names),
      buses: { ...names.buses },
      groups: consumerGroupsOf(deployment),
      ...(frontDoor ? { frontDoor } : {}),
      ...(subscriberBusEndpoint ? { subscriberBusEndpoint } : {}),
      timings: { emulator: emulatorMs, synth: synthMs, deploy: deployMs },
      stop: async () => {
        ops.close();
        await Promise.all([frontDoor?.stop(), subscriberBusEndpoint?.stop()]);
        await stopLocal(running.runtime, clients, moto);
        functions.destroy();
      },
    };
  } catch (error) {
    await moto?.stop();
    throw error;
  }
}

/** The stack as the options have it synthesized (and as the fault injection changes it). */
function synthesizeFor(options: LocalOptions): ReturnType<typeof synthesize> {
  const synthesized = synthesize(options.stage ?? "local", options.stack, options.context);
  const template = options.faultInjection?.template?.(synthesized.template);
  return { ...synthesized, template: template ?? synthesized.template };
}

/** The consumer groups the stack runs, by name. */
function consumerGroupsOf(deployment: LocalDeployment): string[] {
  return deployment.functions.filter((f) => f.kind === "consumer").map((f) => f.group ?? f.name);
}

/** The stack's event store, read through the emulator's SDK client. */
function eventStoreOf(clients: AwsClients, names: StackNames): DynamoEventStore {
  const { state, events, inbox } = names.tables;
  const vault = clients.kms && stackVault(names, clients.dynamodb, clients.kms);
  return new DynamoEventStore({
    client: fromSdk(clients.dynamodb),
    tables: { state, events, inbox },
    ...(vault ? { vault } : {}),
  });
}

/** The stack's front-door function served over HTTP on 127.0.0.1, if the stack has one. */
async function serveFrontDoorOf(
  runtime: LocalRuntime,
  issuer: LocalIssuer,
  port: number | undefined,
): Promise<LocalFrontDoor | undefined> {
  const invoke = runtime.invokerOfKind("front-door");
  const stream = runtime.invokerOfKind("front-door-stream");
  if (!invoke) return undefined;
  return serveFrontDoor({
    invoke: invoke as FrontDoorFunctions["invoke"],
    ...(stream ? { stream: stream as unknown as FrontDoorFunctions["stream"] } : {}),
    issuer,
    port,
  });
}

/**
 * Publish the stack's outputs in the emulator, where operator tools pointed at it (agentbus trace
 * --endpoint ...) find its names; with the eventbridgev2 endpoint over the runtime's new buses,
 * when it has any, which this serves.
 */
async function publish(
  runtime: LocalRuntime,
  config: ReturnType<typeof emulatorConfig>,
  stackName: string,
  deployment: LocalDeployment,
): Promise<SubscriberBusEndpoint | undefined> {
  const buses = runtime.subscriberBuses;
  const endpoint = buses ? await serveSubscriberBuses({ buses, region: config.region }) : undefined;
  await publishOutputs(config, stackName, {
    ...deployment.outputs,
    ...(endpoint ? { [LOCAL_EVENTBRIDGEV2_ENDPOINT]: endpoint.url } : {}),
  });
  return endpoint;
}

/**
 * Before deploying to an emulator this process did not start: wipe it when asked to (`reset`),
 * else refuse if the stack is there already (StackPresentError), touching nothing.
 */
async function makeRoom(
  endpoint: string,
  region: string,
  stackName: string,
  reset: boolean | undefined,
): Promise<void> {
  if (reset) await resetMoto(endpoint);
  else await refuseIfPresent(endpoint, region, stackName);
}

/** Milliseconds since the previous call (or since the timer was made). */
function lapTimer(): () => number {
  let mark = Date.now();
  return () => {
    const ms = Date.now() - mark;
    mark = Date.now();
    return ms;
  };
}

/**
 * Environment values that differ locally: a failed message comes back after 1 s, 2 s, 4 s...
 * instead of the deployed backoff, the agents answer with the DeterministicLocalModel (a scripted
 * stand-in, not a model: no Bedrock, no credentials) and the reference application's sender
 * delivers to its stand-in channel (no SNS), whatever the template says.
 */
const LOCAL_ENV_OVERRIDES: Readonly<Record<string, string>> = {
  RETRY_BASE_SECONDS: "1",
  RETRY_MAX_SECONDS: "8",
  MODEL_PROVIDER: "local",
  CHANNEL_PROVIDER: "local",
  // The front door's streams look for changes four times a second (once in a deployed stack).
  STREAM_POLL_MS: "250",
  // An A2A task's push notifications may go to a loopback webhook (http://127.0.0.1:...): only
  // here, never in a deployed stack, whose webhooks must be https on a public host.
  A2A_PUSH_ALLOW_LOOPBACK: "true",
};

/** The runtime with its local stand-ins (the model, the options') and observations, started. */
async function startRuntime(
  topology: Topology,
  deployment: LocalDeployment,
  clients: AwsClients,
  functionClients: FunctionClients,
  endpoint: string,
  options: LocalOptions,
): Promise<Pick<LocalEnvironment, "runtime" | "observations" | "model"> & { issuer: LocalIssuer }> {
  const observations = new Observations();
  // The stack's agents answer with the scripts their roles' uses of the model give.
  const model = new RecordingModel(localModelOf(topology.groups.flatMap((g) => g.uses ?? [])));
  // The front door's local issuer, whose key the stream function verifies tokens with.
  const issuer = await localIssuer();
  const given: StandIns = { model, ...options.standIns };
  // The handlers' stand-ins, by the name of the integration each replaces.
  const services = {
    jwtKey: issuer.publicKey,
    integrations: options.faultInjection?.services?.(given) ?? given,
  };
  const runtime = new LocalRuntime({
    deployment,
    clients,
    functionClients,
    endpoint,
    root: ROOT,
    envOverrides: { ...LOCAL_ENV_OVERRIDES, ...options.envOverrides },
    services: { ...services },
    scheduleIntervalMs: options.scheduleIntervalMs,
    faultInjection: options.faultInjection,
    onEvent: (event) => {
      observations.listener(event);
      options.onEvent?.(event);
    },
  });
  await runtime.start();
  return { runtime, observations, model, issuer };
}

async function stopLocal(
  runtime: LocalRuntime,
  clients: AwsClients,
  moto: MotoServer | undefined,
): Promise<void> {
  await runtime.stop();
  clients.dynamodb.destroy();
  clients.sqs.destroy();
  clients.eventbridge.destroy();
  clients.sns?.destroy();
  await moto?.stop();
}
