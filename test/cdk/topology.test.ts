import { join } from "node:path";
import { Duration } from "aws-cdk-lib";
import { describe, expect, it } from "vitest";
import { audit } from "../../functions/roles/audit/audit";
import { taskProjection } from "../../functions/roles/task-projection/task-projection";
import { absoluteEntry } from "../../lib/infra/handler-entry";
import { PACKAGE_ROOT } from "../../lib/infra/package-root";
import { topology } from "../../lib/infra/project";
import {
  defineTopology,
  type GroupDeclaration,
  type TopologyContext,
  type TopologyDeclaration,
  topologyProblems,
} from "../../lib/infra/topology";
import { registry } from "../../schemas";

/**
 * The topology declaration is validated by pure functions: every test here runs without
 * synthesizing, against a fixed context (event types and their topics, which handler files exist).
 */
const context: TopologyContext = {
  eventTypes: [
    { type: "task.accepted", topic: "events" },
    { type: "plan.created", topic: "events" },
    { type: "task.cancel.requested", topic: "commands" },
  ],
  handlerExists: (path) => path.endsWith("functions/handlers/worker.ts"),
};

const group = (overrides: Partial<GroupDeclaration> = {}): GroupDeclaration => ({
  name: "worker",
  role: { group: "worker", subscriptions: ["task.accepted"] },
  handler: "functions/handlers/worker.ts",
  ...overrides,
});

const declaration = (
  groups: GroupDeclaration[] = [group()],
  topics: TopologyDeclaration["topics"] = ["events"],
): TopologyDeclaration => ({ topics, groups });

const problems = (d: TopologyDeclaration) => topologyProblems(d, context);

