import { IdempotencyConfig, makeIdempotent } from "@aws-lambda-powertools/idempotency";
import { DynamoDBPersistenceLayer } from "@aws-lambda-powertools/idempotency/dynamodb";
import {
  CreateTableCommand,
  DynamoDBClient,
  type DynamoDBClientConfig,
  GetItemCommand,
  PutItemCommand,
  UpdateTimeToLiveCommand,
  waitUntilTableExists,
} from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import type { Context } from "aws-lambda";
import { ulid } from "ulid";
import { DynamoEventStore } from "../../functions/adapters/dynamodb/event-store";
import {
  eventItem,
  type StateItem,
  stateItem,
  storedStateOf,
} from "../../functions/adapters/dynamodb/items";
import { streamKey, type TableNames } from "../../functions/adapters/dynamodb/tables";
import { type Meter, meter } from "../../functions/adapters/metering";
import { buildEmitted } from "../../functions/core/emit";
import { consume, type Role, type StepStatus } from "../../functions/core/pipeline";
import type { ConsumerDeps, StoredState } from "../../functions/core/ports";
import { systemClock, ulidSource } from "../../functions/core/runtime";
import { type TaskView, taskProjection } from "../../functions/roles/task-projection";
import { type AggregateRef, type Envelope, registry } from "../../schemas";
import { createTables } from "../../test/support/tables";
import { fmt, renderTable } from "./stats";
import { feedbackEnvelope, memoryDeps, newTaskId, produceLifecycles } from "./workload";

/** Inbox rows and idempotency records are kept equally long in both designs. */
const RETENTION_SECONDS = 7 * 24 * 3600;

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
  /** readUnits plus the minimum read DynamoDB bills for each BatchGetItem key that was not found. */
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
  const snapshot = target.meter.snapshot();
  return {
    events: events.length,
    calls: snapshot.calls,
    writeUnits: snapshot.writeUnits,
    readUnits: snapshot.readUnits,
    ms,
  };
}

/** The Powertools idempotency table: partition key `id` (S), TTL attribute `expiration`. */
async function createIdempotencyTable(client: DynamoDBClient, name: string): Promise<void> {
  await client.send(
    new CreateTableCommand({
      TableName: name,
      BillingMode: "PAY_PER_REQUEST",
      KeySchema: [{ AttributeName: "id", KeyType: "HASH" }],
      AttributeDefinitions: [{ AttributeName: "id", AttributeType: "S" }],
    }),
  );
  await waitUntilTableExists({ client, maxWaitTime: 30, minDelay: 1 }, { TableName: name });
  await client.send(
    new UpdateTimeToLiveCommand({
      TableName: name,
      TimeToLiveSpecification: { AttributeName: "expiration", Enabled: true },
    }),
  );
}

/**
 * The baseline design: Powertools idempotency (keyed by event id) around a function that reads
 * the state (GetItem), decides with the same role, writes the state with a revision condition
 * (PutItem) and writes each emitted event to the events table (a separate PutItem: the outbox
 * row is not atomic with the state write). No order gate.
 */
