import { DynamoDBClient, type DynamoDBClientConfig } from "@aws-sdk/client-dynamodb";
import { ulid } from "ulid";
import { DynamoEventStore } from "../../functions/adapters/dynamodb/event-store";
import type { TableNames } from "../../functions/adapters/dynamodb/tables";
import { consume } from "../../functions/core/pipeline";
import type { ConsumerDeps } from "../../functions/core/ports";
import type { Role, StepStatus } from "../../functions/core/role";
import { systemClock, ulidSource } from "../../functions/core/runtime";
import {
  type TaskView,
  taskProjection,
} from "../../functions/roles/task-projection/task-projection";
import { indexCatalog } from "../../lib/dev/metering/index-writes";
import { type Meter, meter } from "../../lib/dev/metering/metering";
import { fromSdk } from "../../lib/operator/from-sdk";
import { type Envelope, registry } from "../../schemas";
import { createTables } from "../../test/support/tables";
import {
  type BaselineConsumer,
  createIdempotencyTable,
  powertoolsConsumer,
  readState,
} from "./dynamo-baseline";
import { fmt, renderTable } from "./stats";
import { feedbackEnvelope, memoryDeps, newTaskId, produceLifecycles } from "./workload";

export interface DynamoOptions {
  /** Tasks whose 4 lifecycle events are consumed in order (the sequenced case). */
  readonly tasks: number;
  /** Feedback messages per task (the unsequenced case, and the redelivered-duplicate case). */
  readonly feedbackPerTask: number;
  /** task.accepted events consumed by the emitting role. */
  readonly emitting: number;
}

export const DEFAULT_DYNAMO: DynamoOptions = { tasks: 10, feedbackPerTask: 3, emitting: 30 };

interface PlannerState {
  readonly plans: number;
  readonly last_task: string;
}

/**
 * A role that emits one follow-up event: on `task.accepted` it records a plan in its own
 * aggregate (`plan/<task id>`) and appends `plan.created` to that aggregate's stream.
 */
export const planner: Role<PlannerState> = {
  group: "planner",
  subscriptions: ["task.accepted"],
  stateOf: (event) => ({ type: "plan", id: event.aggregate.id }),
  decide: (state, event) => ({
    state: { plans: (state?.plans ?? 0) + 1, last_task: event.task_id },
    emit: [
      {
        type: "plan.created",
        payload: { steps: [{ title: "look up order" }, { title: "draft reply" }] },
      },
    ],
  }),
};

export interface Measured {
  readonly events: number;
  readonly calls: Record<string, number>;
  readonly writeUnits: number;
  readonly readUnits: number;
  /** Milliseconds the whole case took against moto (timed, unlike the counted figures). */
  readonly ms: number;
}

export interface CaseResult {
  readonly name: string;
  readonly agentBus: Measured;
  readonly baseline: Measured;
}

interface Metered {
  readonly client: DynamoDBClient;
  readonly meter: Meter;
}

function metered(config: DynamoDBClientConfig): Metered {
  const client = new DynamoDBClient(config);
  return { client, meter: meter(client) };
}

async function measure(
  target: Metered,
  events: readonly Envelope[],
  handle: (event: Envelope) => Promise<void>,
): Promise<Measured> {
  target.meter.reset();
  const start = performance.now();
  for (const event of events) await handle(event);
  const ms = performance.now() - start;
  const { calls, writeUnits, readUnits } = target.meter.snapshot();
  return { events: events.length, calls, writeUnits, readUnits, ms };
}

const delivered = (e: Envelope): unknown => JSON.parse(JSON.stringify(e));

export interface DynamoResult {
  readonly cases: readonly CaseResult[];
}

/** One value for each design: AgentBus's, then the baseline's. */
interface Designs<T> {
  readonly agentBus: T;
  readonly baseline: T;
}

type Design = keyof Designs<unknown>;

/** Each design's value, made in the order AgentBus, baseline (as the ids are drawn). */
async function perDesign<T>(make: (design: Design) => T | Promise<T>): Promise<Designs<T>> {
  const agentBus = await make("agentBus");
  const baseline = await make("baseline");
  return { agentBus, baseline };
}

/** The events each case consumes, separate per design so each starts from the same empty state. */
interface Inputs {
  readonly tasks: Designs<string[]>;
  readonly lifecycle: Designs<Envelope[]>;
  readonly feedback: Designs<Envelope[]>;
  readonly accepted: Designs<Envelope[]>;
  /** One task.accepted per design for the warm-up, not measured. */
  readonly warm: Designs<Envelope>;
}

/**
 * The events to consume come from the producer API (appendToStream) on the in-memory twin: the
 * same envelopes a producer commits, without spending moto round trips on them. Nothing reads
 * them back from the events table (deliveries are in order: no gap repair).
 */
