import { describe, expect, it } from "vitest";
import { InMemoryEventStore } from "../../functions/core/memory";
import { buildRole } from "../../functions/core/role-module";
import { WORKFLOWS_ENV } from "../../functions/core/stack-workflows";
import { registerStepRoleTypes, STEP_ROLES_ENV, stepEntryOf } from "../../functions/core/steps";
import "../../functions/roles/content-agents/events";
import { orchestratorModule } from "../../functions/roles/orchestrator/index";
import { memoryRolePorts } from "../../lib/dev/role-kit/memory-ports";
import { registry } from "../../schemas";
import * as z from "../../schemas/zod";

/**
 * The hub's orchestrator deployed for an application holds none of its step roles' modules: it
 * learns their commands (and a role's own answers) from the stack's table (STEP_ROLES), and
 * registers them, so that it can emit and take them.
 */
describe("the step role types an orchestrator registers from its table", () => {
  const steps = { input: z.looseObject({}), output: z.object({ total: z.int() }) };

  it("registers the derived commands of each step role, and a role's own spellings with the hub's node payloads", () => {
    expect(registry.has("probe_close.node.requested")).toBe(false);
    const own = stepEntryOf("probe-own", {
      ...steps,
      types: { requested: "probe_own.please", cancel: "probe_own.stop" },
      answers: { completed: "probe_own.done", failed: "probe_own.gave_up" },
    });
    expect(own.answers).toEqual({ completed: "probe_own.done", failed: "probe_own.gave_up" });
    expect(own.output).toMatchObject({ type: "object", required: ["total"] });
    registerStepRoleTypes({ "probe-close": stepEntryOf("probe-close", steps), "probe-own": own });
    expect(registry.find("probe_close.node.requested")?.topic).toBe("commands");
    expect(registry.has("probe_close.node.cancel.requested")).toBe(true);
    expect(registry.find("probe_own.please")?.topic).toBe("commands");
    expect(registry.has("probe_own.stop")).toBe(true);
    expect(registry.find("probe_own.done")?.topic).toBe("events");
    expect(registry.has("probe_own.gave_up")).toBe(true);
    // Again, as every container of the function does: harmless.
    registerStepRoleTypes({ "probe-close": stepEntryOf("probe-close", steps), "probe-own": own });
  });

  it("leaves a role's own spellings to its module where this process defined them", () => {
    const content = registry.find("review.completed");
    expect(content).toBeDefined();
    registerStepRoleTypes({
      review: {
        requested: "review.requested",
        cancel: "review.cancel.requested",
        answers: { completed: "review.completed", failed: "review.failed" },
      },
    });
    expect(registry.find("review.completed")).toBe(content);
  });

  it("registers the confirmation of a step role whose steps wait for outside work", () => {
    const waits = stepEntryOf("probe-wait", { ...steps, waits: true });
    expect(waits.confirm).toBe("probe_wait.node.confirm.requested");
    expect(stepEntryOf("probe-plain", steps).confirm).toBeUndefined();
    registerStepRoleTypes({ "probe-wait": waits });
    expect(registry.find("probe_wait.node.confirm.requested")?.topic).toBe("commands");
    expect(registry.has("probe_wait.node.requested")).toBe(true);
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
