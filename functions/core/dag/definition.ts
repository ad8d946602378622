import * as z from "../../../schemas/zod";
import { WorkflowDefinitionError } from "./errors";
import { deepEqual, isRecord, show, valueAtPath } from "./values";

/**
 * The workflow definition language (seed 001 §3, §6): a workflow is data, nodes (an agent role
 * each) and edges (optionally conditional), validated here by schema. The structural checks
 * (duplicates, unknown nodes, cycles, a root) are made when a definition is compiled
 * (`defineWorkflow` in ./graph).
 */

const IDENTIFIER = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
export const Identifier = z.string().check(
  z.regex(IDENTIFIER, {
    message: "must be 1-64 characters of A-Z a-z 0-9 _ . - starting with a letter or digit",
  }),
);
const DOT_PATH = /^[^.]+(\.[^.]+)*$/;

/** Default cap on RUNNING nodes of one run (the seed's min(cpu*2, 16) with the CPU term unknown). */
export const DEFAULT_GLOBAL_CONCURRENCY = 16;

export const EdgeConditionSchema = z
  .strictObject({
    /** Dot path into the upstream node's output, e.g. "verdict" or "checks.0.status". */
    path: z
      .string()
      .check(z.regex(DOT_PATH, { message: "must be a dot path like verdict or a.b.0" })),
    /** The edge is taken when the value at `path` deep-equals this. */
    equals: z.optional(z.unknown()),
    /** The edge is taken when the value at `path` deep-equals one of these. */
    in: z.optional(z.array(z.unknown()).check(z.minLength(1))),
  })
  .check(
    z.refine((c) => c.equals === undefined || c.in === undefined, {
      message: "give either equals or in, not both",
    }),
  );

export const EdgeDefinitionSchema = z.strictObject({
  from: Identifier,
  to: Identifier,
  /** Conditional branch: taken only when this holds on `from`'s output (truthy when neither
   * `equals` nor `in` is given). Without `when` the edge is always taken. */
  when: z.optional(EdgeConditionSchema),
});

export const NodeDefinitionSchema = z.strictObject({
  id: Identifier,
  /** The agent role (consumer group) that executes the node. */
  role: Identifier,
  /** On failure: "fail" (default) -> FAILED and downstream CANCELLED; "empty" -> DEGRADED with
   * output {} and downstream continues. */
  degrade: z._default(z.enum(["fail", "empty"]), "fail"),
  /** How the node treats failed upstream branches: "all" (default) cancels it as soon as one
   * fails; "any-success" runs it with the branches that succeeded once all have ended. */
  join: z._default(z.enum(["all", "any-success"]), "all"),
  /** How long the node may wait for its inputs (and a release) before it ends with a dependency
   * timeout; overrides the workflow's `dependencyTimeoutSeconds`. */
  dependencyTimeoutSeconds: z.optional(z.int().check(z.positive())),
});

export const ConcurrencySchema = z.strictObject({
  /** Cap on RUNNING nodes of one run; default DEFAULT_GLOBAL_CONCURRENCY. */
  global: z.optional(z.int().check(z.positive())),
  /** Cap on RUNNING nodes of one run per role; roles not listed are capped only globally. */
  perRole: z.optional(z.record(Identifier, z.int().check(z.positive()))),
});

export const WorkflowDefinitionSchema = z.strictObject({
  name: Identifier,
  version: z.int().check(z.positive()),
  nodes: z.array(NodeDefinitionSchema).check(z.maxLength(1000)),
  edges: z._default(z.array(EdgeDefinitionSchema).check(z.maxLength(10_000)), []),
  concurrency: z.optional(ConcurrencySchema),
  /** How long any node may wait for its inputs (and a release) before it ends with a dependency
   * timeout; the orchestrator's default when absent. */
  dependencyTimeoutSeconds: z.optional(z.int().check(z.positive())),
});

export type EdgeCondition = z.output<typeof EdgeConditionSchema>;
export type EdgeDefinition = z.output<typeof EdgeDefinitionSchema>;
export type NodeDefinition = z.output<typeof NodeDefinitionSchema>;
export type Concurrency = z.output<typeof ConcurrencySchema>;
export type WorkflowDefinition = z.output<typeof WorkflowDefinitionSchema>;
/** What an author writes: `degrade`, `join` and `edges` may be left out. */
export type WorkflowDefinitionInput = z.input<typeof WorkflowDefinitionSchema>;

/**
 * The definition with defaults applied, or WorkflowDefinitionError with every schema issue and
 * the offending value (dag.bad_concurrency when the concurrency block is wrong, else
 * dag.invalid_definition).
 */
export function parseDefinition(input: unknown): WorkflowDefinition {
  const parsed = WorkflowDefinitionSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues;
  const name = isRecord(input) && typeof input.name === "string" ? input.name : "(unnamed)";
  const described = issues.map((issue) => {
    const where = issue.path.map(String).join(".") || "(definition)";
    const got = valueAtPath(input, issue.path);
    return `${where}: ${issue.message} (got ${show(got)})`;
  });
  const concurrency = issues.find((i) => i.path[0] === "concurrency");
  const code = concurrency ? "dag.bad_concurrency" : "dag.invalid_definition";
  throw new WorkflowDefinitionError(code, `workflow ${name}: ${described.join("; ")}`, {
    details: { workflow: name, issues: described },
  });
}

/** Whether an edge with this condition is taken for the upstream `output`. */
export function conditionHolds(when: EdgeCondition | undefined, output: unknown): boolean {
  if (!when) return true;
  const value = valueAtPath(output, when.path.split("."));
  if (when.equals !== undefined) return deepEqual(value, when.equals);
  if (when.in !== undefined) return when.in.some((candidate) => deepEqual(value, candidate));
  return Boolean(value);
}