function powertoolsConsumer<S>(
  role: Role<S>,
  client: DynamoDBClient,
  tables: TableNames,
  idempotencyTable: string,
  deps: ConsumerDeps,
) {
  const config = new IdempotencyConfig({
    eventKeyJmesPath: "event_id",
    expiresAfterSeconds: RETENTION_SECONDS,
  });
  // What a Lambda handler does once per invocation; it also bounds the in-progress lock.
  config.registerLambdaContext({ getRemainingTimeInMillis: () => 60_000 } as unknown as Context);
  const persistenceStore = new DynamoDBPersistenceLayer({
    tableName: idempotencyTable,
    awsSdkV3Client: client,
  });
  let invocations = 0;
  const apply = async (event: Envelope): Promise<{ status: StepStatus; emitted: number }> => {
    invocations++;
    const ref: AggregateRef = role.stateOf?.(event) ?? {
      type: event.aggregate.type,
      id: event.aggregate.id,
    };
    const got = await client.send(
      new GetItemCommand({
        TableName: tables.state,
        Key: { pk: { S: streamKey(ref) } },
        ConsistentRead: true,
      }),
    );
    const stored = got.Item ? storedStateOf(unmarshall(got.Item) as StateItem) : undefined;
    const now = deps.clock.now();
    const decision = await role.decide(stored?.data as S | undefined, event, {
      now,
      receiveCount: 1,
      stored: stored as StoredState<S> | undefined,
      repaired: false,
    });
    const head = stored?.version ?? 0;
    const emitted = buildEmitted(decision.emit ?? [], event, ref, head, role.group, deps, now);
    const revision = stored?.revision ?? 0;
    const next = decision.state !== undefined ? decision.state : (stored?.data ?? null);
    await client.send(
      new PutItemCommand({
        TableName: tables.state,
        Item: marshall(stateItem(ref, revision + 1, head + emitted.length, next, now), {
          removeUndefinedValues: true,
        }),
        ...(revision === 0
          ? {
              ConditionExpression: "attribute_not_exists(#pk)",
              ExpressionAttributeNames: { "#pk": "pk" },
            }
          : {
              ConditionExpression: "#r = :r",
              ExpressionAttributeNames: { "#r": "revision" },
              ExpressionAttributeValues: { ":r": { N: String(revision) } },
            }),
      }),
    );
    for (const e of emitted) {
      await client.send(
        new PutItemCommand({
          TableName: tables.events,
          Item: marshall(eventItem(e), { removeUndefinedValues: true }),
          ConditionExpression: "attribute_not_exists(#pk)",
          ExpressionAttributeNames: { "#pk": "pk" },
        }),
      );
    }
    return { status: "applied", emitted: emitted.length };
  };
  const idempotent = makeIdempotent(apply, { persistenceStore, config, keyPrefix: role.group });
  return {
    /** Validates like the pipeline does, then runs the idempotent function. */
    handle: async (raw: unknown) => {
      const parsed = registry.parse(raw);
      if (!parsed.ok) throw new Error(`baseline got an invalid envelope: ${parsed.message}`);
      return idempotent(parsed.envelope);
    },
    invocations: () => invocations,
  };
}

const delivered = (e: Envelope): unknown => JSON.parse(JSON.stringify(e));

export interface DynamoResult {
  readonly cases: readonly CaseResult[];
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
    const idempotencyTable = `${prefix}-idempotency`;
    await createIdempotencyTable(admin, idempotencyTable);

    const storeOf = (client: DynamoDBClient) =>
      new DynamoEventStore({ client, tables, clock: systemClock });
    const depsOf = (client: DynamoDBClient): ConsumerDeps => ({
      store: storeOf(client),
      registry,
      clock: systemClock,
      ids: ulidSource(),
    });
    // The events to consume come from the producer API (appendToStream) on the in-memory twin:
    // the same envelopes a producer commits, without spending moto round trips on them. Nothing
    // below reads them back from the events table (deliveries are in order: no gap repair).
    const producer = memoryDeps().deps;
    const busDeps = depsOf(bus.client);
    const baseDeps = depsOf(base.client);

    const agentBus = (role: Role<unknown>, expect: StepStatus) => async (e: Envelope) => {
      const result = await consume(delivered(e), role, busDeps);
      if (result.status !== expect) {
        throw new Error(
          `AgentBus ${role.group}: ${e.event_type} v${e.aggregate.version} was ${result.status}, expected ${expect}`,
        );
      }
    };
    const projectionBaseline = powertoolsConsumer(
      taskProjection,
      base.client,
      tables,
      idempotencyTable,
      baseDeps,
    );
    const plannerBaseline = powertoolsConsumer(
      planner,
      base.client,
      tables,
      idempotencyTable,
      baseDeps,
    );
    const baseline = (consumer: ReturnType<typeof powertoolsConsumer>) => async (e: Envelope) => {
      await consumer.handle(delivered(e));
    };

    // Separate tasks per design, so each design starts from the same empty state.
    const sides = {
      agentBus: Array.from({ length: options.tasks }, newTaskId),
      baseline: Array.from({ length: options.tasks }, newTaskId),
    };
    const lifecycle = {
      agentBus: await produceLifecycles(producer, sides.agentBus),
      baseline: await produceLifecycles(producer, sides.baseline),
    };
    const feedback = {
      agentBus: sides.agentBus.flatMap((id) =>
        Array.from({ length: options.feedbackPerTask }, (_, i) =>
          feedbackEnvelope(id, 1 + (i % 5)),
        ),
      ),
      baseline: sides.baseline.flatMap((id) =>
        Array.from({ length: options.feedbackPerTask }, (_, i) =>
          feedbackEnvelope(id, 1 + (i % 5)),
        ),
      ),
    };
    const accepted = {
      agentBus: await produceLifecycles(
        producer,
        Array.from({ length: options.emitting }, newTaskId),
        1,
      ),
      baseline: await produceLifecycles(
        producer,
        Array.from({ length: options.emitting }, newTaskId),
        1,
      ),
    };

