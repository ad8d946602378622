import { Template } from "aws-cdk-lib/assertions";
import { describe, expect, it } from "vitest";
import { parseTraceIndexUpgrade, TRACE_INDEX_UPGRADE_KEY } from "../../lib/infra/agentbus-stack";
import {
  AgentBusTables,
  TRACE_INDEX_UPGRADE_STAGES,
  type TraceIndexUpgrade,
  traceIndexLayouts,
  traceIndexNames,
} from "../../lib/infra/constructs/tables";
import { LEGACY_EVENTS_LAYOUT, LEGACY_INBOX_LAYOUT } from "../support/tables";
import { asGsi, changes, type Gsi, names } from "./gsi";
import { resources, synthesizeStack, testStack } from "./synth";

/**
 * `agentbus:traceIndexUpgrade`: a stack deployed with the legacy trace indexes (by-correlation,
 * by-task, projecting all, in the events and the inbox table, and the events table's by-hour)
 * reaches the current ones (trace-by-correlation, task-roots, and the events table's by-event-id,
 * trace-by-digest and digest-task-roots) in eight deploys, each creating or deleting one GSI of a
 * table at most, the most CloudFormation does to a table in one update.
 */

type TraceTable = "events" | "inbox";
const TABLE_IDS: Record<TraceTable, string> = { events: "TablesEvents", inbox: "TablesInbox" };

/** A table's GSIs as the tables construct synthesizes them at a stage. */
function synthesizedAt(table: TraceTable, stage?: TraceIndexUpgrade): Gsi[] {
  const stack = testStack();
  new AgentBusTables(stack, "Tables", { traceIndexUpgrade: stage });
  const [found] = resources(Template.fromStack(stack), "AWS::DynamoDB::Table", (r) =>
    r.id.startsWith(TABLE_IDS[table]),
  );
  return (found?.Properties.GlobalSecondaryIndexes ?? []) as Gsi[];
}

const LEGACY: Record<TraceTable, Gsi[]> = {
  events: (LEGACY_EVENTS_LAYOUT.indexes ?? []).map(asGsi),
  inbox: (LEGACY_INBOX_LAYOUT.indexes ?? []).map(asGsi),
};

