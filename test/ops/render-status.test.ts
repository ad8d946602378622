import { describe, expect, it } from "vitest";
import { renderStatusText } from "../../lib/operator/render-text";
import { at, overview } from "../console/fixtures";

/** `agentbus status` as text: what waits for a person says since when, where that is known. */
describe("renderStatusText", () => {
  it("gives each waiting item since when it waits, or its last change when that is not known", () => {
    const { status, waiting } = overview();
    const lines = renderStatusText(status, waiting).split("\n");
    expect(lines).toContain(`  held reply     conversation conv_01J9Z3HELD (since ${at(4_500)})`);
    // The failed run carries no waiting time (as read from a legacy index): its last change.
    expect(lines.find((l) => l.includes("FAILED") && l.includes(" run "))).toMatch(
      new RegExp(`\\(${at(48_010).replace(/[.]/g, "\\.")}\\)$`),
    );
  });

  it("counts and lists the conversations handed off to a person", () => {
    const { status, waiting } = overview();
    const lines = renderStatusText(status, waiting).split("\n");
    expect(lines).toContain("  handed off            1");
    expect(lines).toContain(
      `  handed off     conversation conv_01J9Z3HANDOFF (since ${at(6_000)})`,
    );
  });
});
