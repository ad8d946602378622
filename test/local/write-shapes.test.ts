import { describe, expect, it } from "vitest";
import { itemsPhrase, keyKind, writeShapes } from "../../bin/bench/writes";
import type { MeteredWrite } from "../../lib/dev/metering/metering";

/** The writes bench (`npm run bench -- writes`) groups a flow's writes by what they wrote. */

const tableOf = (physical: string) =>
  ({ "t-state": "state", "t-events": "events", "t-inbox": "inbox" })[physical] ?? physical;

const write = (
  scope: string | undefined,
  operation: string,
  items: [string, string, number][],
  writeUnits: number,
  indexWriteUnits = 0,
): MeteredWrite => ({
  scope,
  operation,
  items: items.map(([table, key, bytes]) => ({ table, key, bytes })),
  writeUnits,
  indexWriteUnits,
});

describe("writes bench", () => {
  it("names an item by its key's kind, ids left out, an inbox-table row with its group", () => {
    expect(keyKind("dag_run#run_01ABC")).toBe("dag_run");
    expect(keyKind("checkpoint#fact-check#dag_run#run_01ABC")).toBe(
      "checkpoint#fact-check#dag_run",
    );
    expect(keyKind("inbox#audit#01ABC")).toBe("inbox#audit");
    expect(keyKind("?")).toBe("?");
  });

  it("says what a write wrote in order, runs of one kind counted", () => {
    const commit = write(
      "orchestrator",
      "TransactWriteItems",
      [
        ["t-state", "dag_run#run_1", 1300],
        ["t-events", "dag_run#run_1", 800],
        ["t-events", "dag_run#run_1", 810],
        ["t-inbox", "inbox#orchestrator#01X", 200],
      ],
      12,
    );
    expect(itemsPhrase(commit, tableOf)).toBe(
      "state:dag_run + events:dag_run ×2 + inbox:inbox#orchestrator",
    );
  });

  it("groups writes by scope, operation and items, dearest first within a scope", () => {
    const shapes = writeShapes(
      [
        write("orchestrator", "PutItem", [["t-state", "dag_run#run_1", 900]], 1),
        write("orchestrator", "PutItem", [["t-state", "dag_run#run_1", 1900]], 2, 2),
        write("fact-check", "UpdateItem", [["t-state", "model_spend#default#d", 103]], 1),
        write(
          "orchestrator",
          "TransactWriteItems",
          [
            ["t-state", "dag_run#run_1", 2100],
            ["t-events", "dag_run#run_1", 700],
          ],
          10,
          3,
        ),
        { ...write(undefined, "PutItem", [["t-state", "dag_run#run_2", 100]], 1), failed: true },
      ],
      tableOf,
    );
    expect(shapes).toEqual([
      {
        scope: "(none)",
        operation: "PutItem (failed)",
        items: "state:dag_run",
        writes: 1,
        writeUnits: 1,
        indexWriteUnits: 0,
        largestBytes: 100,
      },
      {
        scope: "fact-check",
        operation: "UpdateItem",
        items: "state:model_spend",
        writes: 1,
        writeUnits: 1,
        indexWriteUnits: 0,
        largestBytes: 103,
      },
      {
        scope: "orchestrator",
        operation: "TransactWriteItems",
        items: "state:dag_run + events:dag_run",
        writes: 1,
        writeUnits: 10,
        indexWriteUnits: 3,
        largestBytes: 2100,
      },
      {
        scope: "orchestrator",
        operation: "PutItem",
        items: "state:dag_run",
        writes: 2,
        writeUnits: 3,
        indexWriteUnits: 2,
        largestBytes: 1900,
      },
    ]);
  });
});
