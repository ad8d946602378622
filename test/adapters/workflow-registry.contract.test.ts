import {
  CreateTableCommand,
  DeleteTableCommand,
  DynamoDBClient,
  waitUntilTableExists,
} from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TABLES } from "../../functions/adapters/dynamodb/layouts";
import { DynamoWorkflowRegistry } from "../../functions/adapters/dynamodb/workflow-registry";
import type { WorkflowDefinition } from "../../functions/core/dag/definition";
import { defineWorkflow } from "../../functions/core/dag/graph";
import {
  EVERY_TENANT,
  InMemoryWorkflowRegistry,
  type WorkflowRegistry,
} from "../../functions/core/dag/registry";
import { fromSdk } from "../../lib/operator/from-sdk";
import { emulator } from "../support/aws";
import { newUlid } from "../support/factories";
import { createTableInput } from "../support/tables";

/**
 * The workflow registry's contract, run against the in-memory twin and the state table on moto:
 * a version is written once, a scope's list holds every version put, concurrent puts of one
 * scope all land, and of one version exactly one does; a tenant's plan roles are its own.
 */

const tableName = `registry-state-${newUlid().toLowerCase()}`;
let client: DynamoDBClient;

beforeAll(async () => {
  client = new DynamoDBClient(emulator());
  await client.send(new CreateTableCommand(createTableInput(tableName, TABLES.state)));
  await waitUntilTableExists({ client, maxWaitTime: 30, minDelay: 1 }, { TableName: tableName });
});

afterAll(async () => {
  await client.send(new DeleteTableCommand({ TableName: tableName })).catch(() => undefined);
  client.destroy();
});

const definition = (name: string, version: number, role = "writing"): WorkflowDefinition =>
  defineWorkflow({ name, version, nodes: [{ id: "only", role }] });

const registries: [string, () => WorkflowRegistry][] = [
  ["InMemoryWorkflowRegistry", () => new InMemoryWorkflowRegistry()],
  [
    "DynamoWorkflowRegistry",
    () => new DynamoWorkflowRegistry({ client: fromSdk(client), tableName }),
  ],
];

describe.each(registries)("%s", (_name, make) => {
  it("writes a version once and reads back what was written first", async () => {
    const registry = make();
    const name = `w-${newUlid().toLowerCase()}`;
    expect(await registry.create(EVERY_TENANT, definition(name, 1))).toBe(true);
    expect(await registry.create(EVERY_TENANT, definition(name, 1, "review"))).toBe(false);
    const stored = (await registry.get(EVERY_TENANT, name, 1)) as WorkflowDefinition;
    expect(stored.nodes[0]?.role).toBe("writing");
    expect(stored).toEqual(JSON.parse(JSON.stringify(definition(name, 1))));
    expect(await registry.get(EVERY_TENANT, name, 2)).toBeUndefined();
    expect(await registry.get("acme", name, 1)).toBeUndefined();
  });

  it("lists each scope's names and versions apart, ascending", async () => {
    const registry = make();
    const scope = `t${newUlid().toLowerCase().slice(-10)}`;
    await registry.create(scope, definition("zeta", 3));
    await registry.create(scope, definition("alpha", 2));
    await registry.create(scope, definition("zeta", 1));
    expect(await registry.list(scope)).toEqual([
      { name: "alpha", versions: [2] },
      { name: "zeta", versions: [1, 3] },
    ]);
    expect(await registry.list(`${scope}x`)).toEqual([]);
  });

  it("names every scope a workflow was put in, once each, and no scope only a policy was set for", async () => {
    const registry = make();
    const tenant = `s${newUlid().toLowerCase().slice(-10)}`;
    const other = `${tenant}x`;
    await registry.create(tenant, definition("one", 1));
    await registry.create(tenant, definition("two", 1));
    await registry.create(other, definition("one", 1));
    await registry.allowRoles(`${tenant}p`, ["writing"]);
    const scopes = await registry.scopes();
    expect(scopes.filter((s) => s.startsWith(tenant))).toEqual([tenant, other]);
    expect([...scopes].sort()).toEqual(scopes);
  });

  it("keeps each tenant's plan roles apart: none until set, replaced whole, empty kept empty", async () => {
    const registry = make();
    const tenant = `t${newUlid().toLowerCase().slice(-10)}`;
    expect(await registry.allowedRoles(tenant)).toBeUndefined();
    await registry.allowRoles(tenant, ["echo", "writing"]);
    expect(await registry.allowedRoles(tenant)).toEqual(["echo", "writing"]);
    expect(await registry.allowedRoles(`${tenant}x`)).toBeUndefined();
    await registry.allowRoles(tenant, []);
    expect(await registry.allowedRoles(tenant)).toEqual([]);
    // A policy is no registered workflow.
    expect(await registry.list(tenant)).toEqual([]);
  });

  it("keeps every one of concurrent puts to one scope, and exactly one of the same version", async () => {
    const registry = make();
    const scope = `c${newUlid().toLowerCase().slice(-10)}`;
    const created = await Promise.all(
      [1, 2, 3, 4].map((v) => registry.create(scope, definition("many", v))),
    );
    expect(created).toEqual([true, true, true, true]);
    const same = await Promise.all(
      ["writing", "review", "fact-check"].map((role) =>
        registry.create(scope, definition("once", 1, role)),
      ),
    );
    expect(same.filter(Boolean)).toHaveLength(1);
    expect(await registry.list(scope)).toEqual([
      { name: "many", versions: [1, 2, 3, 4] },
      { name: "once", versions: [1] },
    ]);
  });
});
