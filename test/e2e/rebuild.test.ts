import { PutItemCommand } from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stateItem } from "../../functions/adapters/dynamodb/items";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { putOnBus } from "../../lib/dev/local/put-on-bus";
import {
  customerMessage,
  loadConversation,
  waitUntil,
} from "../../lib/dev/local/scenario/customer-support";
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

  /** The conversation view's stream types: a view is fed by all of them, so they are folded together. */
  const VIEW_TYPES = "conversation,support_route,order_lookup,reply,delivery";

  it("check runs for every group that is a fold after a live conversation, and refuses the rest", async () => {
    const conv = `conv_${STAGE.replace(/-/g, "")}`;
    const message = customerMessage(conv, "cust_alice", "where is my order 123?");
    await putOnBus(env, "events", [message]);
    await waitUntil(
      "the turn delivered",
      async () =>
        (await loadConversation(env, conv))?.turns[message.task_id]?.status === "delivered"
          ? true
          : undefined,
      120_000,
    );
    await env.runtime.idle();
    const clean: [string, string, string][] = [
      ["router", "conversation", "1 stream(s), 1 state(s), 0 drifted"],
      ["order-lookup", "support_route", "1 stream(s), 1 state(s), 0 drifted"],
      ["conversation-projection", VIEW_TYPES, "5 stream(s), 1 state(s), 0 drifted"],
    ];
    for (const [group, types, summary] of clean) {
      const result = await cli("check", group, "--type", types);
      expect({ group, code: result.code, stderr: result.stderr }).toEqual({
        group,
        code: 0,
        stderr: "",
      });
      expect(result.stdout).toContain(summary);
    }
    const refused: [string[], string][] = [
      [
        ["rebuild", "writing", "--type", "dag_run"],
        "writing calls a model while deciding: its state is not a fold of its streams",
      ],
      [
        ["check", "reply-generation", "--type", "reply"],
        "reply-generation calls a model while deciding",
      ],
      [
        ["check", "sender", "--type", "delivery"],
        "sender sends through the reply channel while deciding",
      ],
      [
        ["check", "orchestrator", "--type", "dag_run"],
        "orchestrator reads its agents' queue depths",
      ],
      [["check", "conversation", "--type", "conversation"], "enter from outside any stream"],
      [["rebuild", "audit", "--type", "task"], "keeps only the messages no stream holds"],
      [["rebuild", "task-projection", "--type", "task", "--reset"], "task.feedback.received"],
    ];
    for (const [args, reason] of refused) {
      const result = await cli(...args);
      expect({ args, code: result.code }).toEqual({ args, code: 2 });
      expect(result.stderr).toContain(reason);
    }
  }, 240_000);

  it("a drift planted in the conversation view: check finds it, rebuild alone cannot, rebuild --reset repairs it", async () => {
    const conv = `conv_${STAGE.replace(/-/g, "")}`;
    const ref = { type: "conversation_view", id: conv };
    const good = (await env.store.load({ state: ref })).state;
    if (!good) throw new Error("no conversation view");
    // The view changed behind the projection's back; its checkpoints stay where they were.
    await env.clients.dynamodb.send(
      new PutItemCommand({
        TableName: env.names.tables.state,
        Item: marshall(
          stateItem(
            ref,
            good.revision + 1,
            good.version,
            { ...(good.data as object), customer_id: "cust_mallory" },
            new Date(),
            null,
            undefined,
            good.gate,
          ),
          { removeUndefinedValues: true },
        ),
      }),
    );
    const found = await cli("check", "conversation-projection", "--type", VIEW_TYPES);
    expect(found.code).toBe(1);
    expect(found.stdout).toContain(`1 drifted`);
    expect(found.stdout).toContain("cust_mallory");
    const fed = await cli("rebuild", "conversation-projection", "--type", VIEW_TYPES, "--restart");
    expect(fed.code).toBe(0);
    expect((await cli("check", "conversation-projection", "--type", VIEW_TYPES)).code).toBe(1);
    // Folding fewer streams than the view follows would lose the rest: refused, nothing written.
    const partial = await cli(
      "rebuild",
      "conversation-projection",
      "--type",
      "conversation",
      "--reset",
    );
    expect(partial.code).toBe(2);
    expect(partial.stderr).toContain("whose streams were not folded");
    expect((await env.store.load({ state: ref })).state?.data).toMatchObject({
      customer_id: "cust_mallory",
    });

    const reset = await cli("rebuild", "conversation-projection", "--type", VIEW_TYPES, "--reset");
    expect(reset.stderr).toBe("");
    expect(reset.code).toBe(0);
    expect(reset.stdout).toContain(
      "5 stream(s), 1 state(s): 1 rewritten from the fold, 0 already the fold",
    );
    const repaired = (await env.store.load({ state: ref })).state;
    expect(repaired?.data).toEqual(good.data);
    expect(repaired?.gate?.checkpoints).toEqual(good.gate?.checkpoints);
    const clean = await cli("check", "conversation-projection", "--type", VIEW_TYPES);
    expect(clean.code).toBe(0);
    expect(clean.stdout).toContain("0 drifted");
  }, 240_000);
});
