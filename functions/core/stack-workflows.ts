import * as z from "../../schemas/zod";
import type { WorkflowDefinition } from "./dag/definition";
import { WorkflowDefinitionError } from "./dag/errors";
import { defineWorkflow } from "./dag/graph";
import { checkedDefinition } from "./dag/register";
import { deepEqual } from "./dag/values";
import { packedJsonText, packJson } from "./packed-json";

/**
 * The workflows an application gives its stack (`workflows` of `new AgentBus`). The stack checks
 * them when it is synthesized, every problem named at once: each definition as a registered one
 * is checked (./dag/register.ts: the language, the structure, every node's role a step role of
 * the stack; a name no start gives is allowed, for a workflow run as a child or started by its
 * alias), each version given once, and each name a start gives (a name, an alias) one workflow's.
 * It writes them as one value, where each reader finds it, with nothing written at deploy
 * time: the orchestrator's environment (`WORKFLOWS`, read as it reads the table of step roles,
 * `STEP_ROLES`: ./steps.ts) and the front door's, on AWS and on the local runtime alike; and the
 * stack's output `StackWorkflows`, which the operator tools read with the stack's other names
 * (`--outputs`, or what the local stack published). Each lists, shows and starts them as the
 * scope `stack` (functions/roles/orchestrator/catalog.ts).
 *
 * Lambda holds at most 4 KB of environment per function, keys and values together, so the
 * value may take MAX_WORKFLOWS_ENV_BYTES of it and the synth refuses more. The value is their
 * JSON, compressed when it is long (./packed-json.ts: a version kept for the runs in flight
 * repeats much of the next, so the reference stack's 6 KB of JSON take some 860 bytes); every
 * reader decodes it alike (`stackWorkflowsOf`, or the settings' `WorkflowsJson`). A larger set is
 * registered at run time instead (`agentbus workflow put`, ./dag/register.ts), where a
 * definition may be 300 KB.
 */

/** The environment variable the orchestrator and the front door read the stack's workflows from. */
export const WORKFLOWS_ENV = "WORKFLOWS";

/** The stack output the operator tools read the stack's workflows from (absent: none). */
export const STACK_WORKFLOWS_OUTPUT = "StackWorkflows";

/**
 * The most bytes of JSON the workflows may take in the orchestrator's environment: half of
 * Lambda's 4,096 for the whole environment. The other half is the orchestrator's other variables:
 * about 1.1 KB with two step roles (the tables, its queues, its settings), some 230 bytes more
 * per step role (its commands in `STEP_ROLES`, its queue's URL in `AGENT_QUEUE_URLS`). The front
 * door, given the same value, has some 200 bytes fewer of other variables (measured with every
 * table's and bus's name counted as 80 bytes: 917 against 1,128 with two step roles, 1,343
 * against 1,534 with the reference stack's), so this budget holds for it too.
 */
export const MAX_WORKFLOWS_ENV_BYTES = 2_048;

/** `WORKFLOWS`: the definitions as JSON (compressed when long: ./packed-json.ts), each compiled as it is read. */
export const WorkflowsJson = packedJsonText(
  z.array(z.record(z.string(), z.unknown())),
  "a JSON array of workflow definitions",
);

/** The workflows as their environment variable holds them. */
export function workflowsEnvValue(workflows: readonly WorkflowDefinition[]): string {
  return packJson(workflows);
}

/** The definitions of `WORKFLOWS` compiled (a WorkflowDefinitionError names what is wrong). */
export function workflowsOf(
  definitions: readonly Record<string, unknown>[] | undefined,
): WorkflowDefinition[] {
  return (definitions ?? []).map((d) => defineWorkflow(d as WorkflowDefinition));
}

/**
 * The stack's workflows from the text of `WORKFLOWS` or of the output `StackWorkflows` (`where`
 * says which, for the error), compiled; none when there is no text. An Error names what is wrong.
 */
export function stackWorkflowsOf(text: string | undefined, where: string): WorkflowDefinition[] {
  if (text === undefined) return [];
  const parsed = WorkflowsJson.safeParse(text);
  if (!parsed.success)
    throw new Error(`${where} is not the stack's workflows: ${z.prettifyError(parsed.error)}`);
  try {
    return workflowsOf(parsed.data);
  } catch (error) {
    if (!(error instanceof WorkflowDefinitionError)) throw error;
    throw new Error(`${where} holds a workflow that is not valid: ${error.message}`);
  }
}

/** Every reason the stack cannot run `workflows` with these step roles; none when it can. */
export function stackWorkflowProblems(
  workflows: readonly WorkflowDefinition[],
  stepRoles: readonly string[],
): string[] {
  const problems: string[] = [];
  const given = new Map<string, WorkflowDefinition>();
  for (const definition of workflows) {
    const key = `${definition.name} v${definition.version}`;
    const earlier = given.get(key);
    if (earlier && !deepEqual(earlier, definition))
      problems.push(`workflow ${key} is given twice, as two definitions: give each version once`);
    given.set(key, definition);
    try {
      checkedDefinition(definition as unknown as Record<string, unknown>, {
        roles: stepRoles,
        startedByName: false,
      });
    } catch (error) {
      if (!(error instanceof WorkflowDefinitionError)) throw error;
      problems.push(
        `${error.message} (step roles of the stack: ${stepRoles.join(", ") || "none"})`,
      );
    }
  }
  problems.push(...aliasProblems(workflows));
  const bytes = Buffer.byteLength(workflowsEnvValue(workflows));
  if (bytes > MAX_WORKFLOWS_ENV_BYTES)
    problems.push(
      `the workflows take ${bytes} bytes (${Buffer.byteLength(JSON.stringify(workflows))} of JSON, compressed), and the orchestrator's environment holds ${MAX_WORKFLOWS_ENV_BYTES} of them (Lambda's limit is 4 KB in all): give the stack fewer, and register the others at run time (agentbus workflow put)`,
    );
  return problems;
}

/** An alias two workflows declare, or that is another workflow's name: a start could not tell. */
function aliasProblems(workflows: readonly WorkflowDefinition[]): string[] {
  const names = new Set(workflows.map((w) => w.name));
  const owner = new Map<string, string>();
  const problems = new Set<string>();
  for (const { name, version, alias } of workflows) {
    if (alias === undefined) continue;
    if (names.has(alias))
      problems.add(`workflow ${name} v${version}: alias ${alias} is the name of a workflow`);
    const earlier = owner.get(alias);
    if (earlier !== undefined && earlier !== name)
      problems.add(`alias ${alias} is declared by ${earlier} and by ${name}: give each its own`);
    owner.set(alias, name);
  }
  return [...problems];
}
