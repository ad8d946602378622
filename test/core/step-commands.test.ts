import { describe, expect, it } from "vitest";
import { InMemoryEventStore } from "../../functions/core/memory";
import { buildRole } from "../../functions/core/role-module";
import { WORKFLOWS_ENV } from "../../functions/core/stack-workflows";
import { registerStepCommands, STEP_ROLES_ENV, stepEntryOf } from "../../functions/core/steps";
import { orchestratorModule } from "../../functions/roles/orchestrator/index";
import { memoryRolePorts } from "../../lib/dev/role-kit/memory-ports";
import { registry } from "../../schemas";
import * as z from "../../schemas/zod";

/**
 * The hub's orchestrator deployed for an application holds none of its step roles' modules: it
 * learns their commands from the stack's table (STEP_ROLES), and registers them, so that it can
 * emit them.
 */
describe("the step commands an orchestrator registers from its table", () => {
  const steps = { input: z.looseObject({}), output: z.object({}) };

  it("registers the derived commands of each step role, and none a role spells itself", () => {
    expect(registry.has("probe_close.node.requested")).toBe(false);
    registerStepCommands({
      "probe-close": stepEntryOf("probe-close", steps),
      "probe-own": stepEntryOf("probe-own", {
        ...steps,
        types: { requested: "probe_own.please", cancel: "probe_own.stop" },
      }),
    });
    expect(registry.find("probe_close.node.requested")?.topic).toBe("commands");
    expect(registry.has("probe_close.node.cancel.requested")).toBe(true);
    expect(registry.has("probe_own.please")).toBe(false);
    // Again, as every container of the function does: harmless.
    registerStepCommands({ "probe-close": stepEntryOf("probe-close", steps) });
  });

  it("is what the orchestrator's module does when it is built from its environment", () => {
    expect(registry.has("probe_tally.node.requested")).toBe(false);
    const env = {
      [STEP_ROLES_ENV]: JSON.stringify({ "probe-tally": stepEntryOf("probe-tally", steps) }),
      [WORKFLOWS_ENV]: "[]",
    };
    const ports = memoryRolePorts(new InMemoryEventStore(), orchestratorModule.uses);
    buildRole(orchestratorModule, ports, env);
    expect(registry.has("probe_tally.node.requested")).toBe(true);
  });
});
