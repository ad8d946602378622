import * as z from "../../../schemas/zod";
import { WorkflowDefinitionError } from "./errors";
import { RunInputSpecSchema } from "./input";
import { deepEqual, isRecord, show, valueAtPath } from "./values";

/**
 * The workflow definition language (seed 001 §3, §6): a workflow is data, nodes and edges
 * (optionally conditional, or a loop's way back), validated here by schema. A node is a task (a
 * role carries it out), a map (a role carries out each item of a list), a wait (for a time or a
 * signal) or a child (another workflow). The structural checks (duplicates, unknown nodes and
 * roles, cycles outside loops, reachability, where a map's list comes from, quorum sizes) are made
 * when a definition is compiled (`defineWorkflow` in ./graph, problems in ./validate).
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

const DotPath = z
  .string()
  .check(z.regex(DOT_PATH, { message: "must be a dot path like verdict or a.b.0" }));

export const EdgeConditionSchema = z
  .strictObject({
    /** Dot path into the upstream node's output, e.g. "verdict" or "checks.0.status". */
    path: DotPath,
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

/** At most this many rounds of one loop. */
export const MAX_LOOP_ROUNDS = 100;

/**
 * A loop edge goes back from the loop's last node (`from`) to its first (`to`): the nodes on
 * the paths between them are the loop's body, run again while `until` does not hold on the last
 * node's output, `maxRounds` rounds at most.
 */
export const LoopSchema = z.strictObject({
  /** The loop ends once this holds on the output of the edge's `from` node. */
  until: EdgeConditionSchema,
  /** Rounds at most, the first included. */
  maxRounds: z.int().check(z.minimum(1), z.maximum(MAX_LOOP_ROUNDS)),
  /** When the last round ends without `until`: "complete" (default) keeps the last output and
   * marks the loop `max_rounds`; "fail" fails the last node (DEGRADED under degrade "empty"). */
  onMax: z._default(z.enum(["complete", "fail"]), "complete"),
});

export const EdgeDefinitionSchema = z
  .strictObject({
    from: Identifier,
    to: Identifier,
    /** Conditional branch: taken only when this holds on `from`'s output (truthy when neither
     * `equals` nor `in` is given). Without `when` the edge is always taken. */
    when: z.optional(EdgeConditionSchema),
    /** Makes the edge a loop's way back (see LoopSchema); it counts in no in-degree. */
    loop: z.optional(LoopSchema),
  })
  .check(
    z.refine((e) => e.when === undefined || e.loop === undefined, {
      message: "a loop edge has no when: loop.until says when the loop ends",
    }),
  );

/** A value taken from an earlier node's output: the node, and a dot path into it (else all). */
export const OutputRefSchema = z.strictObject({
  node: Identifier,
  path: z.optional(DotPath),
});

/** A value taken from the run's input: a dot path into it. */
export const RunInputRefSchema = z.strictObject({
  input: DotPath,
});

/** Where a map's list is: in an upstream's output (`node`, `path`), or in the run's input. */
export const MapItemsSchema = z.union([OutputRefSchema, RunInputRefSchema], {
  error:
    "must be { node, path? } (a list in an upstream's output) or { input } (a dot path to a list in the run's input)",
});

/** The most items one map node may have (its items live in the run's stored state). */
export const MAX_MAP_ITEMS = 1000;
export const DEFAULT_MAP_ITEMS = 100;
export const DEFAULT_MAP_CONCURRENCY = 4;

/** A map node runs its role once per item of a list an earlier node produced. */
export const MapSchema = z
  .strictObject({
    /** The list: the value at `path` in the output of `node`, an upstream of the map node; or
     * at `input`, a dot path in the run's input (a child run mapping over what its parent gave). */
    items: MapItemsSchema,
    /** Items running at once (the run's caps apply too). */
    concurrency: z._default(
      z.int().check(z.positive(), z.maximum(MAX_MAP_ITEMS)),
      DEFAULT_MAP_CONCURRENCY,
    ),
    /** A longer list fails the node (bounds the run's state). */
    maxItems: z._default(z.int().check(z.positive(), z.maximum(MAX_MAP_ITEMS)), DEFAULT_MAP_ITEMS),
    /** Failed items tolerated; one more fails the node. Default 0. */
    maxFailed: z.optional(z.int().check(z.nonnegative())),
    /** Failed items tolerated as a fraction of the items (0..1), instead of maxFailed. */
    maxFailedFraction: z.optional(z.number().check(z.minimum(0), z.maximum(1))),
  })
  .check(
    z.refine((m) => m.maxFailed === undefined || m.maxFailedFraction === undefined, {
      message: "give either maxFailed or maxFailedFraction, not both",
    }),
  );

/** A wait node: a timer (`seconds` or `until`), or a signal with `seconds` or `until` as deadline. */
export const WaitSchema = z
  .strictObject({
    /** Seconds from the node's release. */
    seconds: z.optional(z.int().check(z.positive())),
    /** An ISO 8601 time with an offset, e.g. 2026-12-01T09:00:00Z. */
    until: z.optional(z.iso.datetime({ offset: true })),
    /** Wait for the signal with this key; the time above is then its deadline. */
    signal: z.optional(z.string().check(z.minLength(1), z.maxLength(128))),
  })
  .check(
    z.refine((w) => (w.seconds === undefined) !== (w.until === undefined), {
      message: "give either seconds or until (for a signal: its deadline)",
    }),
  );

/**
 * A child node runs another workflow and ends as it ends: one named (compiled into the
 * orchestrator or registered), or a plan, a workflow definition an upstream produced (an agent's
 * output), which is checked when the child starts.
 */
