import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { EventBridgeClient, type PutEventsCommandInput } from "@aws-sdk/client-eventbridge";
import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoEventStore } from "../../functions/adapters/dynamodb/event-store";
import type { TableNames } from "../../functions/adapters/dynamodb/tables";
import { TransientError } from "../../functions/core/errors";
import { consume } from "../../functions/core/pipeline";
import type { StoredState } from "../../functions/core/ports";
import { ManualClock, ulidSource } from "../../functions/core/runtime";
import { observability } from "../../functions/handlers/observe";
import { createSweeperHandler } from "../../functions/handlers/sweeper";
import { conversationRole } from "../../functions/roles/customer-support/conversation/conversation";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import { fromSdk } from "../../lib/operator/from-sdk";
import { type Envelope, registry } from "../../schemas";
import { clientMessage, makeDeps } from "../core/fixtures";
import { newConversationId } from "../core/support-fixture";
import { emulator } from "../support/aws";
import { newUlid } from "../support/factories";
import { referenceOrchestrator } from "../support/reference";
import { createTables, deleteTables } from "../support/tables";

process.env.POWERTOOLS_LOG_LEVEL = "SILENT";
process.env.POWERTOOLS_METRICS_DISABLED = "true";

/**
 * The sweeper handler against DynamoDB on moto: runs written by the orchestrator through the
 * pipeline, found through the state table's by-due index, reported with PutEvents (recorded by a
 * stand-in EventBridge client).
 */

let dynamodb: DynamoDBClient;
let tables: TableNames;
// Far in the future, so that no other row of these tables is due before these cases' runs.
const clock = new ManualClock("2090-03-01T10:00:00.000Z");

beforeAll(async () => {
  dynamodb = new DynamoDBClient(emulator());
  tables = await createTables(dynamodb, `sw-${newUlid().toLowerCase()}`);
});

afterAll(async () => {
  await deleteTables(dynamodb, tables);
  dynamodb.destroy();
});

function fakeEventBridge(failCode?: string) {
  const client = new EventBridgeClient(emulator());
  const puts: PutEventsCommandInput[] = [];
  client.middlewareStack.add(
    () => async (args) => {
      const input = args.input as PutEventsCommandInput;
      puts.push(input);
      const entries = (input.Entries ?? []).map(() =>
        failCode ? { ErrorCode: failCode, ErrorMessage: "no" } : { EventId: ulid() },
      );
      return {
        output: {
          $metadata: {},
          FailedEntryCount: failCode ? entries.length : 0,
          Entries: entries,
        },
        response: {},
      } as never;
    },
    { step: "initialize", name: "fake-put-events" },
  );
  return { client, puts };
}

const store = () =>
  new DynamoEventStore({
    client: fromSdk(dynamodb),
    tables: { state: tables.state, events: tables.events, inbox: tables.inbox },
    clock,
  });

async function startRun(
  leaseSeconds: number,
  tenant?: string,
): Promise<{ runId: string; start: Envelope }> {
  const runId = `run_${ulid()}`;
  const start = {
    event_id: ulid(),
    event_type: "workflow.start.requested",
    schema_version: 1,
    occurred_at: clock.now().toISOString(),
    correlation_id: `corr_${ulid()}`,
    causation_id: null,
    task_id: `task_${ulid()}`,
    aggregate: { type: "dag_run", id: runId, version: 0 },
    order_key: runId,
    producer: "test",
    attempt: 1,
    payload: { run_id: runId, workflow: "long-form", request: { topic_hint: "tides" } },
    ...(tenant === undefined ? {} : { tenant_id: tenant }),
  } as Envelope;
  await consume(start, referenceOrchestrator({ queuedLeaseSeconds: leaseSeconds }), {
    store: store(),
    registry,
    clock,
    ids: ulidSource(clock),
  });
  return { runId, start };
}

const env = {
  STATE_TABLE: "",
  BUS_EVENTS: "agentbus-test-events",
  BUS_COMMANDS: "agentbus-test-commands",
};

