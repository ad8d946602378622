import { Duration } from "aws-cdk-lib";
import { describe, expect, it } from "vitest";
import { DIRECT_GROUPS_ENV, type DirectGroup } from "../../functions/core/direct-delivery";
import { PACKED_JSON_MARKER, packedJsonText } from "../../functions/core/packed-json";
import { UNPUBLISHED_TYPES_ENV } from "../../functions/core/relay";
import { taskProjectionModule } from "../../functions/roles/task-projection/index";
import { defineTopology, groupOf } from "../../lib/infra/topology";
import * as z from "../../schemas/zod";
import {
  allowedOn,
  functionsOfKind,
  getAtt,
  ofGroup,
  type Resource,
  resources,
  statementsOf,
  synthesizeStack,
} from "./synth";

/**
 * `delivery: "relay"`: the relay sends a group's stored events to its FIFO queue itself; the
 * group's rule, buffer and dispatch function carry the rest, leaving out the relay's source.
 */
const { template } = synthesizeStack();
const [relay] = functionsOfKind(template, "relay");
if (!relay) throw new Error("the stack has no relay");
const relayEnv = (relay.Properties.Environment as { Variables: Record<string, string> }).Variables;
const read = <T extends z.ZodMiniType>(schema: T, name: string) =>
  packedJsonText(schema, name).parse(relayEnv[name]) as z.output<T>;
const direct = read(
  z.array(
    z.object({
      group: z.string(),
      queue: z.string(),
      tenantConcurrency: z.optional(z.number()),
      rules: z.record(z.string(), z.unknown()),
    }),
  ),
  DIRECT_GROUPS_ENV,
) as DirectGroup[];
const unpublished = new Set(read(z.array(z.string()), UNPUBLISHED_TYPES_ENV));
/** The customer-support groups and the refund review: tenant-laned, delivered by the relay. */
const SUPPORT_GROUPS = [
  "conversation",
  "router",
  "order-lookup",
  "reply-generation",
  "sender",
  "refund-review",
];

type Pattern = { source?: unknown; "detail-type"?: string[] };
const rulesOf = (group: string) =>
  ofGroup(template, "AWS::Events::Rule", group).map(
    (rule) => rule.Properties.EventPattern as Pattern,
  );
const fifoQueueOf = (group: string): Resource => {
  const [queue] = ofGroup(template, "AWS::SQS::Queue", group).filter(
    (q) => q.Properties.QueueName === `agentbus-dev-${group}.fifo`,
  );
  if (!queue) throw new Error(`no FIFO queue of ${group}`);
  return queue;
};

