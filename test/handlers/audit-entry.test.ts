import { describe, expect, it } from "vitest";
import { registry } from "../../schemas";

/**
 * The reference stack's audit function records every type the stack routes to it, the reference
 * applications' too: its entry, imported alone as its bundle is, defines them, so that its
 * consumer validates their messages and seals the personal fields of those it keeps whole.
 */
describe("the audit group's entry", () => {
  it("defines the reference applications' types, with their personal fields", async () => {
    expect(registry.find("reply.approve.requested")).toBeUndefined();
    await import("../../functions/roles/audit/handler");
    expect(registry.find("reply.approve.requested")?.personal).toEqual(["text", "reason"]);
    expect(registry.find("refund.review.needs_person")?.personal).toEqual(["reason"]);
    const { audit } = await import("../../functions/roles/audit/audit");
    expect(audit.subscriptions).toContain("support.cancel.requested");
  });
});