describe("sweeper handler", () => {
  it("reports a node RUNNING past its lease on the events bus, with the same id on every sweep", async () => {
    const { runId, start } = await startRun(60);
    const bus = fakeEventBridge();
    const sweep = createSweeperHandler({
      env: { ...env, STATE_TABLE: tables.state },
      dynamodb: fromSdk(dynamodb),
      eventbridge: fromSdk(bus.client),
      clock,
    });
    expect(await sweep()).toMatchObject({ due: 0, published: 0 });
    expect(bus.puts).toEqual([]);

    clock.advance(61_000);
    const report = await sweep();
    expect(report).toMatchObject({ due: 1, loaded: 1, leaseExpired: 1, published: 1, failed: 0 });
    const entry = bus.puts[0]?.Entries?.[0];
    expect(entry).toMatchObject({
      EventBusName: "agentbus-test-events",
      DetailType: "node.lease.expired",
      Source: "agentbus",
    });
    const envelope = JSON.parse(entry?.Detail ?? "{}") as Envelope;
    expect(envelope).toMatchObject({
      producer: "lease-sweeper",
      correlation_id: start.correlation_id,
      aggregate: { type: "dag_run", id: runId, version: 0 },
      payload: { run_id: runId, node_id: "topic-selection", generation: 0 },
    });
    expect(registry.parse(envelope).ok).toBe(true);

    await sweep();
    const again = JSON.parse(bus.puts[1]?.Entries?.[0]?.Detail ?? "{}") as Envelope;
    expect(again.event_id).toBe(envelope.event_id);
    bus.client.destroy();

    // The orchestrator fails the node; the run is no longer due.
    const orchestrator = referenceOrchestrator({ queuedLeaseSeconds: 60, maxLeaseRedeliveries: 0 });
    const deps = { store: store(), registry, clock, ids: ulidSource(clock) };
    await consume(envelope, orchestrator, deps);
    const loaded = await store().load({ state: { type: "dag_run", id: runId } });
    const state = loaded.state?.data as OrchestratorState;
    expect(state.run.nodes["topic-selection"]?.error?.code).toBe("agent_run.lease_expired");
    const quiet = fakeEventBridge();
    const after = createSweeperHandler({
      env: { ...env, STATE_TABLE: tables.state },
      dynamodb: fromSdk(dynamodb),
      eventbridge: fromSdk(quiet.client),
      clock,
    });
    expect(await after()).toMatchObject({ due: 0, published: 0 });
    quiet.client.destroy();
  });

  it("reports a tenant's run in that tenant, read from its stored state, and the orchestrator takes it", async () => {
    const { runId } = await startRun(60, "acme");
    const bus = fakeEventBridge();
    const sweep = createSweeperHandler({
      env: { ...env, STATE_TABLE: tables.state },
      dynamodb: fromSdk(dynamodb),
      eventbridge: fromSdk(bus.client),
      clock,
    });
    clock.advance(61_000);
    expect(await sweep()).toMatchObject({ due: 1, leaseExpired: 1, published: 1 });
    const envelope = JSON.parse(bus.puts[0]?.Entries?.[0]?.Detail ?? "{}") as Envelope;
    bus.client.destroy();
    expect(envelope).toMatchObject({
      event_type: "node.lease.expired",
      tenant_id: "acme",
      aggregate: { type: "dag_run", id: runId, version: 0 },
    });
    // The run obeys it (another tenant's report would be refused): the node fails, the run ends.
    const orchestrator = referenceOrchestrator({ queuedLeaseSeconds: 60, maxLeaseRedeliveries: 0 });
    const deps = { store: store(), registry, clock, ids: ulidSource(clock) };
    expect((await consume(envelope, orchestrator, deps)).status).toBe("applied");
    const loaded = await store().load({ state: { type: "dag_run", id: runId } });
    const state = loaded.state?.data as OrchestratorState;
    expect(state.run.nodes["topic-selection"]?.error?.code).toBe("agent_run.lease_expired");
  });

  it("nudges a conversation whose held message waited its time for the one before it", async () => {
    // In memory: the conversation's hold is the case; the index is the one the simulation uses.
    const { deps, clock: memoryClock, store: memory } = makeDeps();
    const role = conversationRole({ holdSeconds: 60 });
    const conversation = newConversationId();
    const numbered = (seq: number) => {
      const message = clientMessage(conversation, `message ${seq}`);
      return { ...message, payload: { ...(message.payload as object), client_seq: seq } };
    };
    await consume(numbered(1), role, deps);
    await consume(numbered(3), role, deps);
    memoryClock.advance(61_000);
    const published: Envelope[] = [];
    const sweep = createSweeperHandler({
      env: { ...env, STATE_TABLE: "in-memory" },
      index: memory,
      publisher: {
        publish: async (_topic, envelopes) => {
          published.push(...envelopes);
          return [];
        },
      },
      clock: memoryClock,
    });
    expect(await sweep()).toMatchObject({ due: 1, loaded: 1, published: 1 });
    expect(published.map((e) => [e.event_type, e.aggregate.id])).toEqual([
      ["conversation.hold.expired", conversation],
    ]);
  });

  it("fails the invocation (transiently) when entries could not be published", async () => {
    await startRun(30);
    clock.advance(31_000);
    const bus = fakeEventBridge("ThrottlingException");
    const sweep = createSweeperHandler({
      env: { ...env, STATE_TABLE: tables.state },
      dynamodb: fromSdk(dynamodb),
      eventbridge: fromSdk(bus.client),
      clock,
    });
    await expect(sweep()).rejects.toBeInstanceOf(TransientError);
    expect(bus.puts.length).toBe(1);
    bus.client.destroy();
  });

  it("counts and publishes the approvals near their deadline, once per sweep", async () => {
    const now = new Date("2090-06-01T12:00:00.000Z");
    const blocked = (id: string, minutes: number): StoredState => ({
      aggregate: { type: "agent_run", id },
      revision: 1,
      version: 1,
      dueAt: new Date(now.getTime() + minutes * 60_000).toISOString(),
      data: {
        run_id: id,
        task_id: `task_${id}`,
        status: "BLOCKED",
        decision_type: "refund.agent.decision.requested",
        correlation_id: `corr_${id}`,
        waiting: {
          tool_call_id: "call_1",
          deadline: new Date(now.getTime() + minutes * 60_000).toISOString(),
        },
      },
    });
    const states = [blocked("ar_soon", 4), blocked("ar_later", 30)];
    const index = {
      due: async (until: Date) =>
        states.filter((s) => Date.parse(s.dueAt ?? "") <= until.getTime()).map((s) => s.aggregate),
      loadStates: async (refs: readonly { id: string }[]) =>
        states.filter((s) => refs.some((r) => r.id === s.aggregate.id)),
    };
    const published: unknown[] = [];
    const obs = observability("lease-sweeper");
    Object.assign(obs.metrics, {
      disabled: false,
      console: { log: (line: string) => published.push(JSON.parse(line)) },
    });
    const sweep = createSweeperHandler({
      env: { ...env, STATE_TABLE: "t" },
      index,
      publisher: { publish: async () => [] },
      clock: new ManualClock(now.toISOString()),
      observability: obs,
    });
    expect(await sweep()).toMatchObject({ due: 0, published: 0, deadlineNear: 1 });
    expect(published).toContainEqual(
      expect.objectContaining({ service: "lease-sweeper", ApprovalDeadlineNear: 1 }),
    );
    const off = createSweeperHandler({
      env: { ...env, STATE_TABLE: "t", APPROVAL_WARNING_SECONDS: "0" },
      index,
      publisher: { publish: async () => [] },
      clock: new ManualClock(now.toISOString()),
    });
    expect(await off()).toMatchObject({ deadlineNear: 0 });
  });

  it("names a missing STATE_TABLE or missing buses", () => {
    expect(() => createSweeperHandler({ env: { BUS_EVENTS: "b" } })).toThrow(/STATE_TABLE/);
    expect(() => createSweeperHandler({ env: { STATE_TABLE: "t" } })).toThrow(/BUS_<TOPIC>/);
  });
});
