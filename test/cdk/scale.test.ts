import { Duration } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import { describe, expect, it } from "vitest";
import { DISPATCH_MAX_CONCURRENCY } from "../../lib/infra/constructs/consumer-group-settings";
import { Relay } from "../../lib/infra/constructs/relay";
import { AgentBusTables } from "../../lib/infra/constructs/tables";
import { Topic } from "../../lib/infra/constructs/topic";
import {
  functionsOfKind,
  refersTo,
  resources,
  single,
  synthesizeStack,
  testStack,
  topologyWithPipe,
} from "./synth";

/**
 * What lets the stack grow past one queue's limits: FIFO queues in high-throughput mode, the
 * relay reading each stream shard in order, the dispatchers' concurrency capped. The ceilings
 * themselves are in lib/infra/README.md ("Scale and limits").
 */
const stacks = {
  default: synthesizeStack().template,
  "with a pipe-delivered group": synthesizeStack({ topology: topologyWithPipe() }, "AgentBus-pipe")
    .template,
};

const mappingOf = (template: Template, functionId: string) =>
  single(
    template,
    "AWS::Lambda::EventSourceMapping",
    (m) => refersTo(m.Properties.FunctionName) === functionId,
  );

describe.each(Object.entries(stacks))("scale settings, %s stack", (_, template) => {
  it("runs every FIFO queue, dead-letter queues included, in high-throughput mode", () => {
    const fifo = resources(template, "AWS::SQS::Queue", (q) => q.Properties.FifoQueue === true);
    const deadLetterTargets = new Set(
      resources(template, "AWS::SQS::Queue").map((q) =>
        refersTo(
          (q.Properties.RedrivePolicy as { deadLetterTargetArn?: unknown } | undefined)
            ?.deadLetterTargetArn,
        ),
      ),
    );
    expect(fifo.some((q) => deadLetterTargets.has(q.id))).toBe(true);
    expect(fifo.some((q) => !deadLetterTargets.has(q.id))).toBe(true);
    for (const queue of fifo) {
      expect(queue.Properties, queue.id).toMatchObject({
        DeduplicationScope: "messageGroup",
        FifoThroughputLimit: "perMessageGroupId",
        ContentBasedDeduplication: false,
      });
    }
  });

  it("caps every dispatcher's event source at the dispatch concurrency", () => {
    const dispatchers = functionsOfKind(template, "dispatch");
    expect(dispatchers.length).toBeGreaterThan(0);
    for (const dispatcher of dispatchers) {
      expect(mappingOf(template, dispatcher.id).Properties.ScalingConfig, dispatcher.id).toEqual({
        MaximumConcurrency: DISPATCH_MAX_CONCURRENCY,
      });
    }
  });

  it("reads each stream shard one batch at a time, as soon as records are there", () => {
    const [relay] = functionsOfKind(template, "relay");
    const mapping = mappingOf(template, relay?.id ?? "");
    expect(mapping.Properties).toMatchObject({ ParallelizationFactor: 1, BatchSize: 100 });
    expect(mapping.Properties.MaximumBatchingWindowInSeconds).toBeUndefined();
  });
});

describe("relay scaling props", () => {
  const relayMapping = (props: {
    parallelizationFactor?: number;
    maxBatchingWindow?: Duration;
  }) => {
    const stack = testStack();
    new Relay(stack, "Relay", {
      topics: [new Topic(stack, "Events", { topicName: "events" })],
      tables: new AgentBusTables(stack, "Tables"),
      ...props,
    });
    return single(Template.fromStack(stack), "AWS::Lambda::EventSourceMapping", () => true);
  };

  it("takes a parallelization factor and a batching window when asked", () => {
    const mapping = relayMapping({
      parallelizationFactor: 4,
      maxBatchingWindow: Duration.seconds(2),
    });
    expect(mapping.Properties).toMatchObject({
      ParallelizationFactor: 4,
      MaximumBatchingWindowInSeconds: 2,
    });
  });

  it.each([0, 11, 1.5])("rejects a parallelization factor of %s, naming it", (factor) => {
    expect(() => relayMapping({ parallelizationFactor: factor })).toThrow(
      `relay: parallelizationFactor is ${factor}, must be an integer from 1 to 10`,
    );
  });
});