export const ChildWorkflowSchema = z
  .strictObject({
    /** The workflow to run, by name. */
    name: z.optional(Identifier),
    /** The version to run; the newest registered one when absent. Only with `name`. */
    version: z.optional(z.int().check(z.positive())),
    /** The workflow to run is the definition at `path` in the output of `node`, an upstream. */
    plan: z.optional(OutputRefSchema),
    /** The child's input, field by field, from earlier outputs; without it, the outputs of the
     * node's taken upstreams by node id (as a task node's input). */
    input: z.optional(z.record(Identifier, OutputRefSchema)),
    /** A child that ends PARTIAL counts as completed (default: as failed). */
    acceptPartial: z._default(z.boolean(), false),
  })
  .check(
    z.refine((w) => (w.name === undefined) !== (w.plan === undefined), {
      message: "give either name (a workflow by name) or plan (a definition an upstream produced)",
    }),
    z.refine((w) => w.version === undefined || w.name !== undefined, {
      message: "version goes with name: a plan is run as it is",
    }),
  );

export const JOINS = ["all", "any-success", "quorum", "first-wins"] as const;

export const NodeDefinitionSchema = z.strictObject({
  id: Identifier,
  /** The role (consumer group) that carries out the step; absent on wait and child nodes. */
  role: z.optional(Identifier),
  /** On failure: "fail" (default) -> FAILED and downstream CANCELLED; "empty" -> DEGRADED with
   * output {} and downstream continues. */
  degrade: z._default(z.enum(["fail", "empty"]), "fail"),
  /** How the node treats its upstream branches: "all" (default) cancels it as soon as one
   * fails; "any-success" runs it with the branches that succeeded once all have ended;
   * "quorum" runs it once `quorum` branches succeeded; "first-wins" runs it with the first
   * branch that succeeded and drops the others. */
  join: z._default(z.enum(JOINS), "all"),
  /** How many upstream branches must succeed under join "quorum". */
  quorum: z.optional(z.int().check(z.positive())),
  /** How long the node may wait for its inputs (and a release) before it ends with a dependency
   * timeout; overrides the workflow's `dependencyTimeoutSeconds`. */
  dependencyTimeoutSeconds: z.optional(z.int().check(z.positive())),
  /** Run the role once per item of a list (a map node). */
  map: z.optional(MapSchema),
  /** Wait for a time or a signal instead of running a role (a wait node). */
  wait: z.optional(WaitSchema),
  /** Run another workflow instead of a role (a child node). */
  workflow: z.optional(ChildWorkflowSchema),
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
  /**
   * Another name a start may give, kebab-case: it starts the newest version of this workflow
   * that declares it (a stack's workflows only: functions/core/stack-workflows.ts).
   */
  alias: z.optional(
    z.string().check(
      z.regex(/^[a-z][a-z0-9-]{0,63}$/, {
        message: "must be kebab-case (a-z, 0-9 and -), max 64",
      }),
    ),
  ),
  nodes: z.array(NodeDefinitionSchema).check(z.maxLength(1000)),
  edges: z._default(z.array(EdgeDefinitionSchema).check(z.maxLength(10_000)), []),
  concurrency: z.optional(ConcurrencySchema),
  /** How long any node may wait for its inputs (and a release) before it ends with a dependency
   * timeout; the orchestrator's default when absent. */
  dependencyTimeoutSeconds: z.optional(z.int().check(z.positive())),
  /** The run input a start must give (./input): without it, any JSON object. */
  input: z.optional(RunInputSpecSchema),
});

export type EdgeCondition = z.output<typeof EdgeConditionSchema>;
export type EdgeDefinition = z.output<typeof EdgeDefinitionSchema>;
export type NodeDefinition = z.output<typeof NodeDefinitionSchema>;
export type Concurrency = z.output<typeof ConcurrencySchema>;
export type Loop = z.output<typeof LoopSchema>;
export type OutputRef = z.output<typeof OutputRefSchema>;
export type RunInputRef = z.output<typeof RunInputRefSchema>;
export type MapItems = z.output<typeof MapItemsSchema>;
export type MapSpec = z.output<typeof MapSchema>;
export type WaitSpec = z.output<typeof WaitSchema>;
export type ChildWorkflow = z.output<typeof ChildWorkflowSchema>;
export type Join = (typeof JOINS)[number];
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

/** The value an output reference points at in `output` (all of it without a path). */
export function valueAt(ref: OutputRef, output: unknown): unknown {
  return ref.path === undefined ? output : valueAtPath(output, ref.path.split("."));
}

/** The value where a map's list is: at `input` in the run's input, else in `node`'s output. */
export function mapListAt(
  items: MapItems,
  runInput: unknown,
  outputOf: (node: string) => unknown,
): unknown {
  if ("input" in items) return valueAtPath(runInput, items.input.split("."));
  return valueAt(items, outputOf(items.node));
}

/** Where a map's list is, in words: `topic-selection.claims`, `run input claims`. */
export function itemsLabel(items: MapItems): string {
  if ("input" in items) return `run input ${items.input}`;
  return `${items.node}${items.path ? `.${items.path}` : ""}`;
}

/** Whether an edge with this condition is taken for the upstream `output`. */
export function conditionHolds(when: EdgeCondition | undefined, output: unknown): boolean {
  if (!when) return true;
  const value = valueAtPath(output, when.path.split("."));
  if (when.equals !== undefined) return deepEqual(value, when.equals);
  if (when.in !== undefined) return when.in.some((candidate) => deepEqual(value, candidate));
  return Boolean(value);
}