describe("the trace indexes while a stack upgrades", () => {
  it("each stage has its index set: the legacy ones it keeps, then the current ones", () => {
    expect(names(LEGACY.events)).toEqual([
      "by-correlation",
      "by-task",
      "by-hour",
      "by-stream-type",
    ]);
    expect(names(synthesizedAt("events", 1))).toEqual([
      "by-correlation",
      "by-task",
      "by-hour",
      "trace-by-correlation",
      "by-stream-type",
    ]);
    expect(names(synthesizedAt("events", 3))).toEqual([
      "by-task",
      "by-hour",
      "trace-by-correlation",
      "task-roots",
      "by-stream-type",
    ]);
    expect(names(synthesizedAt("events", 4))).toEqual([
      "by-hour",
      "trace-by-correlation",
      "task-roots",
      "by-stream-type",
    ]);
    expect(names(synthesizedAt("events", 5))).toEqual([
      "trace-by-correlation",
      "task-roots",
      "by-stream-type",
    ]);
    expect(names(synthesizedAt("events", 6))).toEqual([
      "trace-by-correlation",
      "task-roots",
      "by-stream-type",
      "by-event-id",
    ]);
    // A stack deployed with by-event-id starts here: + trace-by-digest, then + digest-task-roots.
    expect(names(synthesizedAt("events", 7))).toEqual([
      "trace-by-correlation",
      "task-roots",
      "by-stream-type",
      "by-event-id",
      "trace-by-digest",
    ]);
    expect(names(synthesizedAt("events"))).toEqual([
      "trace-by-correlation",
      "task-roots",
      "by-stream-type",
      "by-event-id",
      "trace-by-digest",
      "digest-task-roots",
    ]);
    expect(names(synthesizedAt("inbox", 7))).toEqual(["trace-by-correlation", "task-roots"]);
    expect(names(LEGACY.inbox)).toEqual(["by-correlation", "by-task"]);
    expect(names(synthesizedAt("inbox", 2))).toEqual([
      "by-correlation",
      "by-task",
      "trace-by-correlation",
      "task-roots",
    ]);
    expect(names(synthesizedAt("inbox"))).toEqual(["trace-by-correlation", "task-roots"]);
  });

  it("the template declares each index as its layout does", () => {
    for (const table of ["events", "inbox"] as const)
      for (const stage of [...TRACE_INDEX_UPGRADE_STAGES, undefined])
        expect(synthesizedAt(table, stage), `${table} stage ${stage}`).toEqual(
          traceIndexLayouts(table, stage).map(asGsi),
        );
  });

  it("each deploy of the sequence creates or deletes one index of a table at most, and changes none in place", () => {
    const perDeploy = new Map<string, number>();
    for (const table of ["events", "inbox"] as const) {
      const sequence = [
        { deploy: "legacy", indexes: LEGACY[table] },
        ...TRACE_INDEX_UPGRADE_STAGES.map((stage) => ({
          deploy: `stage ${stage}`,
          indexes: synthesizedAt(table, stage),
        })),
        { deploy: "final", indexes: synthesizedAt(table) },
      ];
      for (const [i, step] of sequence.slice(1).entries()) {
        const previous = sequence[i] as (typeof sequence)[number];
        const { created, deleted, changed } = changes(previous.indexes, step.indexes);
        const what = `${table}: ${previous.deploy} -> ${step.deploy}`;
        expect(created.length + deleted.length, what).toBeLessThanOrEqual(1);
        expect(changed, what).toEqual([]);
        const count = created.length + deleted.length;
        perDeploy.set(step.deploy, (perDeploy.get(step.deploy) ?? 0) + count);
      }
      // Deploying the final layout on a legacy stack is several creates and deletes: refused.
      const skipped = changes(LEGACY[table], synthesizedAt(table));
      expect(skipped.created, table).toEqual(
        table === "events"
          ? [
              "trace-by-correlation",
              "task-roots",
              "by-event-id",
              "trace-by-digest",
              "digest-task-roots",
            ]
          : ["trace-by-correlation", "task-roots"],
      );
      expect(skipped.deleted, table).toEqual(
        table === "events"
          ? ["by-correlation", "by-task", "by-hour"]
          : ["by-correlation", "by-task"],
      );
    }
    // The first four deploys change both tables; the last four drop by-hour from the events table
    // and add by-event-id, trace-by-digest and digest-task-roots to it.
    expect([...perDeploy]).toEqual([
      ["stage 1", 2],
      ["stage 2", 2],
      ["stage 3", 2],
      ["stage 4", 2],
      ["stage 5", 1],
      ["stage 6", 1],
      ["stage 7", 1],
      ["final", 1],
    ]);
    // A stack deployed with by-event-id (stage 6's set, the layout before digest ids) gets there
    // in two deploys: stage 7, then none.
    expect(changes(synthesizedAt("events", 6), synthesizedAt("events", 7)).created).toEqual([
      "trace-by-digest",
    ]);
    expect(changes(synthesizedAt("events", 7), synthesizedAt("events")).created).toEqual([
      "digest-task-roots",
    ]);
  });

  it("readers may query the current indexes, and at every stage the legacy ones too", () => {
    expect(traceIndexNames()).toEqual([
      "trace-by-correlation",
      "task-roots",
      "by-event-id",
      "trace-by-digest",
      "digest-task-roots",
    ]);
    for (const stage of TRACE_INDEX_UPGRADE_STAGES)
      expect(traceIndexNames(stage).sort(), `stage ${stage}`).toEqual([
        "by-correlation",
        "by-event-id",
        "by-task",
        "digest-task-roots",
        "task-roots",
        "trace-by-correlation",
        "trace-by-digest",
      ]);
    // The inbox table has none of the events table's own.
    const tables = new AgentBusTables(testStack(), "Tables", { traceIndexUpgrade: 7 });
    expect(
      tables
        .inboxIndexArns()
        .map((arn) => arn.split("/index/")[1])
        .sort(),
    ).toEqual(["by-correlation", "by-task", "task-roots", "trace-by-correlation"]);
  });

  it("takes the stage as a string (-c) or a number (cdk.json), and refuses any other value", () => {
    expect(parseTraceIndexUpgrade(undefined)).toBeUndefined();
    expect(parseTraceIndexUpgrade("1")).toBe(1);
    expect(parseTraceIndexUpgrade(3)).toBe(3);
    expect(parseTraceIndexUpgrade("7")).toBe(7);
    for (const value of ["8", "0", "", true, null])
      expect(() => parseTraceIndexUpgrade(value), JSON.stringify(value)).toThrow(
        `context agentbus:traceIndexUpgrade=${JSON.stringify(value)} is not an upgrade stage: use 1, 2, 3, 4, 5, 6, 7`,
      );
    expect(() => synthesizeStack({}, "AgentBus-trace", { [TRACE_INDEX_UPGRADE_KEY]: "8" })).toThrow(
      'context agentbus:traceIndexUpgrade="8" is not an upgrade stage',
    );
  });
});
