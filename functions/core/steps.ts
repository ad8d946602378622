import { defineEventType, registry } from "../../schemas";
import {
  ownStepDefinitions,
  type StepAnswerTypes,
  type StepCommandTypes,
  StepRoleName,
  stepCommandDefinitions,
  stepCommandTypes,
} from "../../schemas/events/step";
import { MAX_HEARTBEAT_LEASE_SECONDS, WORKFLOW_NAME_PATTERN } from "../../schemas/events/workflow";
import * as z from "../../schemas/zod";
import { type IntegrationUses, usesOf } from "./integration";
import { type OutputSchema, outputSchemaIssues, outputSchemaOf } from "./output-schema";
import { packedJsonText, packJson } from "./packed-json";

/**
 * What a role declares to carry out workflow steps (functions/core/dag/README.md): the schema of
 * the step's input and of its output, and optionally the spelling of its commands and its lease.
 * From the declarations of a stack's role modules comes the table of its step roles, the one
 * thing the orchestrator knows of them: the commands to send each role, how long a started step
 * may go without a heartbeat, and for a role that answers with its own types, those types and
 * its output's schema (as JSON Schema, ./output-schema.ts). The orchestrator reads the table from its function's
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
  /**
   * The answers' spellings when the role has its own (defined with its event types: their
   * payloads the hub's node payloads, `nodeCompletedPayload(output)` and `NodeFailedPayload`);
   * left out: it answers `step.completed` / `step.failed`, naming itself. The orchestrator takes
   * them, and checks an output a person gives for one of its nodes against `output`.
   */
  readonly answers?: StepAnswerTypes;
  /** How long a started step may go without a heartbeat, in seconds. @default the orchestrator's */
  readonly leaseSeconds?: number;
  /**
   * The kit's step handler may wait for outside work it started (`a2aStep`'s remote task still
   * working): the node is BLOCKED until the work's next poll, which the orchestrator hands back
   * as the role's confirmation (`<stem>.node.confirm.requested`, ./step-role.ts). @default false
   */
  readonly waits?: boolean;
  /**
   * A role that takes its step commands itself carries out map items too: it keeps a record per
   * item, and names the item in its answers. The kit's step handler
   * always does. @default false
   */
  readonly items?: boolean;
  /**
   * The role is offered to other agent systems over A2A through the front door
   * (functions/front-door/a2a): its agent card's skill says what it does, and a message starts a
   * run of `workflow` (a workflow in which the role is a node) with the message's text as the
   * input field `textInput` (a data part: the input as it is). @default not offered
   */
  readonly a2a?: StepA2a;
}

/** How a step role is offered over A2A (`StepDeclaration.a2a`). */
export const StepA2aSchema = z.object({
  /** What the role does, for a caller choosing an agent: the card's description and skill. */
  description: z.string().check(z.minLength(1), z.maxLength(1000)),
  /** The workflow a message starts (a stack workflow's name or alias, or a registered one). */
  workflow: z.string().check(z.regex(WORKFLOW_NAME_PATTERN)),
  /** The input field a message's text becomes. */
  textInput: z.string().check(z.minLength(1), z.maxLength(64)),
  /** Messages a caller might send, shown on the card. */
  examples: z.optional(z.array(z.string().check(z.minLength(1), z.maxLength(500)))),
});
export type StepA2a = z.output<typeof StepA2aSchema>;