async function produceInputs(options: DynamoOptions): Promise<Inputs> {
  const producer = memoryDeps().deps;
  const tasks = await perDesign(() => Array.from({ length: options.tasks }, newTaskId));
  const lifecycle = await perDesign((d) => produceLifecycles(producer, tasks[d]));
  const feedback = await perDesign((d) =>
    tasks[d].flatMap((id) =>
      Array.from({ length: options.feedbackPerTask }, (_, i) => feedbackEnvelope(id, 1 + (i % 5))),
    ),
  );
  const accepted = await perDesign(() =>
    produceLifecycles(producer, Array.from({ length: options.emitting }, newTaskId), 1),
  );
  const [warmBus, warmBase] = await produceLifecycles(producer, [newTaskId(), newTaskId()], 1);
  if (!warmBus || !warmBase) throw new Error("the producer gave no warm-up events");
  return { tasks, lifecycle, feedback, accepted, warm: { agentBus: warmBus, baseline: warmBase } };
}

/** The two designs' consumers, each on its own metered client. */
interface Consumers {
  readonly bus: Metered;
  readonly base: Metered;
  readonly busDeps: ConsumerDeps;
  readonly projection: BaselineConsumer;
  readonly planner: BaselineConsumer;
}

function consumersOf(
  bus: Metered,
  base: Metered,
  tables: TableNames,
  idempotencyTable: string,
): Consumers {
  const depsOf = (client: DynamoDBClient): ConsumerDeps => ({
    store: new DynamoEventStore({ client: fromSdk(client), tables, clock: systemClock }),
    registry,
    clock: systemClock,
    ids: ulidSource(),
  });
  const busDeps = depsOf(bus.client);
  const target = { client: base.client, tables, idempotencyTable, deps: depsOf(base.client) };
  return {
    bus,
    base,
    busDeps,
    projection: powertoolsConsumer(taskProjection, target),
    planner: powertoolsConsumer(planner, target),
  };
}

/** AgentBus's consume() of each event, which must end as `expect`. */
function agentBusHandler(deps: ConsumerDeps, role: Role<unknown>, expect: StepStatus) {
  return async (e: Envelope): Promise<void> => {
    const result = await consume(delivered(e), role, deps);
    if (result.status !== expect) {
      throw new Error(
        `AgentBus ${role.group}: ${e.event_type} v${e.aggregate.version} was ${result.status}, expected ${expect}`,
      );
    }
  };
}

const baselineHandler =
  (consumer: BaselineConsumer) =>
  async (e: Envelope): Promise<void> => {
    await consumer.handle(delivered(e));
  };

/** The four cases, each measured on AgentBus first, then on the baseline. */
async function measureCases(c: Consumers, inputs: Inputs): Promise<CaseResult[]> {
  const measureCase = async (
    name: string,
    events: Designs<readonly Envelope[]>,
    role: Role<unknown>,
    expect: StepStatus,
    baseline: BaselineConsumer,
  ): Promise<CaseResult> => ({
    name,
    agentBus: await measure(c.bus, events.agentBus, agentBusHandler(c.busDeps, role, expect)),
    baseline: await measure(c.base, events.baseline, baselineHandler(baseline)),
  });
  const projection = taskProjection as Role<unknown>;
  const emitting = planner as Role<unknown>;
  // Warm-up (connections, SDK and Powertools initialisation): one task per design, not measured.
  await agentBusHandler(c.busDeps, emitting, "applied")(inputs.warm.agentBus);
  await baselineHandler(c.planner)(inputs.warm.baseline);

  const { lifecycle, feedback, accepted } = inputs;
  const cases: CaseResult[] = [];
  const sequenced = `sequenced lifecycle event (${lifecycle.agentBus.length}, in order)`;
  cases.push(await measureCase(sequenced, lifecycle, projection, "applied", c.projection));
  const unsequenced = `unsequenced feedback event (${feedback.agentBus.length})`;
  cases.push(await measureCase(unsequenced, feedback, projection, "applied", c.projection));
  const followUp = `event emitting 1 follow-up (${accepted.agentBus.length})`;
  cases.push(await measureCase(followUp, accepted, emitting, "applied", c.planner));
  const invocationsBefore = c.projection.invocations();
  const redelivered = `redelivered feedback, duplicate (${feedback.agentBus.length})`;
  cases.push(await measureCase(redelivered, feedback, projection, "duplicate", c.projection));
  if (c.projection.invocations() !== invocationsBefore) {
    throw new Error("Powertools idempotency ran the function again for a redelivered event");
  }
  return cases;
}

