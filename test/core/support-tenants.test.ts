import { describe, expect, it } from "vitest";
import { consume } from "../../functions/core/pipeline";
import type { StoredState } from "../../functions/core/ports";
import { HUMAN_REVIEW_MARKER } from "../../functions/roles/customer-support/reply-generation/local-script";
import type { ReplyState } from "../../functions/roles/customer-support/reply-generation/state";
import type { DeliveryState } from "../../functions/roles/customer-support/sender/state";
import type { Envelope } from "../../schemas";
import { clientMessage } from "./fixtures";
import {
  newConversationId,
  operatorCommand,
  type SupportHarness,
  supportHarness,
} from "./support-fixture";

/**
 * What a support turn parks for a person (a held reply, a send whose outcome is unknown) obeys
 * what is sent to it from outside (the operator's review, resolve and cancel) in its own tenant
 * only, through `consume`, from a customer's message of tenant acme on: one naming another
 * tenant, or none, is dead-lettered as `<aggregate>.tenant_mismatch` and changes nothing. A state
 * stored before it recorded its tenant is not checked, as before.
 */

const harness = () => supportHarness({ maxUnknownAttempts: 1, logErrors: true });

/** `envelope` naming `tenant` (undefined: none, the default tenant). */
const inTenant = (envelope: Envelope, tenant: string | undefined): Envelope => {
  const { tenant_id: _none, ...rest } = envelope;
  return tenant === undefined ? rest : { ...rest, tenant_id: tenant };
};

/** A message of `tenant`'s customer whose reply is held for a person's review. */
async function heldIn(h: SupportHarness, tenant: string | undefined) {
  const text = `Refund order 123 twice? ${HUMAN_REVIEW_MARKER}`;
  const message = inTenant(clientMessage(newConversationId(), text), tenant);
  await h.drain([message]);
  expect((await h.state<ReplyState>("reply", message.task_id))?.status).toBe("held_for_review");
  return message;
}

/** A message of `tenant`'s customer whose reply's send has an unknown outcome (escalated). */
async function unknownIn(h: SupportHarness, tenant: string | undefined) {
  const message = inTenant(clientMessage(newConversationId(), "Where is order 123?"), tenant);
  const key = `${message.task_id}:reply:1`;
  h.channel.inject({ kind: "timeout-before-apply", key });
  h.channel.inject({ kind: "query-unknown", key });
  await h.drain([message]);
  expect((await h.sideEffects.get(key))?.state).toBe("unknown");
  return { message, key };
}

const review = (type: string, message: Envelope, tenant: string | undefined) =>
  inTenant(
    operatorCommand(
      type,
      { type: "reply", id: message.task_id },
      message.conversation_id as string,
      type === "reply.approve.requested" ? { text: "Refunded twice, sorry." } : {},
    ),
    tenant,
  );

const onDelivery = (
  type: string,
  message: Envelope,
  tenant: string | undefined,
  payload: Record<string, unknown> = {},
) =>
  inTenant(
    operatorCommand(
      type,
      { type: "delivery", id: message.task_id },
      message.conversation_id as string,
      payload,
    ),
    tenant,
  );

const resolve = (message: Envelope, key: string, tenant: string | undefined) =>
  onDelivery("notification.resolve.requested", message, tenant, {
    idempotency_key: key,
    resolution: "resend",
  });

const cancel = (message: Envelope, tenant: string | undefined) =>
  onDelivery("support.cancel.requested", message, tenant);

/** The stored state of `type`/`id`, as a version from before states recorded their tenant. */
function forgetTenant(h: SupportHarness, type: string, id: string) {
  const k = `${type}#${id}`;
  const stored = h.store.states.get(k) as StoredState<{ tenant_id?: string }>;
  const { tenant_id: _forgotten, ...data } = stored.data;
  h.store.states.set(k, { ...stored, data });
}