/** What the orchestrator knows of one step role. */
export const StepRoleEntry = z.object({
  requested: z.string().check(z.minLength(1)),
  cancel: z.string().check(z.minLength(1)),
  confirm: z.optional(z.string().check(z.minLength(1))),
  /** The role's own answer types (`StepDeclaration.answers`); left out: step.completed|failed. */
  answers: z.optional(
    z.object({
      completed: z.string().check(z.minLength(1)),
      failed: z.string().check(z.minLength(1)),
    }),
  ),
  /**
   * The JSON Schema of its output, for a role with its own answer types: what an output a person
   * gives for one of its nodes must fit (./output-schema.ts). Left out: any JSON object.
   */
  output: z.optional(z.record(z.string(), z.unknown())),
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
  /** Offered over A2A (`StepDeclaration.a2a`); the front door's stream function serves it. */
  a2a: z.optional(StepA2aSchema),
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
  steps: Pick<StepDeclaration, "types" | "waits">,
): StepCommandTypes {
  return steps.types ?? stepCommandTypes(group, steps.waits);
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
  const { answers } = steps;
  return {
    requested,
    cancel,
    ...(confirm === undefined ? {} : { confirm }),
    ...(answers === undefined
      ? {}
      : {
          answers: { completed: answers.completed, failed: answers.failed },
          output: outputSchemaOf(steps.output),
        }),
    ...(steps.leaseSeconds === undefined ? {} : { lease_seconds: steps.leaseSeconds }),
    ...(items ? { items } : {}),
    ...(writes.length > 0 ? { writes } : {}),
    ...(steps.a2a === undefined ? {} : { a2a: steps.a2a }),
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

/** `STEP_ROLES`: the table as JSON, compressed when long (./packed-json.ts). */
export const StepRolesJson = packedJsonText(StepRoleTable, "a JSON object of group -> step role");

/** The table as its environment variable holds it. */
export function stepRolesEnvValue(table: StepRoleTable): string {
  return packJson(table);
}

/**
 * Register the event types of the table's step roles, so that an orchestrator whose function
 * holds none of their modules (the hub's, deployed for an application) can emit their commands
 * and take their answers: the commands derived from the group, as their modules register them;
 * a role's own spellings, where no module in this process defined them, with the hub's node
 * payloads (`ownStepDefinitions`).
 */
export function registerStepRoleTypes(table: StepRoleTable | undefined): void {
  for (const [group, entry] of Object.entries(table ?? {})) {
    const waits = entry.confirm !== undefined;
    const derived = stepCommandTypes(group, waits);
    if (
      entry.requested === derived.requested &&
      entry.cancel === derived.cancel &&
      entry.confirm === derived.confirm
    ) {
      for (const definition of stepCommandDefinitions(group, waits)) defineEventType(definition);
      continue;
    }
    for (const definition of ownStepDefinitions(group, entry, entry.answers))
      if (!registry.has(definition.type)) defineEventType(definition);
  }
}

/** The answer types of the table's step roles that answer with their own, with the role of each. */
export function ownAnswerTypes(
  table: StepRoleTable,
): { type: string; role: string; completed: boolean }[] {
  return Object.entries(table).flatMap(([role, { answers }]) =>
    answers === undefined
      ? []
      : [
          { type: answers.completed, role, completed: true },
          { type: answers.failed, role, completed: false },
        ],
  );
}

/**
 * `output` checked against the output schema of the step role `entry` (a person's output for one
 * of its nodes): the value, or each issue. A role whose entry carries no schema (it answers
 * `step.completed`, checked by itself) takes any JSON object.
 */
export function checkStepOutput(
  entry: StepRoleEntry | undefined,
  output: unknown,
): { ok: true; value: Record<string, unknown> } | { ok: false; issues: string[] } {
  const isObject = typeof output === "object" && output !== null && !Array.isArray(output);
  if (!isObject) return { ok: false, issues: ["(output): must be a JSON object"] };
  const issues = entry?.output ? outputSchemaIssues(entry.output as OutputSchema, output) : [];
  return issues.length > 0
    ? { ok: false, issues }
    : { ok: true, value: output as Record<string, unknown> };
}

/**
 * The descriptor of an orchestrating group in a stack with these step roles: it also takes the
 * answers of the roles that spell their own, and emits every role's commands (what the topology
 * routes to it and lets it write).
 */
export function orchestratingDescriptor<
  D extends { readonly subscriptions: readonly string[]; readonly emits?: readonly string[] },
>(descriptor: D, table: StepRoleTable): D {
  const answers = ownAnswerTypes(table).map(({ type }) => type);
  const commands = Object.values(table).flatMap(({ requested, cancel, confirm }) =>
    confirm === undefined ? [requested, cancel] : [requested, cancel, confirm],
  );
  return {
    ...descriptor,
    subscriptions: [...new Set([...descriptor.subscriptions, ...answers])],
    emits: [...new Set([...commands, ...(descriptor.emits ?? [])])],
  } as D;
}
