import { WORKFLOW_NAME_PATTERN } from "../../../schemas/events/workflow";
import type { WorkflowDefinition } from "./definition";
import { WorkflowDefinitionError } from "./errors";
import { defineWorkflow } from "./graph";
import { newestIn, scopeLabel, type WorkflowRegistry, type WorkflowScope } from "./registry";
import type { Problem } from "./validate";
import { deepEqual, isRecord } from "./values";

/**
 * Putting a definition in the registry (./registry): every check first, every problem named at
 * once, then the version written once.
 *
 * - The definition is the language's (./definition; a `$schema` key for an editor is dropped),
 *   structurally sound (./validate), every node's role a step role of the stack, no larger than
 *   MAX_DEFINITION_BYTES, and named so a start can name it (kebab-case, as `workflow_name`) and
 *   not as a workflow the stack was given, by name or alias (which a start finds first).
 * - Without `version` it becomes the next version of its name in the scope (the newest + 1, or
 *   1), unless it is the newest version's definition (`unchanged`); with one, that version.
 * - A version that exists with the same definition (defaults applied) is left as it is
 *   (`unchanged`); with a different one the put is refused (`workflow.version_taken`). A
 *   version written is never changed.
 *
 * A refusal is a WorkflowDefinitionError with the first problem's code and `details.problems`
 * listing them all (code and message each).
 */

/** The largest definition stored, in bytes of JSON (a DynamoDB item holds 400 KB). */
export const MAX_DEFINITION_BYTES = 300_000;

export interface RegisterChecks {
  /** The stack's step roles: every role a node names must be one. @default not checked */
  readonly roles?: Iterable<string>;
  /** Names taken by the stack's workflows (their names and aliases). @default none */
  readonly reserved?: readonly string[];
  /**
   * A start names it (a registered workflow): its name must be one a start can give, and it
   * declares no alias. A stack's workflow may have a name no start gives (it runs as a child, or
   * is started by its alias). @default true
   */
  readonly startedByName?: boolean;
}

export interface PutOutcome {
  /** `stored`: the version was written; `unchanged`: it was there with this definition. */
  readonly outcome: "stored" | "unchanged";
  readonly definition: WorkflowDefinition;
}

/** How many times a put without a version tries the next one when another put took it. */
const NEXT_VERSION_ATTEMPTS = 3;

export async function putWorkflow(
  registry: WorkflowRegistry,
  scope: WorkflowScope,
  input: unknown,
  checks: RegisterChecks,
): Promise<PutOutcome> {
  const file = withoutSchemaKey(input);
  const pinned = file.version !== undefined;
  for (let attempt = 1; ; attempt++) {
    const newest = pinned ? undefined : await newestOf(registry, scope, file.name);
    if (newest !== undefined) {
      // The newest version again, without its number: nothing to store.
      const same = checkedDefinition({ ...file, version: newest }, checks);
      if (await isStored(registry, scope, same)) return { outcome: "unchanged", definition: same };
    }
    const version = pinned ? file.version : (newest ?? 0) + 1;
    const definition = checkedDefinition({ ...file, version }, checks);
    if (await registry.create(scope, definition)) return { outcome: "stored", definition };
    if (await isStored(registry, scope, definition)) return { outcome: "unchanged", definition };
    if (pinned || attempt >= NEXT_VERSION_ATTEMPTS)
      throw new WorkflowDefinitionError(
        "workflow.version_taken",
        `workflow ${definition.name} v${definition.version} is registered ${scopeLabel(scope)} with a different definition; a version is never changed: put it as a new version (leave out "version", or give one not taken)`,
        { details: { scope, name: definition.name, version: definition.version } },
      );
  }
}

/**
 * The definition with defaults applied and compiled, or a WorkflowDefinitionError that names
 * every problem: the schema's, else the structure's and the roles'; and the name's beside either.
 * A definition too large is refused with the name's problems and its size, before it is parsed
 * or compiled: what it costs to check grows with its size, and it could never be stored.
 */
