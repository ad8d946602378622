import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoEventStore } from "../../functions/adapters/dynamodb/event-store";
import type { TableNames } from "../../functions/adapters/dynamodb/tables";
import { listingAfter } from "../../functions/core/listing";
import type { StateSummary } from "../../functions/core/ports";
import { ManualClock } from "../../functions/core/runtime";
import { fromSdk } from "../../lib/operator/from-sdk";
import { synthesizeStack } from "../cdk/synth";
import { emulator } from "../support/aws";
import { runCli } from "../support/cli";
import { newUlid } from "../support/factories";
import { createTables, deleteTables } from "../support/tables";

/**
 * `agentbus lists runs` on moto: a stack's outputs naming tables of this test, runs of two tenants
 * and two statuses, one tenant's runs of one status paged newest first; bad options refused.
 */

let client: DynamoDBClient;
let tables: TableNames;
let outputs: string;

/** An outputs file with every output the stack has, the four tables being this test's. */
function outputsFile(): string {
  const { template } = synthesizeStack({}, "AgentBus-lists");
  const keys = Object.keys(template.toJSON().Outputs as Record<string, unknown>);
  const named: Record<string, string> = {
    StateTableName: tables.state,
    EventsTableName: tables.events,
    InboxTableName: tables.inbox,
    SideEffectsTableName: tables.sideEffects,
    Region: "us-east-1",
  };
  const file = join(mkdtempSync(join(tmpdir(), "agentbus-lists-")), "outputs.json");
  const values = keys.map((k) => [k, named[k] ?? `AgentBus-lists-${k}`]);
  writeFileSync(file, JSON.stringify({ "AgentBus-lists": Object.fromEntries(values) }));
  return file;
}

beforeAll(async () => {
  client = new DynamoDBClient(emulator());
  tables = await createTables(client, `lists-cli-${newUlid().toLowerCase()}`);
  const clock = new ManualClock("2026-12-01T10:00:00.000Z");
  const store = new DynamoEventStore({ client: fromSdk(client), tables, clock });
  // run_0..run_11: acme's the even ones, FAILED every third; a second apart.
  for (let i = 0; i < 12; i++) {
    const summary: StateSummary = {
      kind: "run",
      status: i % 3 === 0 ? "FAILED" : "RUNNING",
      ...(i % 2 === 0 ? { tenant: "acme" } : { tenant: "globex" }),
    };
    await store.commit({
      state: {
        aggregate: { type: "dag_run", id: `run_${String(i).padStart(2, "0")}` },
        expectedRevision: 0,
        next: {},
        version: 0,
        summary,
        listing: listingAfter(undefined, summary, clock.now()),
      },
    });
    clock.advance(1_000);
  }
  // conv_0..conv_3, acme's, open but conv_1: no tenant_list (only runs have one).
  for (let i = 0; i < 4; i++) {
    const summary: StateSummary = {
      kind: "conversation",
      status: i === 1 ? "closed" : "open",
      tenant: "acme",
    };
    await store.commit({
      state: {
        aggregate: { type: "conversation", id: `conv_${i}` },
        expectedRevision: 0,
        next: {},
        version: 0,
        summary,
        listing: listingAfter(undefined, summary, clock.now()),
      },
    });
    clock.advance(1_000);
  }
  outputs = outputsFile();
}, 120_000);

afterAll(async () => {
  await deleteTables(client, tables);
  client.destroy();
});

const cli = (...args: string[]) =>
  runCli(["--endpoint", emulator().endpoint, "--outputs", outputs, "lists", "runs", ...args]);

describe("agentbus lists runs", () => {
  it("pages one tenant's runs of one status newest first, the cursor on stderr or in --json", async () => {
    const first = await cli("--tenant", "acme", "--status", "RUNNING", "--limit", "2", "--json");
    expect(first.code, first.stderr).toBe(0);
    const page = JSON.parse(first.stdout) as { rows: { id: string }[]; next?: string };
    // acme's RUNNING runs: 10, 8, 4, 2.
    expect(page.rows.map((r) => r.id)).toEqual(["run_10", "run_08"]);
    expect(page.next).toEqual(expect.any(String));
    const second = await cli("--tenant", "acme", "--status", "RUNNING", "--page", page.next ?? "");
    expect(second.code, second.stderr).toBe(0);
    expect(
      second.stdout
        .trim()
        .split("\n")
        .map((l) => l.split(/\s+/)[0]),
    ).toEqual(["run_04", "run_02"]);
    expect(second.stdout).toContain("RUNNING  acme  2026-12-01T10:00:04.000Z");
    expect(second.stderr).not.toContain("next page");
  });

  it("filters by status alone, and by when the runs were listed", async () => {
    const failed = await cli("--status", "FAILED", "--json");
    const ids = (stdout: string) =>
      (JSON.parse(stdout) as { rows: { id: string }[] }).rows.map((r) => r.id);
    expect(ids(failed.stdout)).toEqual(["run_09", "run_06", "run_03", "run_00"]);
    const window = await cli(
      "--tenant",
      "globex",
      "--since",
      "2026-12-01T10:00:03Z",
      "--before",
      "2026-12-01T11:00:07+01:00",
      "--json",
    );
    expect(ids(window.stdout)).toEqual(["run_05", "run_03"]);
  });

  it("lists one tenant's conversations of one status from the kind's list", async () => {
    const result = await runCli([
      "--endpoint",
      emulator().endpoint,
      "--outputs",
      outputs,
      "lists",
      "conversations",
      "--tenant",
      "acme",
      "--status",
      "open",
      "--json",
    ]);
    expect(result.code, result.stderr).toBe(0);
    const rows = (JSON.parse(result.stdout) as { rows: { id: string; status: string }[] }).rows;
    expect(rows.map((r) => [r.id, r.status])).toEqual([
      ["conv_3", "open"],
      ["conv_2", "open"],
      ["conv_0", "open"],
    ]);
  });

  it("refuses a bad tenant, status, time, limit or cursor with exit code 2, reading nothing", async () => {
    for (const [args, named] of [
      [["--tenant", "ACME"], "--tenant"],
      [["--status", "a b"], "--status"],
      [["--since", "yesterday"], "--since"],
      [["--since", "2026-12-02", "--before", "2026-12-01"], "--since"],
      [["--limit", "0"], "--limit"],
      [["--page", "not-a-cursor"], "--page"],
    ] as const) {
      const result = await cli(...args);
      expect(result.code, args.join(" ")).toBe(2);
      expect(result.stderr).toContain(named);
      expect(result.stdout).toBe("");
    }
  });
});
