import { ulid } from "ulid";
import { describe, expect, it } from "vitest";
import { streamOf, waitUntil } from "../../lib/dev/local/scenario/customer-support";
import { tenantConversationId } from "../../schemas/ids";
import { localSupportStack } from "./support-stack";

/**
 * Two messages posted back to back to the front door on the local stack are applied by the
 * conversation in the order they were posted: the door gives them client sequences 1 and 2 (its
 * `client_seq#` item on the emulator's state table), and the conversation holds one that comes
 * ahead until the other arrives. 200 conversations, posted in parallel; the groups after the
 * conversation are paused, as only its order is looked at here.
 */

const PAIRS = 200;
const PARALLEL = 5;
const DOWNSTREAM = ["router", "order-lookup", "refund-review", "reply-generation", "sender"];

describe("two messages posted back to back, on the local stack", () => {
  const local = localSupportStack("order");

  it(`are applied in the order they were posted, in each of ${PAIRS} conversations`, async () => {
    const env = local.env;
    const door = env.frontDoor;
    if (!door) throw new Error("the local stack serves no front door");
    for (const group of DOWNSTREAM) env.runtime.pauseGroup(group);
    const token = await door.issuer.token({ tenant_id: "acme", sub: "u-order" });
    // As a client does: a request whose connection fails is sent again under its Idempotency-Key,
    // which the door answers as the first time without claiming another sequence.
    const post = async (conversation: string, text: string) => {
      const key = ulid();
      const send = () =>
        fetch(`${door.url}/conversations/${conversation}/messages`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${token}`,
            "content-type": "application/json",
            "idempotency-key": key,
          },
          body: JSON.stringify({ text }),
        });
      const response = await send().catch(send);
      expect(response.status).toBe(202);
      return (await response.json()) as { event_id: string; client_seq: number };
    };
    const pairs: { conversation: string; sent: { event_id: string; client_seq: number }[] }[] = [];
    for (let start = 0; start < PAIRS; start += PARALLEL) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(PARALLEL, PAIRS - start) }, async () => {
          const conversation = `conv_${ulid()}`;
          const first = await post(conversation, "Where is my order 123?");
          const second = await post(conversation, "Sorry, I meant order A-1001.");
          return { conversation, sent: [first, second] };
        }),
      );
      pairs.push(...batch);
    }
    expect(pairs.flatMap((p) => p.sent.map((s) => s.client_seq))).toEqual(
      pairs.flatMap(() => [1, 2]),
    );

    const acceptedOf = async (conversation: string) =>
      (
        await streamOf(env, {
          type: "conversation",
          id: tenantConversationId("acme", conversation),
        })
      )
        .filter((e) => e.event_type === "conversation.message.accepted")
        .map((e) => (e.payload as { message_event_id: string }).message_event_id);
    const accepted = await waitUntil(
      "both messages of every conversation accepted",
      async () => {
        const all = await Promise.all(pairs.map((p) => acceptedOf(p.conversation)));
        return all.every((ids) => ids.length >= 2) ? all : undefined;
      },
      900_000,
    );
    expect(accepted).toEqual(pairs.map((p) => p.sent.map((s) => s.event_id)));
    for (const group of DOWNSTREAM) env.runtime.resumeGroup(group);
  }, 1_200_000);
});
