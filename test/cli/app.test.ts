import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { useApplication } from "../../bin/cli/app";
import { UsageError } from "../../bin/cli/target";
import { ROLE_MODULES } from "../../functions/roles/modules";
import { operatorGroups, useRoleModules } from "../../lib/operator/groups";

/**
 * `agentbus --app <module>`: the operator tools run the roles of the application a stack was built
 * from, found among the module's exports as what the stack is given (`{ roles, ... }`).
 */

const FIXTURES = join(import.meta.dirname, "..", "fixtures");

afterEach(() => useRoleModules(ROLE_MODULES));

describe("--app", () => {
  it("without it, the tools run the reference applications' roles", () => {
    expect(operatorGroups().map((g) => g.name)).toContain("refund-review");
  });

  it("runs the roles of the application the module exports", async () => {
    await useApplication(join(FIXTURES, "bookkeeping", "stack.ts"));
    const groups = operatorGroups();
    expect(groups.map((g) => g.name)).toEqual(["bookkeeper"]);
    expect(groups[0]?.integrations?.map((i) => i.name)).toEqual(["ledger"]);
  });

  it("refuses a module that exports no application, and one that does not load, naming it", async () => {
    const none = join(FIXTURES, "bookkeeping", "integrations", "ledger", "index.ts");
    await expect(useApplication(none)).rejects.toThrow(UsageError);
    await expect(useApplication(none)).rejects.toThrow(/exports no application/);
    await expect(useApplication(join(FIXTURES, "missing.js"))).rejects.toThrow(
      /--app .*missing\.js does not load/,
    );
    expect(operatorGroups().map((g) => g.name)).toContain("refund-review");
  });
});