    // Warm-up (connections, SDK and Powertools initialisation): one task per design, not measured.
    const warm = await produceLifecycles(producer, [newTaskId(), newTaskId()], 1);
    await agentBus(planner as Role<unknown>, "applied")(warm[0] as Envelope);
    await baseline(plannerBaseline)(warm[1] as Envelope);

    const cases: CaseResult[] = [];
    const projection = taskProjection as Role<unknown>;
    cases.push({
      name: `sequenced lifecycle event (${lifecycle.agentBus.length}, in order)`,
      agentBus: await measure(bus, lifecycle.agentBus, agentBus(projection, "applied")),
      baseline: await measure(base, lifecycle.baseline, baseline(projectionBaseline)),
    });
    cases.push({
      name: `unsequenced feedback event (${feedback.agentBus.length})`,
      agentBus: await measure(bus, feedback.agentBus, agentBus(projection, "applied")),
      baseline: await measure(base, feedback.baseline, baseline(projectionBaseline)),
    });
    cases.push({
      name: `event emitting 1 follow-up (${accepted.agentBus.length})`,
      agentBus: await measure(
        bus,
        accepted.agentBus,
        agentBus(planner as Role<unknown>, "applied"),
      ),
      baseline: await measure(base, accepted.baseline, baseline(plannerBaseline)),
    });
    const invocationsBefore = projectionBaseline.invocations();
    cases.push({
      name: `redelivered feedback, duplicate (${feedback.agentBus.length})`,
      agentBus: await measure(bus, feedback.agentBus, agentBus(projection, "duplicate")),
      baseline: await measure(base, feedback.baseline, baseline(projectionBaseline)),
    });
    if (projectionBaseline.invocations() !== invocationsBefore) {
      throw new Error("Powertools idempotency ran the function again for a redelivered event");
    }
    await verifyViews(busDeps, base.client, tables, sides, options);

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
  sides: { agentBus: string[]; baseline: string[] },
  options: DynamoOptions,
): Promise<void> {
  const check = (design: string, taskId: string, view: TaskView | undefined) => {
    if (view?.status !== "delivered" || view.feedback.count !== options.feedbackPerTask) {
      throw new Error(
        `${design}: task ${taskId} ended as ${view?.status ?? "nothing"} with ${view?.feedback.count ?? 0} feedback, expected delivered with ${options.feedbackPerTask}`,
      );
    }
  };
  for (const taskId of sides.agentBus) {
    const { state } = await busDeps.store.load({ state: { type: "task_view", id: taskId } });
    check("AgentBus", taskId, state?.data as TaskView | undefined);
  }
  for (const taskId of sides.baseline) {
    const got = await client.send(
      new GetItemCommand({
        TableName: tables.state,
        Key: { pk: { S: `task_view#${taskId}` } },
        ConsistentRead: true,
      }),
    );
    const view = got.Item
      ? (storedStateOf(unmarshall(got.Item) as StateItem).data as TaskView)
      : undefined;
    check("baseline", taskId, view);
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
const ratio = (a: number, b: number) => (b > 0 ? `${fmt(a / b)}×` : a > 0 ? "∞ (base 0)" : "–");

function printCases(out: (line?: string) => void, cases: readonly CaseResult[]): void {
  const rows: string[][] = [];
  for (const c of cases) {
    const a = c.agentBus;
    const b = c.baseline;
    rows.push(
      [
        c.name,
        "AgentBus consume",
        fmt(callsPerEvent(a)),
        byCommand(a),
        fmt(perEvent(a, a.writeUnits)),
        fmt(perEvent(a, a.readUnits)),
        fmt(a.ms / a.events, 1),
      ],
      [
        "",
        "Powertools + writes",
        fmt(callsPerEvent(b)),
        byCommand(b),
        fmt(perEvent(b, b.writeUnits)),
        fmt(perEvent(b, b.readUnits)),
        fmt(b.ms / b.events, 1),
      ],
      [
        "",
        "AgentBus ÷ baseline",
        ratio(callsPerEvent(a), callsPerEvent(b)),
        "",
        ratio(a.writeUnits / a.events, b.writeUnits / b.events),
        ratio(a.readUnits / a.events, b.readUnits / b.events),
        ratio(a.ms / a.events, b.ms / b.events),
      ],
    );
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
