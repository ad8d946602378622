import { PutItemCommand } from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stateItem } from "../../functions/adapters/dynamodb/items";
import { type LocalEnvironment, startLocal } from "../../lib/local/environment";
import { waitUntil } from "../../lib/local/scenario/support";
import type { Envelope } from "../../schemas";
import { emulator } from "../support/aws";
import { localCli } from "../support/cli";
import { taskStream } from "../support/factories";

const STAGE = `rb-${Date.now().toString(36)}`;

/**
 * `agentbus rebuild` and `agentbus check` on the local stack: task streams committed while the
 * relay is held back (the projection never saw them, as a projection deployed later would not);
 * the rebuild feeds them from the event store, then the relay delivers them live and they are
 * duplicates; the check finds no drift until a state is changed behind the projection's back.
 */
describe("agentbus rebuild and check", () => {
  let env: LocalEnvironment;
  let streams: Envelope[][];

  const cli = localCli(() => env, STAGE);

  const view = async (taskId: string) =>
    (await env.store.load({ state: { type: "task_view", id: taskId } })).state;

  beforeAll(async () => {
    env = await startLocal({ endpoint: emulator().endpoint, stage: STAGE });
    env.runtime.pauseStream();
    streams = [taskStream(1, 4), taskStream(1, 3), taskStream(1, 2)];
    for (const events of streams) await env.store.commit({ append: events });
  }, 240_000);

  afterAll(async () => {
    await env?.stop();
  });

  it("feeds every task stream to the projection, then live delivery finds them applied", async () => {
    const result = await cli("rebuild", "task-projection", "--type", "task");
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    // Other tests' streams may share the emulator's tables only under other stages: these are ours.
    expect(result.stdout).toMatch(
      /3 stream\(s\), 9 event\(s\): 9 applied, 0 already applied, 0 discarded — done/,
    );
    for (const events of streams) {
      const last = events.at(-1) as Envelope;
      expect((await view(last.aggregate.id))?.data).toMatchObject({
        version: last.aggregate.version,
      });
    }
    env.runtime.resumeStream();
    // The relay now delivers the 9 events live: each is a duplicate for the projection.
    await waitUntil("the 9 live deliveries", async () =>
      env.observations.count("task-projection", "duplicate") >= 9 ? true : undefined,
    );
    await env.runtime.idle();
    expect(env.observations.count("task-projection", "duplicate")).toBe(9);
    expect(env.observations.count("task-projection", "applied")).toBe(0);
    const again = await cli("rebuild", "task-projection", "--type", "task", "--restart");
    expect(again.stdout).toMatch(/0 applied, 9 already applied/);
  }, 240_000);

  it("check finds no drift, then the one state changed behind the projection's back", async () => {
    const clean = await cli("check", "task-projection", "--type", "task");
    expect(clean.code).toBe(0);
    expect(clean.stdout).toContain("3 stream(s), 3 state(s), 0 drifted");
    const id = streams[1]?.[0]?.aggregate.id ?? "";
    const stored = await view(id);
    await env.clients.dynamodb.send(
      new PutItemCommand({
        TableName: env.names.tables.state,
        Item: marshall(
          stateItem(
            { type: "task_view", id },
            (stored?.revision ?? 0) + 1,
            stored?.version ?? 0,
            { ...(stored?.data as object), status: "lost" },
            new Date(),
          ),
          { removeUndefinedValues: true },
        ),
      }),
    );
    const drifted = await cli("check", "task-projection", "--type", "task");
    expect(drifted.code).toBe(1);
    expect(drifted.stdout).toContain("1 drifted");
    expect(drifted.stdout).toContain(`task_view/${id}`);
  }, 240_000);

  it("refuses a group it cannot run and a bad type with exit code 2", async () => {
    const noGroup = await cli("rebuild", "no-such-group", "--type", "task");
    expect(noGroup.code).toBe(2);
    const badType = await cli("check", "task-projection", "--type", "Not A Type");
    expect(badType.code).toBe(2);
  }, 240_000);
});