export function checkedDefinition(
  input: Record<string, unknown>,
  checks: RegisterChecks,
): WorkflowDefinition {
  const byName = checks.startedByName ?? true;
  const tooLarge = sizeProblems(input);
  const problems = [
    ...(byName ? nameProblems(input.name, checks.reserved ?? []) : []),
    ...(byName && input.alias !== undefined
      ? [
          {
            code: "workflow.alias_not_stack",
            message: `alias ${JSON.stringify(input.alias)}: only a stack's workflows (new AgentBus(app, id, { workflows })) have an alias; a registered one is started by its name`,
          },
        ]
      : []),
    ...tooLarge,
  ];
  let definition: WorkflowDefinition | undefined;
  if (tooLarge.length === 0)
    try {
      definition = defineWorkflow(
        input as WorkflowDefinition,
        checks.roles === undefined ? {} : { roles: checks.roles },
      );
    } catch (error) {
      if (!(error instanceof WorkflowDefinitionError)) throw error;
      problems.push(...problemsOf(error));
    }
  if (definition && problems.length === 0) return definition;
  const [first] = problems;
  const name = typeof input.name === "string" ? input.name : "(unnamed)";
  throw new WorkflowDefinitionError(
    first?.code ?? "dag.invalid_definition",
    `workflow ${name}: ${problems.map((p) => p.message).join("; ")}`,
    { details: { workflow: name, problems } },
  );
}

export type Listed = Pick<Problem, "code" | "message">;

/** The problems a definition error lists: the structure's, or one per schema issue. */
function problemsOf(error: WorkflowDefinitionError): Listed[] {
  const { problems, issues } = error.details as { problems?: Listed[]; issues?: string[] };
  if (problems) return problems.map(({ code, message }) => ({ code, message }));
  if (issues) return issues.map((message) => ({ code: error.code, message }));
  return [{ code: error.code, message: error.message }];
}

function nameProblems(name: unknown, reserved: readonly string[]): Listed[] {
  if (typeof name !== "string") return [];
  if (!WORKFLOW_NAME_PATTERN.test(name))
    return [
      {
        code: "workflow.bad_name",
        message: `name ${JSON.stringify(name)} cannot be started by name: it must be kebab-case (a-z, 0-9 and -, starting with a letter, at most 64)`,
      },
    ];
  if (reserved.includes(name))
    return [
      {
        code: "workflow.reserved_name",
        message: `name ${name} is taken by a workflow the stack was given (${reserved.join(", ")}), which a start by that name runs`,
      },
    ];
  return [];
}

function sizeProblems(input: Record<string, unknown>): Listed[] {
  const bytes = Buffer.byteLength(JSON.stringify(input));
  if (bytes <= MAX_DEFINITION_BYTES) return [];
  return [
    {
      code: "workflow.too_large",
      message: `the definition is ${bytes} bytes of JSON; at most ${MAX_DEFINITION_BYTES}`,
    },
  ];
}

/** The file as an object, without the `$schema` an editor reads. */
function withoutSchemaKey(input: unknown): Record<string, unknown> & { version?: unknown } {
  if (!isRecord(input) || Array.isArray(input))
    throw new WorkflowDefinitionError(
      "dag.invalid_definition",
      "a workflow definition is a JSON object (name, nodes, edges, ...)",
      {
        details: {
          problems: [{ code: "dag.invalid_definition", message: "not a JSON object" }],
        },
      },
    );
  const { $schema: _editor, ...definition } = input;
  return definition;
}

/** The newest version of `name` in the scope (none for a new name, or a name that is not one). */
async function newestOf(
  registry: WorkflowRegistry,
  scope: WorkflowScope,
  name: unknown,
): Promise<number | undefined> {
  return typeof name === "string" ? newestIn(registry, scope, name) : undefined;
}

/** Whether the registry holds exactly this definition at its version. */
async function isStored(
  registry: WorkflowRegistry,
  scope: WorkflowScope,
  definition: WorkflowDefinition,
): Promise<boolean> {
  const stored = await registry.get(scope, definition.name, definition.version);
  return deepEqual(stored, JSON.parse(JSON.stringify(definition)));
}
