import {
  type MapSpec,
  valueAt,
  type WorkflowDefinition,
} from "../../../functions/core/dag/definition";
import type { MapItemResult } from "../../../functions/core/dag/map";
import type { DagRun } from "../../../functions/core/dag/run";
import { deepEqual } from "../../../functions/core/dag/values";
import { canonical } from "../../operator/rebuild";
import type { Violation } from "./violation";

/**
 * What "correct" means for the nodes of a workflow run beyond its end (./invariants.ts checks
 * that every run asked for ended): each map item is carried out once per assignment, and a map
 * node ends with its items' results in list order, its failures within its tolerance, or fails.
 */

/** The answer a step role committed for one map item's assignment. */
export interface ItemAnswer {
  readonly node: string;
  readonly generation: number;
  readonly item: number;
  /** The step's output (`step.completed`) or its error (`step.failed`). */
  readonly outcome: { readonly output: unknown } | { readonly error: unknown };
}

/** One workflow run: its definition, how it stands at the end, and its items' answers. */
export interface WorkflowRunFacts {
  readonly definition: WorkflowDefinition;
  /** Undefined when the run was never started. */
  readonly run: DagRun | undefined;
  /** Every answer committed for an item of one of its map nodes, repeated answers included. */
  readonly itemAnswers: readonly ItemAnswer[];
}

export function checkWorkflowRuns(runs: readonly WorkflowRunFacts[]): Violation[] {
  return runs.flatMap((facts) => [...itemsRunOnce(facts), ...mapsEndedInOrder(facts)]);
}

const assignmentOf = (a: Pick<ItemAnswer, "node" | "generation" | "item">) =>
  `${a.node} generation ${a.generation} item ${a.item}`;

/**
 * A map item runs once per assignment: however often its request came (sent again after a lease
 * ran out, delivered twice), every answer its role committed is the same answer.
 */
function itemsRunOnce({ run, itemAnswers }: WorkflowRunFacts): Violation[] {
  const byAssignment = new Map<string, Set<string>>();
  for (const answer of itemAnswers) {
    const key = assignmentOf(answer);
    const outcomes = byAssignment.get(key) ?? new Set<string>();
    outcomes.add(canonical(answer.outcome));
    byAssignment.set(key, outcomes);
  }
  return [...byAssignment]
    .filter(([, outcomes]) => outcomes.size > 1)
    .map(([key, outcomes]) => ({
      invariant: "map item run once",
      detail: `run ${run?.run_id ?? "?"} ${key} was answered ${outcomes.size} different ways: ${[...outcomes].join(" | ").slice(0, 300)}`,
    }));
}

/**
 * A map node of a run that ended is COMPLETED with one result per item of its list, in list
 * order (each the answer its item's role committed) and no more failures than it tolerates, or
 * it FAILED because its items did (`dag.map_failed`), its list was not one or it waited too long
 * for it; or it never ran (CANCELLED, SKIPPED: an upstream failed).
 */
function mapsEndedInOrder({ definition, run, itemAnswers }: WorkflowRunFacts): Violation[] {
  if (!run || run.status === "RUNNING") return [];
  const problems: string[] = [];
  for (const node of definition.nodes) {
    if (!node.map) continue;
    const state = run.nodes[node.id];
    if (!state) problems.push(`map node ${node.id} has no state`);
    else if (state.state === "COMPLETED") {
      const generation = state.assigned_generation ?? run.generation;
      const answers = itemAnswers.filter((a) => a.node === node.id && a.generation === generation);
      problems.push(...completedMapProblems(node.id, node.map, run, state.output, answers));
    } else if (state.state === "FAILED" && !MAP_FAILURES.has(state.error?.code ?? ""))
      problems.push(`map node ${node.id} failed with ${state.error?.code}, not on its items`);
    else if (!["FAILED", "CANCELLED", "SKIPPED"].includes(state.state))
      problems.push(`map node ${node.id} is ${state.state} in a run that ended ${run.status}`);
  }
  return problems.map((detail) => ({
    invariant: "map ended in order",
    detail: `run ${run.run_id}: ${detail}`,
  }));
}

const MAP_FAILURES = new Set([
  "dag.map_failed",
  "dag.map_items_invalid",
  "dag.map_too_many_items",
  "agent_run.dependency_timeout",
]);

/** What is wrong with a COMPLETED map node's output, given its list and its items' answers. */
function completedMapProblems(
  id: string,
  spec: MapSpec,
  run: DagRun,
  output: unknown,
  answers: readonly ItemAnswer[],
): string[] {
  const list = valueAt(spec.items, run.nodes[spec.items.node]?.output);
  const { items, failed } = (output ?? {}) as { items?: MapItemResult[]; failed?: number };
  if (!Array.isArray(list) || !Array.isArray(items))
    return [`map node ${id} completed without a list and its results`];
  if (items.length !== list.length)
    return [`map node ${id} has ${items.length} results for ${list.length} items`];
  const problems: string[] = [];
  const counted = items.filter((i) => i.status === "failed").length;
  const tolerated =
    spec.maxFailedFraction === undefined
      ? (spec.maxFailed ?? 0)
      : Math.floor(spec.maxFailedFraction * list.length);
  if (failed !== counted)
    problems.push(`map node ${id} says ${failed} failed, its results ${counted}`);
  if (counted > tolerated)
    problems.push(`map node ${id} completed with ${counted} failed items, tolerating ${tolerated}`);
  items.forEach((result, index) => {
    if (result.status !== "completed") return;
    const answered = answers.find((a) => a.item === index && "output" in a.outcome);
    if (!answered || !deepEqual((answered.outcome as { output: unknown }).output, result.output))
      problems.push(
        `map node ${id}: result ${index} is not what item ${index} answered (${canonical(result.output).slice(0, 120)})`,
      );
  });
  return problems;
}
