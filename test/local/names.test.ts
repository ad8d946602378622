import { describe, expect, it } from "vitest";
import { synthesize } from "../../lib/dev/local/synth";
import { outputId } from "../../lib/infra/output-ids";
import { PROJECT_STACK, topology } from "../../lib/infra/project";
import { stackNames } from "../../lib/operator/names";

/** The local tools read the stack's names from its outputs, as the CLI does. */
describe("stack names from the outputs", () => {
  const small = {
    topics: ["commands", "events"],
    groups: [{ name: "order-lookup" }, { name: "worker" }],
  } as unknown as Parameters<typeof stackNames>[1];
  const outputs = {
    CommandsBusName: "agentbus-t-commands",
    EventsBusName: "agentbus-t-events",
    OrderLookupQueueUrl: "http://q/order-lookup.fifo",
    OrderLookupDeadLetterQueueUrl: "http://q/order-lookup-dlq.fifo",
    WorkerQueueUrl: "http://q/worker.fifo",
    WorkerDeadLetterQueueUrl: "http://q/worker-dlq.fifo",
    WorkerBufferQueueUrl: "http://q/worker-buffer",
    WorkerBufferDeadLetterQueueUrl: "http://q/worker-buffer-dlq",
    RelayFailureQueueUrl: "http://q/relay-failures",
    StateTableName: "state",
    EventsTableName: "events",
    InboxTableName: "inbox",
    SideEffectsTableName: "side-effects",
    OrdersTableName: "orders",
    RepliesTopicArn: "arn:aws:sns:us-east-1:1:replies.fifo",
  };

  it("names the output ids as the stack does", () => {
    expect(outputId("order-lookup")).toBe("OrderLookup");
    expect(outputId("events")).toBe("Events");
  });

  it("reads tables, buses, group queues, the relay's failures and the reply topic", () => {
    expect(stackNames(outputs, small)).toEqual({
      tables: {
        state: "state",
        events: "events",
        inbox: "inbox",
        sideEffects: "side-effects",
        orders: "orders",
      },
      buses: { commands: "agentbus-t-commands", events: "agentbus-t-events" },
      groups: {
        "order-lookup": {
          queue: "http://q/order-lookup.fifo",
          deadLetterQueue: "http://q/order-lookup-dlq.fifo",
          buffer: undefined,
          bufferDeadLetterQueue: undefined,
        },
        worker: {
          queue: "http://q/worker.fifo",
          deadLetterQueue: "http://q/worker-dlq.fifo",
          buffer: "http://q/worker-buffer",
          bufferDeadLetterQueue: "http://q/worker-buffer-dlq",
        },
      },
      relayFailureQueue: "http://q/relay-failures",
      repliesTopic: "arn:aws:sns:us-east-1:1:replies.fifo",
      deadLetterQueues: [
        "http://q/order-lookup-dlq.fifo",
        "http://q/worker-dlq.fifo",
        "http://q/worker-buffer-dlq",
      ],
    });
  });

  it("names every output it needs and the stack lacks, at once", () => {
    const { EventsBusName, WorkerQueueUrl, InboxTableName, ...fewer } = outputs;
    expect(() => stackNames(fewer, small)).toThrow(
      "the stack's outputs lack EventsBusName, WorkerQueueUrl, InboxTableName: the local tools need them",
    );
    const { OrdersTableName, RepliesTopicArn, ...noSupport } = outputs;
    expect(stackNames(noSupport, small)).toMatchObject({
      tables: { orders: undefined },
      repliesTopic: undefined,
    });
  });

  it("finds every name it needs in the project's synthesized stack", () => {
    const { template } = synthesize("names", PROJECT_STACK);
    const keys = Object.fromEntries(Object.keys(template.Outputs ?? {}).map((k) => [k, k]));
    const names = stackNames(keys, topology);
    expect(Object.keys(names.buses)).toEqual([...topology.topics]);
    expect(Object.keys(names.groups).sort()).toEqual(topology.groups.map((g) => g.name).sort());
    expect(names.tables.orders).toBe("OrdersTableName");
    expect(names.repliesTopic).toBe("RepliesTopicArn");
  }, 60_000);
});