export async function runDynamoSection(
  out: (line?: string) => void,
  endpoint: string,
  options: DynamoOptions = DEFAULT_DYNAMO,
): Promise<DynamoResult> {
  const config: DynamoDBClientConfig = {
    endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
  };
  const admin = new DynamoDBClient(config);
  const bus = metered(config);
  const base = metered(config);
  try {
    const prefix = `bench-${ulid().toLowerCase()}`;
    const tables = await createTables(admin, prefix);
    // Both designs are metered with the tables' indexes: every write pays for its index entries.
    for (const design of [bus, base]) meter(design.client, { indexes: indexCatalog(tables) });
    const idempotencyTable = `${prefix}-idempotency`;
    await createIdempotencyTable(admin, idempotencyTable);
    const consumers = consumersOf(bus, base, tables, idempotencyTable);
    const inputs = await produceInputs(options);
    const cases = await measureCases(consumers, inputs);
    await verifyViews(consumers.busDeps, base.client, tables, inputs.tasks, options);
    printCases(out, cases);
    return { cases };
  } finally {
    admin.destroy();
    bus.client.destroy();
    base.client.destroy();
  }
}

/** Both designs must have left every task view complete with its feedback counted once. */
async function verifyViews(
  busDeps: ConsumerDeps,
  client: DynamoDBClient,
  tables: TableNames,
  tasks: Designs<readonly string[]>,
  options: DynamoOptions,
): Promise<void> {
  const check = (design: string, taskId: string, view: TaskView | undefined) => {
    if (view?.status !== "delivered" || view.feedback.count !== options.feedbackPerTask) {
      throw new Error(
        `${design}: task ${taskId} ended as ${view?.status ?? "nothing"} with ${view?.feedback.count ?? 0} feedback, expected delivered with ${options.feedbackPerTask}`,
      );
    }
  };
  const viewRef = (taskId: string) => ({ type: "task_view", id: taskId });
  for (const taskId of tasks.agentBus) {
    const { state } = await busDeps.store.load({ state: viewRef(taskId) });
    check("AgentBus", taskId, state?.data as TaskView | undefined);
  }
  for (const taskId of tasks.baseline) {
    const stored = await readState(client, tables.state, viewRef(taskId));
    check("baseline", taskId, stored?.data as TaskView | undefined);
  }
}

const perEvent = (m: Measured, n: number) => (m.events > 0 ? n / m.events : 0);
const callsPerEvent = (m: Measured) =>
  perEvent(
    m,
    Object.values(m.calls).reduce((a, b) => a + b, 0),
  );
const byCommand = (m: Measured) =>
  Object.entries(m.calls)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, n]) => `${name} ${fmt(perEvent(m, n))}`)
    .join(", ");
/** A design's figures per event, as a row of the table. */
const designRow = (name: string, design: string, m: Measured): string[] => [
  name,
  design,
  fmt(callsPerEvent(m)),
  byCommand(m),
  fmt(perEvent(m, m.writeUnits)),
  fmt(perEvent(m, m.readUnits)),
  fmt(m.ms / m.events, 1),
];
const ratio = (a: number, b: number) => (b > 0 ? `${fmt(a / b)}×` : a > 0 ? "∞ (base 0)" : "–");

function printCases(out: (line?: string) => void, cases: readonly CaseResult[]): void {
  const rows: string[][] = [];
  for (const c of cases) {
    const a = c.agentBus;
    const b = c.baseline;
    rows.push(designRow(c.name, "AgentBus consume", a), designRow("", "Powertools + writes", b), [
      "",
      "AgentBus ÷ baseline",
      ratio(callsPerEvent(a), callsPerEvent(b)),
      "",
      ratio(a.writeUnits / a.events, b.writeUnits / b.events),
      ratio(a.readUnits / a.events, b.readUnits / b.events),
      ratio(a.ms / a.events, b.ms / b.events),
    ]);
  }
  const table = renderTable(
    [
      "case (events per design)",
      "design",
      "calls/ev",
      "calls by command, per event",
      "WU/ev",
      "RU/ev",
      "moto ms/ev",
    ],
    rows,
    ["l", "l", "r", "l", "r", "r", "r"],
  );
  for (const line of table) out(line);
  out();
  for (const c of cases) out(designCheck(c));
}

/** Whether AgentBus made the calls its design says for a case: one read, one write per event. */
function designCheck(c: CaseResult): string {
  const a = c.agentBus;
  const writes =
    (a.calls.TransactWriteItems ?? 0) + (a.calls.PutItem ?? 0) + (a.calls.UpdateItem ?? 0);
  const loads = a.calls.GetItem ?? 0;
  const other = Object.keys(a.calls).filter(
    (k) => !["GetItem", "TransactWriteItems", "PutItem", "UpdateItem"].includes(k),
  );
  const expectedWrites = c.name.startsWith("redelivered") ? 0 : a.events;
  const ok = loads === a.events && writes === expectedWrites && other.length === 0;
  return `  ${ok ? "as designed" : "UNEXPECTED "}: AgentBus ${c.name}: ${loads} GetItem + ${writes} writes for ${a.events} events (expected ${a.events} + ${expectedWrites})`;
}
