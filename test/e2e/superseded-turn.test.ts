import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { sendCommandOf, waitUntil } from "../../lib/dev/local/scenario/customer-support";
import { tenantConversationId } from "../../schemas/ids";
import { openEventStream } from "../support/sse";
import { localSupportStack, TIMEOUT } from "./support-stack";

/**
 * Two quick messages in one conversation (functions/roles/README.md: "I want to check my order",
 * then "the order number is A-1002"), posted through the front door on the local stack as a chat
 * widget posts them: one reply goes out, and the first turn says it will get none, naming the
 * turn that answers it, on `GET /v1/conversations/{id}` and on the conversation's stream.
 */

interface Turn {
  readonly task_id: string;
  readonly status: string;
  readonly superseded_by?: string;
  readonly reply_text?: string;
}

describe("a superseded turn, through the front door", () => {
  const local = localSupportStack("st");
  const door = () => {
    const frontDoor = local.env.frontDoor;
    if (!frontDoor) throw new Error("the local stack serves no front door");
    return frontDoor;
  };
  const post = async (token: string, conversation: string, text: string) => {
    const response = await fetch(`${door().url}/conversations/${conversation}/messages`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ text }),
    });
    expect(response.status).toBe(202);
    return ((await response.json()) as { task_id: string }).task_id;
  };
  /** What `pending` gives, or an error naming what never happened once TIMEOUT has passed. */
  const within = async <T>(what: string, pending: Promise<T>): Promise<T> => {
    let timer: NodeJS.Timeout | undefined;
    const stalled = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`waited ${TIMEOUT} ms: ${what}`)), TIMEOUT);
    });
    try {
      return await Promise.race([pending, stalled]);
    } finally {
      clearTimeout(timer);
    }
  };
  const replyGenerated = (taskId: string) =>
    waitUntil(`the send command of ${taskId}`, () => sendCommandOf(local.env, taskId), TIMEOUT);

  it(
    "two quick messages: the first turn is superseded by the second, on GET and on the stream",
    async () => {
      const conversation = `conv_${ulid()}`;
      const token = await door().issuer.token({ tenant_id: "acme", sub: "u-acme" });
      const stream = await openEventStream<{ turns?: Turn[] }>(
        `${door().url}/conversations/${conversation}/stream`,
        { authorization: `Bearer ${token}` },
      );
      expect(stream.response.status).toBe(200);
      // The second message comes before the first turn's reply is sent.
      local.env.runtime.pauseGroup("sender");
      let first: string;
      let second: string;
      try {
        first = await post(token, conversation, "I want to check my order");
        await replyGenerated(first);
        second = await post(token, conversation, "the order number is A-1002");
        await replyGenerated(second);
      } finally {
        local.env.runtime.resumeGroup("sender");
      }

      // The first turn's next status after its reply was generated: before, it stayed there.
      const underWay = ["received", "routed", "looked_up", "generated"];
      const superseded = await within(
        `turn ${first} never moved past generated on the stream`,
        stream.until(
          (e) =>
            e.data.turns?.some((t) => t.task_id === first && !underWay.includes(t.status)) === true,
        ),
      );
      stream.close();
      expect(superseded.event).toBe("conversation");
      expect(superseded.data.turns?.find((t) => t.task_id === first)).toMatchObject({
        status: "superseded",
        superseded_by: second,
      });

      await local.turnReaches(tenantConversationId("acme", conversation), second, "delivered");
      const read = await fetch(`${door().url}/conversations/${conversation}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(read.status).toBe(200);
      const view = (await read.json()) as { turns: Turn[] };
      expect(view.turns).toEqual([
        expect.objectContaining({
          task_id: first,
          status: "superseded",
          superseded_by: second,
          reply_text: expect.any(String),
        }),
        expect.objectContaining({ task_id: second, status: "delivered" }),
      ]);
      const deliveries = local.env.channel
        .deliveries()
        .filter((d) => d.conversationId === tenantConversationId("acme", conversation));
      expect(deliveries.map((d) => d.key)).toEqual([`${second}:reply:1`]);
      expect(deliveries[0]?.text).toContain("A-1002");
    },
    TIMEOUT * 3,
  );
});
