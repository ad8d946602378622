import { describe, expect, it } from "vitest";
import { InMemoryEventStore } from "../../functions/core/memory";
import type { Role, RoleDescriptor } from "../../functions/core/role";
import { buildRole } from "../../functions/core/role-module";
import { contentAgentRole } from "../../functions/roles/content-agents/content-agent";
import { CONTENT_ROLES } from "../../functions/roles/content-agents/events";
import { refundReviewModule } from "../../functions/roles/refund-review";
import { memoryRolePorts } from "../../lib/dev/role-kit/memory-ports";
import { topology } from "../../lib/infra/project";
import { referenceLocalModel, referenceOrchestrator } from "../support/reference";
import { supportHarness } from "./support-fixture";

/**
 * The topology declares each group with its role's descriptor, and the trace finds what a group
 * applied through it (lib/operator/recorded-outcomes): the role its handler builds at run time must be
 * the same descriptor, down to the `stateOf` function.
 */
describe("each group's descriptor in the topology is the one its role is built from", () => {
  const support = supportHarness();
  const built: readonly Role<unknown>[] = [
    referenceOrchestrator() as Role<unknown>,
    ...CONTENT_ROLES.map(
      (role) => contentAgentRole({ role, model: referenceLocalModel() }) as Role<unknown>,
    ),
    ...([
      support.conversation,
      support.router,
      support.orderLookup,
      // Built as its handler builds it: its module adds its steps to the agent.
      buildRole(
        refundReviewModule,
        memoryRolePorts(new InMemoryEventStore(), refundReviewModule.uses),
      ),
      support.replyGeneration,
      support.sender,
      support.projection,
    ] as Role<unknown>[]),
  ];

  it.each(built.map((role) => [role.group, role] as const))("%s", (group, role) => {
    const declared = topology.groups.find((g) => g.name === group)?.role as RoleDescriptor;
    expect(declared, `group ${group} is declared`).toBeDefined();
    expect(role.subscriptions).toEqual(declared.subscriptions);
    expect(role.emits).toEqual(declared.emits);
    expect(role.stateOf).toBe(declared.stateOf);
    expect(role.sharedStreams).toEqual(declared.sharedStreams);
    expect(role.unordered).toBe(declared.unordered);
  });

  it("covers every group of the topology that is built at run time", () => {
    const constants = ["task-projection", "audit"];
    expect(
      topology.groups
        .map((g) => g.name)
        .filter((name) => !constants.includes(name))
        .sort(),
    ).toEqual(built.map((r) => r.group).sort());
  });
});
