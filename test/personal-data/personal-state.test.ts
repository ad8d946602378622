import { describe, expect, it } from "vitest";
import { ROLE_MODULES } from "../../functions/roles/modules";
import { erasedStateTypes, PERSONAL_STATE_ROLES } from "../../functions/roles/personal-state";

describe("the roles whose states keep a customer's words", () => {
  it("are every module's role that declares personalState, and no other", () => {
    const declared = ROLE_MODULES.map((m) => m.descriptor).filter((d) => d.personalState);
    expect(PERSONAL_STATE_ROLES.map((r) => r.group).sort()).toEqual(
      declared.map((d) => d.group).sort(),
    );
  });

  it("name the state types erasure writes", () => {
    expect(erasedStateTypes()).toEqual([
      "agent_run",
      "conversation",
      "conversation_view",
      "delivery",
      "reply",
    ]);
  });
});