describe("a held reply of tenant acme", () => {
  it("refuses a review naming another tenant, or none, as reply.tenant_mismatch: nothing is emitted or sent", async () => {
    const h = harness();
    const message = await heldIn(h, "acme");
    const before = h.store.log.length;
    for (const type of ["reply.approve.requested", "reply.reject.requested"])
      for (const tenant of ["globex", undefined])
        await expect(
          consume(review(type, message, tenant), h.replyGeneration, h.deps),
          `${type} of ${tenant}`,
        ).rejects.toMatchObject({
          errorClass: "permanent",
          code: "reply.tenant_mismatch",
          message: expect.stringContaining(`reply ${message.task_id} belongs to tenant acme`),
        });
    expect(h.store.log.length).toBe(before);
    expect((await h.state<ReplyState>("reply", message.task_id))?.status).toBe("held_for_review");
    expect(h.channel.sends()).toBe(0);
  });

  it("obeys acme's approval, and everything it causes stays in acme", async () => {
    const h = harness();
    const message = await heldIn(h, "acme");
    const before = h.store.log.length;
    await h.drain([review("reply.approve.requested", message, "acme")]);
    expect(h.channel.deliveries().map((d) => d.text)).toEqual(["Refunded twice, sorry."]);
    const caused = h.store.log.slice(before);
    expect(caused.map((e) => e.event_type)).toEqual([
      "reply.approved",
      "notification.send.requested",
      "notification.delivered",
    ]);
    expect(new Set(caused.map((e) => e.tenant_id))).toEqual(new Set(["acme"]));
  });
});

describe("a held reply of the default tenant", () => {
  it("refuses a review naming a tenant, and obeys one naming none", async () => {
    const h = harness();
    const message = await heldIn(h, undefined);
    await expect(
      consume(review("reply.reject.requested", message, "acme"), h.replyGeneration, h.deps),
    ).rejects.toMatchObject({ code: "reply.tenant_mismatch" });
    await h.drain([review("reply.reject.requested", message, undefined)]);
    expect((await h.state<ReplyState>("reply", message.task_id))?.status).toBe("rejected");
  });
});

describe("a send of tenant acme whose outcome is unknown", () => {
  it("refuses a resolve or a cancel naming another tenant, or none, as delivery.tenant_mismatch: nothing is sent", async () => {
    const h = harness();
    const { message, key } = await unknownIn(h, "acme");
    const before = h.store.log.length;
    for (const tenant of ["globex", undefined])
      for (const command of [resolve(message, key, tenant), cancel(message, tenant)])
        await expect(
          consume(command, h.sender, h.deps),
          `${command.event_type} of ${tenant}`,
        ).rejects.toMatchObject({
          errorClass: "permanent",
          code: "delivery.tenant_mismatch",
          message: expect.stringContaining(`delivery ${message.task_id} belongs to tenant acme`),
        });
    expect(h.store.log.length).toBe(before);
    expect((await h.sideEffects.get(key))?.state).toBe("unknown");
    expect((await h.state<DeliveryState>("delivery", message.task_id))?.cancelled).toBeUndefined();
    expect(h.channel.deliveries()).toEqual([]);
  });

  it("obeys acme's resend, and everything it causes stays in acme", async () => {
    const h = harness();
    const { message, key } = await unknownIn(h, "acme");
    const before = h.store.log.length;
    await h.drain([resolve(message, key, "acme")]);
    expect(h.channel.deliveries().map((d) => d.key)).toEqual([key]);
    const caused = h.store.log.slice(before);
    expect(caused.map((e) => e.event_type)).toEqual(["notification.delivered"]);
    expect(new Set(caused.map((e) => e.tenant_id))).toEqual(new Set(["acme"]));
  });
});

describe("a state stored before it recorded its tenant", () => {
  it("a held reply obeys its conversation's tenant's review (unchecked, not taken for the default tenant's)", async () => {
    const h = harness();
    const message = await heldIn(h, "acme");
    forgetTenant(h, "reply", message.task_id);
    await h.drain([review("reply.approve.requested", message, "acme")]);
    expect((await h.state<ReplyState>("reply", message.task_id))?.status).toBe("approved");
    expect(h.channel.deliveries()).toHaveLength(1);
  });

  it("a send obeys its conversation's tenant's resolve (unchecked)", async () => {
    const h = harness();
    const { message, key } = await unknownIn(h, "acme");
    forgetTenant(h, "delivery", message.task_id);
    await h.drain([resolve(message, key, "acme")]);
    expect((await h.sideEffects.get(key))?.state).toBe("succeeded");
  });
});