describe("relay delivery in the reference stack", () => {
  it("is every FIFO group's but the task projection's (replayed from the archive)", () => {
    expect(direct.map((g) => g.group).sort()).toEqual(
      [
        ...["orchestrator", "topic-selection", "fact-check", "writing", "review"],
        ...SUPPORT_GROUPS,
      ].sort(),
    );
  });

  it("carries each group's tenant lanes, as its dispatch function has them, and none for the others", () => {
    const dispatchLanes = new Map(
      functionsOfKind(template, "dispatch").map((f) => [
        f.Metadata["agentbus:group"] as string,
        (f.Properties.Environment as { Variables: Record<string, string> }).Variables
          .TENANT_CONCURRENCY,
      ]),
    );
    for (const group of direct) {
      const lanes = group.tenantConcurrency;
      expect([group.group, lanes === undefined ? undefined : String(lanes)]).toEqual([
        group.group,
        dispatchLanes.get(group.group),
      ]);
    }
    for (const name of SUPPORT_GROUPS)
      expect(direct.find((g) => g.group === name)?.tenantConcurrency, name).toBe(2);
    expect(direct.find((g) => g.group === "orchestrator")?.tenantConcurrency).toBeUndefined();
  });

  it("names each group's FIFO queue and its rules' patterns but their source", () => {
    for (const group of direct) {
      expect(fifoQueueOf(group.group).Properties.QueueName).toBe(group.queue);
      const patterns = rulesOf(group.group);
      expect(patterns.length, group.group).toBe(Object.keys(group.rules).length);
      for (const pattern of patterns) {
        const { source: _, ...rest } = pattern;
        expect(Object.values(group.rules), group.group).toContainEqual(rest);
      }
    }
    expect(relayEnv[DIRECT_GROUPS_ENV]?.startsWith(PACKED_JSON_MARKER)).toBe(true);
  });

  it("keeps the rule of a relay group for every source but the relay's, and the others' for agentbus sources", () => {
    for (const pattern of rulesOf("orchestrator"))
      expect(pattern.source).toEqual([{ "anything-but": ["agentbus.relay"] }]);
    for (const pattern of rulesOf("router"))
      expect(pattern.source).toEqual([{ "anything-but": ["agentbus.relay"] }]);
    for (const pattern of rulesOf("task-projection"))
      expect(pattern.source).toEqual([{ prefix: "agentbus" }]);
    expect(
      functionsOfKind(template, "dispatch").map((f) => f.Metadata["agentbus:group"]),
    ).toContain("orchestrator");
  });

  it("lets the relay send to exactly the relay groups' FIFO queues and its failure queue", () => {
    const statements = statementsOf(template, relay);
    const sendable = resources(template, "AWS::SQS::Queue").filter((q) =>
      allowedOn(statements, getAtt(q.id, "Arn")).has("sqs:SendMessage"),
    );
    const failureQueue = relayEnv.RELAY_FAILURE_QUEUE_URL as unknown as { Ref: string };
    expect(sendable.map((q) => q.Properties.QueueName ?? q.id).sort()).toEqual(
      [...direct.map((g) => g.queue), failureQueue.Ref].sort(),
    );
  });

  it("leaves unpublished the stored types only relay groups take, and publishes the others", () => {
    expect(unpublished.has("topic_selection.requested")).toBe(true);
    // The task projection, delivered by its dispatch function, takes the task events.
    expect(unpublished.has("task.accepted")).toBe(false);
    // The task projection is delivered by its dispatch function: what it takes stays on the bus.
    for (const type of rulesOf("task-projection").flatMap((p) => p["detail-type"] ?? []))
      expect(unpublished.has(type), type).toBe(false);
  });
});

describe("relay delivery's limits", () => {
  const relayed = (settings: object) =>
    defineTopology({
      topics: ["commands", "events", "audit"],
      groups: [{ ...groupOf(taskProjectionModule), delivery: "relay", ...settings }],
    });

  it("takes tenant lanes, which it computes as the dispatch function does", () => {
    const { template: laned } = synthesizeStack({
      topology: relayed({ maxConcurrency: 3, tenantConcurrency: 2 }),
    });
    const [lanedRelay] = functionsOfKind(laned, "relay");
    if (!lanedRelay) throw new Error("the stack has no relay");
    const env = (lanedRelay.Properties.Environment as { Variables: Record<string, string> })
      .Variables;
    const groups = packedJsonText(
      z.array(z.object({ group: z.string(), tenantConcurrency: z.optional(z.number()) })),
      DIRECT_GROUPS_ENV,
    ).parse(env[DIRECT_GROUPS_ENV]);
    expect(groups).toEqual([{ group: "task-projection", tenantConcurrency: 2 }]);
  });

  it("refuses a delivery batching window, which only a dispatch function or a pipe applies", () => {
    expect(() =>
      synthesizeStack({ topology: relayed({ deliveryBatchingWindow: Duration.seconds(2) }) }),
    ).toThrow(/deliveryBatchingWindow 2 seconds needs delivery "dispatch-function" or "pipe"/);
  });

  it("refuses an unordered group", () => {
    expect(() => relayed({ ordering: "none" })).toThrow(/delivery "relay" needs ordering "fifo"/);
  });
});
