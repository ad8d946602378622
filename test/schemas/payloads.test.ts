import { describe, expect, expectTypeOf, it } from "vitest";
import { PermanentError } from "../../functions/core/errors";
import { payloadOf } from "../../functions/core/payload";
import type { SupportCancelRequested } from "../../functions/roles/customer-support/events/cancel";
import type {
  OrderLookupRequested,
  ReplyGenerationRequested,
  RouteRequested,
} from "../../functions/roles/customer-support/events/commands";
import type {
  OrderLookupCompleted,
  SendRequested,
} from "../../functions/roles/customer-support/events/conversation";
import {
  DEFINITIONS,
  type Envelope,
  type EventPayloads,
  type EventType,
  registry,
} from "../../schemas";
import type { MessageReceived } from "../../schemas/events/conversation";
import type { PlanCreated } from "../../schemas/events/task";
import type { WorkflowStartRequested } from "../../schemas/events/workflow";
import { unvalidatedEnvelope } from "../support/factories";

const envelope = (event_type: string, payload: unknown): Envelope =>
  unvalidatedEnvelope(event_type, payload);

describe("the payload types read from the definitions", () => {
  it("come from exactly the definitions the registry holds, in the order defined", () => {
    // EventPayloads is read from DEFINITIONS: a definition registered without being returned by
    // its define function would have no payload type, and one returned twice would be a bug.
    const registered = registry.definitions();
    expect(DEFINITIONS).toHaveLength(registered.length);
    for (const [i, definition] of DEFINITIONS.entries()) expect(definition).toBe(registered[i]);
    for (const definition of registered) expect(DEFINITIONS).toContain(definition);
  });

  it("name every type by its literal name", () => {
    // A definition whose type is only `string` would make every name a key (and pollute them all).
    const literalOnly: string extends EventType ? false : true = true;
    expect(literalOnly).toBe(true);
  });

  it("are each type's newest schema version", () => {
    expectTypeOf<
      EventPayloads["support.cancel.requested"]
    >().toEqualTypeOf<SupportCancelRequested>();
    expectTypeOf<EventPayloads["plan.created"]>().toEqualTypeOf<PlanCreated>();
    expectTypeOf<EventPayloads["order.lookup.completed"]>().toEqualTypeOf<OrderLookupCompleted>();
    expectTypeOf<
      EventPayloads["workflow.start.requested"]
    >().toEqualTypeOf<WorkflowStartRequested>();
    expectTypeOf<EventPayloads["support.route.requested"]>().toEqualTypeOf<RouteRequested>();
    expectTypeOf<EventPayloads["order.lookup.requested"]>().toEqualTypeOf<OrderLookupRequested>();
    expectTypeOf<
      EventPayloads["reply.generation.requested"]
    >().toEqualTypeOf<ReplyGenerationRequested>();
    expectTypeOf<EventPayloads["conversation.message.received"]>().toEqualTypeOf<MessageReceived>();
  });
});

describe("payloadOf", () => {
  it("gives the payload typed by the registry for the type asked for", () => {
    const payload = { conversation_id: "conv_1", requested_by: "ops" };
    const request = payloadOf(
      envelope("support.cancel.requested", payload),
      "support.cancel.requested",
    );
    expectTypeOf(request).toEqualTypeOf<SupportCancelRequested>();
    expect(request).toBe(payload);
  });

  it("does not validate the payload again (the pipeline did)", () => {
    const invalid = { conversation_id: 42 };
    expect(
      payloadOf(envelope("support.cancel.requested", invalid), "support.cancel.requested"),
    ).toBe(invalid);
  });

  it("takes several types handled alike and gives the union of their payloads", () => {
    const payload = { logical_attempt: 1 };
    const event = envelope("notification.send.requested", payload);
    const either = payloadOf(event, "support.cancel.requested", "notification.send.requested");
    expectTypeOf(either).toEqualTypeOf<SupportCancelRequested | SendRequested>();
    expect(either).toBe(payload);
  });

  it("refuses an event of another type, naming both (permanent: a retry fails alike)", () => {
    const event = envelope("reply.reject.requested", { conversation_id: "conv_1" });
    const read = () => payloadOf(event, "support.cancel.requested", "reply.approve.requested");
    expect(read).toThrow(PermanentError);
    expect(read).toThrow(
      /expected the payload of support\.cancel\.requested or reply\.approve\.requested, got reply\.reject\.requested/,
    );
    try {
      read();
    } catch (error) {
      expect(error).toMatchObject({
        code: "payload.unexpected_type",
        errorClass: "permanent",
        details: {
          expected: ["support.cancel.requested", "reply.approve.requested"],
          event_type: "reply.reject.requested",
        },
      });
    }
  });

  it("accepts only registered type names (checked by the compiler)", () => {
    const event = envelope("support.cancel.requested", {});
    // @ts-expect-error: not a registered event type
    expect(() => payloadOf(event, "support.cancel.requested.typo")).toThrow(PermanentError);
  });
});
