import { defineEventType } from "../../schemas";
import {
  type StepCommandTypes,
  StepRoleName,
  stepCommandDefinitions,
  stepCommandTypes,
} from "../../schemas/events/step";
import { MAX_HEARTBEAT_LEASE_SECONDS } from "../../schemas/events/workflow";
import * as z from "../../schemas/zod";
import { type IntegrationUses, usesOf } from "./integration";

/**
 * What a role declares to carry out workflow steps (functions/core/dag/README.md): the schema of
 * the step's input and of its output, and optionally the spelling of its commands and its lease.
 * From the declarations of a stack's role modules comes the table of its step roles, the one
 * thing the orchestrator knows of them: the commands to send each role and how long a started
 * step may go without a heartbeat. The orchestrator reads the table from its function's
 * environment (`STEP_ROLES`, JSON), which the stack writes from the modules it deploys; the test
 * kit builds the same table from modules (`stepRolesOf`).
 */

/** A step role's declaration (a role module's `steps`). */
export interface StepDeclaration {
  /**
   * The step's input: the run's input with the output of each upstream node under its node id
   * (`{ ...run_input, [node_id]: output }`), parsed by this schema before the step runs.
   */
  readonly input: z.ZodMiniType<unknown>;
  /** The step's output, a JSON object: the role checks its answer against it before it answers. */
  readonly output: z.ZodMiniType<Record<string, unknown>>;
  /**
   * The commands' spellings when the role has its own (defined with its event types); left out:
   * derived from the group (`<stem>.node.requested`, `<stem>.node.cancel.requested`).
   */
  readonly types?: StepCommandTypes;
  /** How long a started step may go without a heartbeat, in seconds. @default the orchestrator's */
  readonly leaseSeconds?: number;
  /**
   * A role that takes its step commands itself carries out map items too: it keeps a record per
   * item, and names the item in its answers. The kit's step handler
   * always does. @default false
   */
  readonly items?: boolean;
}

/** What the orchestrator knows of one step role. */
export const StepRoleEntry = z.object({
  requested: z.string().check(z.minLength(1)),
  cancel: z.string().check(z.minLength(1)),
  confirm: z.optional(z.string().check(z.minLength(1))),
  lease_seconds: z.optional(z.int().check(z.positive(), z.maximum(MAX_HEARTBEAT_LEASE_SECONDS))),
  /**
   * The role carries out map items: it keeps a record per item and names the item in its answers.
   * The kit's step handler does (./step-role.ts); a role that takes its commands itself when it
   * declares so (`StepDeclaration.items`).
   */
  items: z.optional(z.boolean()),
  /**
   * The integrations of `access: "write"` its role module uses (their names, sorted): what it may
   * change outside AgentBus while it carries out a step. A plan that names such a role runs only
   * with a person's approval (functions/roles/orchestrator/plan-approval.ts). Left out: it writes
   * nothing.
   */
  writes: z.optional(z.array(z.string().check(z.minLength(1)))),
});
export type StepRoleEntry = z.output<typeof StepRoleEntry>;

/** The step roles of a stack, by group. */
export const StepRoleTable = z.record(StepRoleName, StepRoleEntry);
export type StepRoleTable = z.output<typeof StepRoleTable>;

/** The environment variable the orchestrator reads its step roles from. */
export const STEP_ROLES_ENV = "STEP_ROLES";

/** The commands of a step role: its own spellings, or those derived from its group. */
export function stepTypesOf(
  group: string,
  steps: Pick<StepDeclaration, "types">,
): StepCommandTypes {
  return steps.types ?? stepCommandTypes(group);
}

/**
 * The table entry of a group that declares `steps`; `items` when the kit's step handler carries
 * them out (`handled`), or the role declares it carries out map items itself; `writes` the write
 * integrations its module uses (`uses`, ./integration.ts).
 */
export function stepEntryOf(
  group: string,
  steps: StepDeclaration,
  handled = false,
  uses?: IntegrationUses,
): StepRoleEntry {
  const items = handled || steps.items === true;
  const writes = writeIntegrationsOf(uses);
  const { requested, cancel, confirm } = stepTypesOf(group, steps);
  return {
    requested,
    cancel,
    ...(confirm === undefined ? {} : { confirm }),
    ...(steps.leaseSeconds === undefined ? {} : { lease_seconds: steps.leaseSeconds }),
    ...(items ? { items } : {}),
    ...(writes.length > 0 ? { writes } : {}),
  };
}

/** The names of the integrations in `uses` that write (`access: "write"`), sorted, each once. */
export function writeIntegrationsOf(uses: IntegrationUses | undefined): string[] {
  const names = usesOf(uses)
    .filter(([, use]) => use.integration.access === "write")
    .map(([, use]) => use.integration.name);
  return [...new Set(names)].sort();
}

/** The step roles among role modules (those that declare `steps`), by group. */
export function stepRolesOf(
  modules: readonly {
    readonly deployment: { readonly needs?: { readonly steps?: StepRoleEntry } };
    readonly descriptor: { readonly group: string };
  }[],
): StepRoleTable {
  const table: Record<string, StepRoleEntry> = {};
  for (const module of modules) {
    const entry = module.deployment.needs?.steps;
    if (entry) table[module.descriptor.group] = entry;
  }
  return table;
}

/** `STEP_ROLES`: the table as JSON. */
export const StepRolesJson = z.jsonText(StepRoleTable, "a JSON object of group -> step role");

/**
 * Register the commands of the table's step roles that spell none of their own (derived from the
 * group, as their modules register them), so that an orchestrator whose function holds none of
 * those modules (the hub's, deployed for an application) can emit them. A role that spells its
 * own registers them with its event types, which the orchestrator must then know otherwise (its
 * function holds the role's event types).
 */
export function registerStepCommands(table: StepRoleTable | undefined): void {
  for (const [group, entry] of Object.entries(table ?? {})) {
    const derived = stepCommandTypes(group);
    if (entry.requested !== derived.requested || entry.cancel !== derived.cancel) continue;
    for (const definition of stepCommandDefinitions(group)) defineEventType(definition);
  }
}
