import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import type {
  ConversationTurn,
  ConversationView,
} from "../../functions/roles/customer-support/conversation-projection/conversation-projection";
import { HUMAN_REVIEW_MARKER } from "../../functions/roles/customer-support/reply-generation/local-script";
import type { ReplyState } from "../../functions/roles/customer-support/reply-generation/state";
import {
  customerMessage,
  loadConversation,
  sideEffectOf,
  waitUntil,
} from "../../lib/dev/local/scenario/customer-support";
import { readDeadLetters } from "../../lib/dev/local/scenario/dead-letters";
import type { Envelope } from "../../schemas";
import { auditedOutcomes } from "../support/audit";
import { localCli } from "../support/cli";
import { localSupportStack, TIMEOUT } from "./support-stack";

/**
 * What waits for a person in the support conversation, resolved with `agentbus reply` and
 * `agentbus send resolve` run as child processes against the local stack (the commands go on the
 * stack's commands bus, the in-process handlers take them): stored state, the channel's
 * deliveries and the dead-letter queues before and after, a repeated action and a refused one.
 * The sender escalates an unknown outcome at once here (MAX_UNKNOWN_ATTEMPTS=1).
 */
describe("resolving what waits for a person, on the local stack", () => {
  const local = localSupportStack("sr", { envOverrides: { MAX_UNKNOWN_ATTEMPTS: "1" } });
  const { deliveriesTo, putMessages } = local;
  const cli = localCli(() => local.env, local.stage, { AGENTBUS_OPERATOR: "ops_anna" });
  const turnOf = async (message: Envelope) =>
    (await loadConversation(local.env, message.conversation_id as string))?.turns[message.task_id];
  /** Waits until the message's turn reaches `status`; the turn then. */
  const turnReaches = async (message: Envelope, status: string) => {
    const view = await local.turnReaches(
      message.conversation_id as string,
      message.task_id,
      status,
    );
    return view.turns[message.task_id] as ConversationTurn;
  };
  const reply = async (taskId: string) =>
    (await local.env.store.load({ state: { type: "reply", id: taskId } })).state?.data as
      | ReplyState
      | undefined;
  const deadLetters = async () => (await readDeadLetters(local.env)).map((d) => d.eventId).sort();
  const sentEventId = (stdout: string) => /event_id\s+(\S+)/.exec(stdout)?.[1] ?? "";
  const audited = async (eventId: string) =>
    (await auditedOutcomes(local.env.store, [eventId]))[0]?.outcome;

  async function heldMessage(): Promise<Envelope> {
    const message = customerMessage(
      `conv_${ulid()}`,
      "cust_alice",
      `Can I get a refund for order 123 twice? ${HUMAN_REVIEW_MARKER}`,
    );
    await putMessages(message);
    await turnReaches(message, "held_for_review");
    return message;
  }

  async function unknownMessage(customer: string): Promise<{ message: Envelope; key: string }> {
    const message = customerMessage(`conv_${ulid()}`, customer, "Where is order 123?");
    const key = `${message.task_id}:reply:1`;
    local.env.channel.inject({ kind: "timeout-before-apply", key });
    local.env.channel.inject({ kind: "query-unknown", key });
    await putMessages(message);
    await turnReaches(message, "failed");
    expect(await sideEffectOf(local.env, key)).toMatchObject({ state: "unknown" });
    return { message, key };
  }

  it(
    "a held reply approved with an edited text goes out once, under a key of its own",
    async () => {
      const message = await heldMessage();
      const conversationId = message.conversation_id as string;
      const lettersBefore = await deadLetters();
      expect(deliveriesTo(conversationId)).toEqual([]);
      const listed = await cli("reply", "list");
      expect(listed.code).toBe(0);
      expect(listed.stdout).toContain(message.task_id);

      const refused = await cli("reply", "approve", message.task_id, "--reason", "x".repeat(1001));
      expect(refused.code).toBe(2);
      expect((await cli("reply", "approve", `task_${ulid()}`)).code).toBe(2);
      expect((await reply(message.task_id))?.status).toBe("held_for_review");

      const text = "Your refund for order 123 was submitted once; a second one is not possible.";
      const approved = await cli(
        "reply",
        "approve",
        message.task_id,
        "--text",
        text,
        "--reason",
        "checked",
      );
      expect(approved.code, approved.stderr).toBe(0);
      const turn = await turnReaches(message, "delivered");
      await local.env.runtime.idle();
      const key = `${message.task_id}:reply:2`;
      expect(deliveriesTo(conversationId).map((d) => [d.key, d.text])).toEqual([[key, text]]);
      expect(turn).toMatchObject({ reviewed_by: "ops_anna", delivery: { idempotency_key: key } });
      expect(await reply(message.task_id)).toMatchObject({
        status: "approved",
        review: { requested_by: "ops_anna", reason: "checked", edited: true },
      });
      expect(await audited(sentEventId(approved.stdout))).toBe("applied");
      expect((await cli("reply", "list")).stdout).not.toContain(message.task_id);

      const again = await cli("reply", "approve", message.task_id);
      expect(again.code).toBe(0);
      expect(again.stdout).toContain("already approved");
      expect((await cli("reply", "reject", message.task_id)).code).toBe(2);
      await local.env.runtime.idle();
      expect(deliveriesTo(conversationId)).toHaveLength(1);
      expect(await deadLetters()).toEqual(lettersBefore);
    },
    TIMEOUT * 3,
  );

  it(
    "a held reply rejected: the turn ends rejected, nothing is sent",
    async () => {
      const message = await heldMessage();
      const lettersBefore = await deadLetters();
      // A held reply is one of the approvals: listed with its draft, answered by `agentbus reject`.
      const listed = await cli("approvals", "--json");
      expect(JSON.parse(listed.stdout)).toContainEqual(
        expect.objectContaining({
          kind: "held_reply",
          id: message.task_id,
          step: "reply",
          action: "send_reply",
          input: expect.objectContaining({ text: expect.any(String) }),
        }),
      );
      expect((await cli("reject", "conv_x", "--reason", "no step")).code).toBe(2);
      const rejected = await cli("reject", message.task_id, "--reason", "duplicate ask");
      expect(rejected.code, rejected.stderr).toBe(0);
      await turnReaches(message, "rejected");
      expect((await cli("reply", "reject", message.task_id)).code).toBe(0);
      expect((await cli("reply", "approve", message.task_id)).code).toBe(2);
      await local.env.runtime.idle();
      expect(deliveriesTo(message.conversation_id as string)).toEqual([]);
      const view = await loadConversation(local.env, message.conversation_id as string);
      expect((view as ConversationView).turns[message.task_id]?.status).toBe("rejected");
      expect(await deadLetters()).toEqual(lettersBefore);
    },
    TIMEOUT * 3,
  );

  it(
    "an unknown send outcome resent under the same key: one delivery",
    async () => {
      const { message, key } = await unknownMessage("cust_dave");
      const lettersBefore = await deadLetters();
      const listed = await cli("send", "list");
      expect(listed.stdout).toContain(key);
      expect((await cli("send", "resolve", key, "--as", "maybe")).code).toBe(2);
      expect((await cli("send", "resolve", `task_${ulid()}:reply:1`, "--as", "resend")).code).toBe(
        2,
      );
      expect(await sideEffectOf(local.env, key)).toMatchObject({ state: "unknown" });

      const resent = await cli(
        "send",
        "resolve",
        key,
        "--as",
        "resend",
        "--reason",
        "vendor lost it",
      );
      expect(resent.code, resent.stderr).toBe(0);
      await turnReaches(message, "delivered");
      await local.env.runtime.idle();
      expect(deliveriesTo(message.conversation_id as string).map((d) => d.key)).toEqual([key]);
      expect(await sideEffectOf(local.env, key)).toMatchObject({ state: "succeeded" });
      expect(await audited(sentEventId(resent.stdout))).toBe("applied");
      expect((await cli("send", "list")).stdout).not.toContain(key);

      const again = await cli("send", "resolve", key, "--as", "resend");
      expect(again.code).toBe(0);
      expect(again.stdout).toContain("already resolved");
      expect((await cli("send", "resolve", key, "--as", "abandon")).code).toBe(2);
      await local.env.runtime.idle();
      expect(deliveriesTo(message.conversation_id as string)).toHaveLength(1);
      expect(await deadLetters()).toEqual(lettersBefore);
    },
    TIMEOUT * 3,
  );

  it(
    "unknown outcomes resolved as delivered and as abandoned: nothing sent",
    async () => {
      const delivered = await unknownMessage("cust_erin");
      const abandoned = await unknownMessage("cust_fay");
      const lettersBefore = await deadLetters();
      const sends = local.env.channel.sends();
      expect((await cli("send", "resolve", delivered.key, "--as", "delivered")).code).toBe(0);
      expect((await cli("send", "resolve", abandoned.key, "--as", "abandon")).code).toBe(0);
      const turn = await turnReaches(delivered.message, "delivered");
      expect(turn.delivery).toMatchObject({ confirmed_by: "operator" });
      await waitUntil(
        "the abandoned record",
        async () => (await sideEffectOf(local.env, abandoned.key))?.state === "failed",
        TIMEOUT,
      );
      await local.env.runtime.idle();
      expect(await sideEffectOf(local.env, delivered.key)).toMatchObject({ state: "succeeded" });
      expect((await turnOf(abandoned.message))?.delivery?.code).toBe("operator.abandoned");
      expect((await cli("send", "resolve", delivered.key, "--as", "delivered")).code).toBe(0);
      expect((await cli("send", "resolve", abandoned.key, "--as", "resend")).code).toBe(2);
      await local.env.runtime.idle();
      expect(local.env.channel.sends()).toBe(sends);
      expect(await deadLetters()).toEqual(lettersBefore);
    },
    TIMEOUT * 3,
  );
});
