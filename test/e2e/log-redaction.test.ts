import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TransientError } from "../../functions/core/errors";
import type { ModelPort } from "../../functions/core/model";
import type { ChannelPort } from "../../functions/roles/customer-support/integrations/reply-channel/port";
import { HUMAN_REVIEW_MARKER } from "../../functions/roles/customer-support/reply-generation/local-script";
import type { FaultInjection } from "../../lib/dev/local/runtime/faults";
import { customerMessage, waitUntil } from "../../lib/dev/local/scenario/customer-support";
import { opsActions } from "../../lib/operator/actions";
import { tenantConversationId } from "../../schemas/ids";
import { captureOutput, type LogCapture } from "../support/log-capture";
import { localSupportStack, TIMEOUT } from "./support-stack";

// Every handler logs at INFO: the consumed steps as well as the failures.
process.env.POWERTOOLS_LOG_LEVEL = "INFO";

/** What a customer and an operator write here, and what must never reach a log line. */
const MARKER = "MARKER-7d1c";
/** In a customer's message: the reply-generation model answers prose that quotes the marker. */
const QUOTE_INVALID = "[quote-invalid]";

/**
 * A model that, for a reply-generation request carrying QUOTE_INVALID, answers prose that is not
 * JSON and quotes the marker (JSON.parse's error then quotes it too); otherwise the local model.
 */
function quotingModel(inner: ModelPort): ModelPort {
  return {
    name: inner.name,
    async converse(request) {
      const asked = request.messages.map((m) => m.text).join("\n");
      if (request.metadata?.role !== "reply-generation" || !asked.includes(QUOTE_INVALID))
        return inner.converse(request);
      return {
        text: `Sure: ${MARKER}`,
        stopReason: "end_turn",
        usage: { inputTokens: 10, outputTokens: 3 },
        modelId: inner.name,
        latencyMs: 1,
      };
    },
  };
}

/**
 * A channel that refuses the first send of every text with the marker, as a provider does whose
 * error quotes the message it was given (not applied: the sender retries); then delivers.
 */
function refusingChannel(inner: ChannelPort): ChannelPort {
  const refused = new Set<string>();
  return {
    name: inner.name,
    query: (key) => inner.query(key),
    async send(request) {
      if (request.text.includes(MARKER) && !refused.has(request.key)) {
        refused.add(request.key);
        throw new TransientError(
          "channel.unavailable",
          `provider refused the message "${request.text}" for ${request.recipient}`,
        );
      }
      return inner.send(request);
    },
  };
}

const faults: FaultInjection = {
  services: ({ model, replyChannel, ...standIns }) => ({
    ...standIns,
    model: quotingModel(model),
    replyChannel: refusingChannel(replyChannel as ChannelPort),
  }),
};

/**
 * The support conversation on the local stack with a marker in what customers and an operator
 * write, and the failures that make the handlers log their errors: every line any handler writes
 * is captured and none holds the marker.
 */
describe("the handlers' logs during the support conversation", () => {
  let capture: LogCapture;
  beforeAll(() => {
    capture = captureOutput();
  });
  afterAll(() => capture.stop());
  const local = localSupportStack("lr", {
    faultInjection: faults,
    envOverrides: { MAX_UNKNOWN_ATTEMPTS: "1" },
  });
  const door = () => {
    const frontDoor = local.env.frontDoor;
    if (!frontDoor) throw new Error("the local stack serves no front door");
    return frontDoor;
  };
  const post = async (conversation: string, token: string, body: string) => {
    const response = await fetch(`${door().url}/conversations/${conversation}/messages`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body,
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined };
  };
  const send = async (conversation: string, token: string, text: string) => {
    const sent = await post(conversation, token, JSON.stringify({ text }));
    expect(sent.status, JSON.stringify(sent.body)).toBe(202);
    return sent.body.task_id as string;
  };
  const turn = (conversation: string, taskId: string, status: string) =>
    local.turnReaches(tenantConversationId("acme", conversation), taskId, status);

  it(
    "no line holds a customer's or an operator's words, and the error paths did log",
    async () => {
      const token = await door().issuer.token({ tenant_id: "acme", sub: "u-acme" });
      const conversation = `conv_${ulid()}`;

      // A customer's question, answered; the reply quotes it, and its first send is refused.
      const asked = await send(conversation, token, `Where is order 123? ${MARKER}`);
      const answered = await turn(conversation, asked, "delivered");
      expect(answered.turns[asked]?.reply_text).toContain(MARKER);

      // A body the front door refuses.
      const refused = await post(conversation, token, `{"text": "${MARKER}`);
      expect(refused.status).toBe(400);

      // A model answering prose that quotes the marker: the reply is held for a person.
      const garbled = await send(conversation, token, `${MARKER} ${QUOTE_INVALID}`);
      await turn(conversation, garbled, "held_for_review");

      // A held reply an operator edits (the marker in the text and the reason), refused once.
      const held = await send(conversation, token, `Refund order 123 ${HUMAN_REVIEW_MARKER}`);
      await turn(conversation, held, "held_for_review");
      const approved = await opsActions(local.env.ops).review(held, "approved", {
        text: `Edited by a person: ${MARKER}`,
        reason: `checked ${MARKER}`,
      });
      expect(approved.kind, approved.message).toBe("sent");
      const edited = await turn(conversation, held, "delivered");
      expect(edited.turns[held]?.reply_text).toBe(`Edited by a person: ${MARKER}`);

      // A poison message: a customer id that looks like a phone number, the marker in its text.
      const poison = customerMessage(`conv_${ulid()}`, "cust_5551234567", `Poison ${MARKER}`);
      await local.putMessages(poison);
      await waitUntil(
        "the poison message dead-lettered",
        () =>
          capture
            .logLines()
            .some(
              (line) =>
                line.event_id === poison.event_id &&
                /^envelope\./.test((line.error as { code?: string } | undefined)?.code ?? ""),
            ),
        TIMEOUT,
      );
      await local.env.runtime.idle();

      const lines = capture.logLines();
      const messages = new Set(lines.map((line) => line.message));
      // The capture caught the handlers' lines, the failures' among them.
      expect(lines.length).toBeGreaterThan(20);
      expect(messages).toContain("will retry");
      expect(messages).toContain("dead-lettering a message that can never succeed");
      expect(messages).toContain("refused");
      const services = new Set(lines.map((line) => line.service));
      for (const service of ["reply-generation", "sender", "front-door", "audit"])
        expect(services).toContain(service);
      // Nothing anything wrote holds the marker: not a log line, not any other output.
      const leaks = capture.lines().filter((line) => line.includes(MARKER));
      expect(leaks).toEqual([]);
    },
    TIMEOUT * 4,
  );
});