describe("topology validation: each bad declaration is named", () => {
  it("accepts a sound declaration", () => {
    expect(problems(declaration())).toEqual([]);
  });

  it("an event type that is not in the registry", () => {
    const bad = group({ role: { group: "worker", subscriptions: ["task.nope"] } });
    expect(problems(declaration([bad]))).toEqual([
      'group "worker": event type "task.nope" is not in the registry',
    ]);
  });

  it("a subscription whose topic is not declared", () => {
    const bad = group({ role: { group: "worker", subscriptions: ["task.cancel.requested"] } });
    expect(problems(declaration([bad])).join("\n")).toMatch(
      /event type "task\.cancel\.requested" is published on topic "commands", which is not declared/,
    );
  });

  it("an unknown topic", () => {
    expect(problems(declaration([group()], ["events", "gossip" as "events"])).join("\n")).toMatch(
      /topic "gossip" is not one of "commands", "events", "audit"/,
    );
  });

  it("duplicate group names", () => {
    expect(problems(declaration([group(), group()])).join("\n")).toMatch(
      /group name "worker" is declared twice/,
    );
  });

  it("a group name that is not kebab-case", () => {
    const bad = group({
      name: "Worker_1",
      role: { group: "Worker_1", subscriptions: ["task.accepted"] },
    });
    expect(problems(declaration([bad])).join("\n")).toMatch(
      /group name "Worker_1" must be kebab-case/,
    );
  });

  it("a group name that differs from the role's group", () => {
    const bad = group({ role: { group: "someone-else", subscriptions: ["task.accepted"] } });
    expect(problems(declaration([bad])).join("\n")).toMatch(
      /role group "someone-else" differs from the group name "worker"/,
    );
  });

  it("a FIFO batch size outside 1..10", () => {
    expect(problems(declaration([group({ batchSize: 11 })])).join("\n")).toMatch(
      /batchSize is 11, must be an integer from 1 to 10/,
    );
    expect(problems(declaration([group({ batchSize: 0 })])).join("\n")).toMatch(/batchSize is 0/);
  });

  it("a standard batch size outside 1..10000", () => {
    expect(problems(declaration([group({ ordering: "none", batchSize: 10_000 })]))).toEqual([]);
    expect(
      problems(declaration([group({ ordering: "none", batchSize: 10_001 })])).join("\n"),
    ).toMatch(/batchSize is 10001, must be an integer from 1 to 10000/);
  });

  it("a concurrency outside 2..1000", () => {
    expect(problems(declaration([group({ maxConcurrency: 1 })])).join("\n")).toMatch(
      /maxConcurrency is 1, must be an integer from 2 to 1000/,
    );
    expect(problems(declaration([group({ maxConcurrency: 1001 })])).join("\n")).toMatch(
      /maxConcurrency is 1001/,
    );
  });

  it("a visibility timeout under 6x the function timeout, naming both", () => {
    const bad = group({
      functionTimeout: Duration.seconds(60),
      visibilityTimeout: Duration.seconds(300),
    });
    expect(problems(declaration([bad])).join("\n")).toMatch(
      /visibilityTimeout 300s is under 6x functionTimeout 60s/,
    );
  });

  it("an unknown order key", () => {
    const bad = group({ orderKey: "conversation_id" as "order_key" });
    expect(problems(declaration([bad])).join("\n")).toMatch(
      /orderKey "conversation_id" is not supported/,
    );
  });

  it("an unknown ordering or delivery", () => {
    const bad = group({
      ordering: "total" as "fifo",
      delivery: "carrier-pigeon" as "pipe",
    });
    const text = problems(declaration([bad])).join("\n");
    expect(text).toMatch(/ordering "total" is not supported/);
    expect(text).toMatch(/delivery "carrier-pigeon" is not supported/);
  });

  it("a pipe delivery for a group without ordering", () => {
    const bad = group({ ordering: "none", delivery: "pipe" });
    expect(problems(declaration([bad])).join("\n")).toMatch(
      /delivery "pipe" needs ordering "fifo"/,
    );
  });

  it("a tenant concurrency that leaves no invocation to other tenants, or is not a whole number", () => {
    expect(problems(declaration([group({ tenantConcurrency: 2 })])).join("\n")).toMatch(
      /tenantConcurrency is 2, must be an integer from 1 to 1 \(below maxConcurrency 2/,
    );
    expect(
      problems(declaration([group({ maxConcurrency: 4, tenantConcurrency: 1.5 })])).join("\n"),
    ).toMatch(/tenantConcurrency is 1.5, must be an integer from 1 to 3/);
    expect(problems(declaration([group({ maxConcurrency: 4, tenantConcurrency: 3 })]))).toEqual([]);
  });

  it("a tenant concurrency on a group without order or delivered by a pipe", () => {
    expect(
      problems(
        declaration([group({ ordering: "none", maxConcurrency: 3, tenantConcurrency: 1 })]),
      ).join("\n"),
    ).toMatch(/tenantConcurrency 1 needs ordering "fifo"/);
    expect(
      problems(
        declaration([group({ delivery: "pipe", maxConcurrency: 3, tenantConcurrency: 1 })]),
      ).join("\n"),
    ).toMatch(/tenantConcurrency 1 needs delivery "dispatch-function"/);
  });

  it("a handler file that does not exist", () => {
    const bad = group({ handler: "functions/handlers/nobody.ts" });
    expect(problems(declaration([bad])).join("\n")).toMatch(
      /handler entry "functions\/handlers\/nobody\.ts" does not exist/,
    );
  });

  it("a handler path outside the repository", () => {
    const bad = group({ handler: "../elsewhere/worker.ts" });
    expect(problems(declaration([bad])).join("\n")).toMatch(
      /"\.\.\/elsewhere\/worker\.ts" must be/,
    );
  });

  it("reports every problem at once, each naming its group", () => {
    const bad = group({ batchSize: 11, maxConcurrency: 1 });
    expect(problems(declaration([bad]))).toEqual([
      expect.stringMatching(/^group "worker": batchSize is 11/),
      expect.stringMatching(/^group "worker": maxConcurrency is 1/),
    ]);
  });

  it("defineTopology throws with every problem in its message", () => {
    const bad = group({ batchSize: 11, handler: "functions/handlers/nobody.ts" });
    expect(() => defineTopology(declaration([bad]), context)).toThrow(
      /invalid topology:[\s\S]*batchSize is 11[\s\S]*nobody\.ts/,
    );
  });
});

describe("defineTopology", () => {
  const defined = defineTopology(
    declaration([
      group({ role: { group: "worker", subscriptions: ["plan.created", "task.accepted"] } }),
    ]),
    context,
  );
  const [worker] = defined.groups;

  it("applies the defaults: FIFO by order_key through the dispatch function", () => {
    expect(worker).toMatchObject({
      ordering: "fifo",
      orderKey: "order_key",
      delivery: "dispatch-function",
      batchSize: 10,
      maxConcurrency: 2,
      maxReceiveCount: 5,
    });
    expect(worker?.functionTimeout.toSeconds()).toBe(30);
    expect(worker?.visibilityTimeout.toSeconds()).toBe(180);
  });

  it("derives the default visibility timeout from the function timeout", () => {
    const [slow] = defineTopology(
      declaration([group({ functionTimeout: Duration.minutes(2) })]),
      context,
    ).groups;
    expect(slow?.visibilityTimeout.toSeconds()).toBe(720);
  });

  it("splits the role's subscriptions by topic", () => {
    expect(worker?.subscriptions).toEqual([
      { topic: "events", eventTypes: ["plan.created", "task.accepted"] },
    ]);
  });
});

describe("the project's topology", () => {
  it("declares the commands, events and audit topics", () => {
    expect(topology.topics).toEqual(["commands", "events", "audit"]);
  });

  it("the task projection is a FIFO group of its role with its handler", () => {
    const projection = topology.groups.find((g) => g.name === "task-projection");
    expect(projection).toMatchObject({ role: taskProjection, ordering: "fifo" });
    expect(absoluteEntry(projection?.handler ?? "")).toBe(
      join(PACKAGE_ROOT, "functions/roles/task-projection/handler.ts"),
    );
  });

  it("the audit group needs no order and subscribes to every registered event type but heartbeats", () => {
    const group = topology.groups.find((g) => g.name === "audit");
    expect(group).toMatchObject({ role: audit, ordering: "none" });
    expect(absoluteEntry(group?.handler ?? "")).toBe(
      join(PACKAGE_ROOT, "functions/roles/audit/handler.ts"),
    );
    const subscribed = group?.subscriptions.flatMap((s) => s.eventTypes) ?? [];
    const notBeats = registry.definitions().filter((d) => !d.heartbeat);
    expect(new Set(subscribed)).toEqual(new Set(notBeats.map((d) => d.type)));
    expect(subscribed).not.toContain("node.heartbeat");
    expect(subscribed).not.toContain("node.started");
  });
});
