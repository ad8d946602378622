import {
  conditionHolds,
  type MapSpec,
  mapListAt,
  type WorkflowDefinition,
} from "../../../functions/core/dag/definition";
import type { MapItemResult } from "../../../functions/core/dag/map";
import type { DagRun } from "../../../functions/core/dag/run";
import { deepEqual } from "../../../functions/core/dag/values";
import { canonical } from "../../operator/rebuild";
import type { Violation } from "./violation";

/**
 * What "correct" means for the nodes of a workflow run beyond its end (./invariants.ts checks
 * that every run asked for ended): a step (a map item, a loop round) is carried out once per
 * assignment; a map node ends with its items' results in list order, its failures within its
 * tolerance, or fails; a loop runs no more rounds than its maximum and ends as it says; a child
 * node's assignment starts one child run, which ends before its parent's node; a wait node's
 * assignment ends once, released by a signal or by its time as it says; a signal releases the
 * waits RUNNING for it, and one that finds none (it came early, late, or twice) is recorded as
 * unmatched and changes nothing.
 */

/** The answer a step role committed for one assignment (`step.completed` or `step.failed`). */
export interface StepAnswer {
  readonly node: string;
  readonly generation: number;
  /** The map item answered, for an item of a map node. */
  readonly item?: number;
  /** The step's output (`step.completed`) or its error (`step.failed`). */
  readonly outcome: { readonly output: unknown } | { readonly error: unknown };
}

/** One workflow run: its definition, how it stands at the end, and its steps' answers. */
export interface WorkflowRunFacts {
  readonly id: string;
  readonly definition: WorkflowDefinition;
  /** Undefined when the run was never started. */
  readonly run: DagRun | undefined;
  /** For a child run: its parent's run, node and the node's generation. */
  readonly parent?: {
    readonly run_id: string;
    readonly node_id: string;
    readonly generation: number;
  };
  /** Where its end (`workflow.completed|partial|failed|cancelled`) is in the log, if it ended. */
  readonly endedAt: number | undefined;
  /** For a child run: where the first cancel its parent sent it is in the log, if one was. */
  readonly cancelSentAt: number | undefined;
  /** Every answer a step role committed for one of its nodes, repeated answers included. */
  readonly answers: readonly StepAnswer[];
  /** Every end of a wait node's assignment the run's committed states show, in order. */
  readonly waitEnds?: readonly WaitEnd[];
  /** Every signal sent to the run (`workflow.signal.requested`), and what it did. */
  readonly signals?: readonly SignalFacts[];
}

/** A wait node's assignment as one committed state of its run ended it (or changed its end). */
export interface WaitEnd {
  readonly node: string;
  readonly generation: number;
  /** COMPLETED, FAILED, DEGRADED, CANCELLED or SKIPPED. */
  readonly state: string;
  /** What released a COMPLETED wait (its output's `released_by`). */
  readonly releasedBy?: string;
  /** The error code a wait failed with (`dag.wait_deadline` when its signal's deadline came). */
  readonly error?: string;
  /** The type of the event whose commit ended it. */
  readonly cause: string;
}

/** A signal sent to a run, and, once it was applied, the run's state before and after it. */
export interface SignalFacts {
  readonly key: string;
  /** Absent when no state of the run recorded it (the run did not exist: it was refused). */
  readonly applied?: {
    /** The wait nodes RUNNING for its key just before it was applied (none in an ended run). */
    readonly waiting: readonly string[];
    /** The wait nodes RUNNING before that its commit ended. */
    readonly released: readonly string[];
    /** Its commit recorded `signal.unmatched` for its key in the run's timeline. */
    readonly unmatched: boolean;
    /** Its commit changed the run (a node, the run's status or its outputs). */
    readonly runChanged: boolean;
    /** The wait nodes for its key that had ended on their deadline before it came. */
    readonly timedOut: readonly string[];
  };
}

export function checkWorkflowRuns(runs: readonly WorkflowRunFacts[]): Violation[] {
  return [
    ...runs.flatMap((facts) => [
      ...stepsRunOnce(facts),
      ...mapsEndedInOrder(facts),
      ...loopsWithinRounds(facts),
      ...childEndedFirst(facts, runs),
      ...waitsReleasedOnce(facts),
      ...signalsReleasedWhatWaited(facts),
    ]),
    ...childrenStartedOnce(runs),
  ];
}

const assignmentOf = (a: Pick<StepAnswer, "node" | "generation" | "item">) =>
  `${a.node} generation ${a.generation}${a.item === undefined ? "" : ` item ${a.item}`}`;

/**
 * A step runs once per assignment (a node's generation, and its item for a map item): however
 * often its request came (sent again after a lease ran out, delivered twice), every answer its
 * role committed is the same answer.
 */
function stepsRunOnce({ run, answers }: WorkflowRunFacts): Violation[] {
  const byAssignment = new Map<string, Set<string>>();
  for (const answer of answers) {
    const key = assignmentOf(answer);
    const outcomes = byAssignment.get(key) ?? new Set<string>();
    outcomes.add(canonical(answer.outcome));
    byAssignment.set(key, outcomes);
  }
  return [...byAssignment]
    .filter(([, outcomes]) => outcomes.size > 1)
    .map(([key, outcomes]) => ({
      invariant: "step run once",
      detail: `run ${run?.run_id ?? "?"} ${key} was answered ${outcomes.size} different ways: ${[...outcomes].join(" | ").slice(0, 300)}`,
    }));
}

/**
 * A map node of a run that ended is COMPLETED with one result per item of its list, in list
 * order (each the answer its item's role committed) and no more failures than it tolerates, or
 * it FAILED because its items did (`dag.map_failed`), its list was not one or it waited too long
 * for it; or it never ran (CANCELLED, SKIPPED: an upstream failed).
 */
function mapsEndedInOrder({ definition, run, answers: all }: WorkflowRunFacts): Violation[] {
  if (!run || run.status === "RUNNING") return [];
  const problems: string[] = [];
  for (const node of definition.nodes) {
    if (!node.map) continue;
    const state = run.nodes[node.id];
    if (!state) problems.push(`map node ${node.id} has no state`);
    else if (state.state === "COMPLETED") {
      const generation = state.assigned_generation ?? run.generation;
      const answers = all.filter((a) => a.node === node.id && a.generation === generation);
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
  answers: readonly StepAnswer[],
): string[] {
  const list = mapListAt(spec.items, run.input, (node) => run.nodes[node]?.output);
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

/**
 * A loop of a run that ended ran no more rounds than its maximum (its last node answered in no
 * more generations than that), and says how it ended: on its condition, which then holds on its
 * last node's output, or at its maximum round; a loop whose last node never completed (it failed,
 * or the run was cancelled) ended where it stood.
 */
function loopsWithinRounds({ definition, run, answers }: WorkflowRunFacts): Violation[] {
  if (!run || run.status === "RUNNING") return [];
  const problems: string[] = [];
  for (const { from: exit, loop } of definition.edges) {
    if (!loop) continue;
    const record = run.loops?.[exit];
    const rounds = new Set(answers.filter((a) => a.node === exit).map((a) => a.generation)).size;
    if (rounds > loop.maxRounds || (record?.round ?? 1) > loop.maxRounds)
      problems.push(
        `loop ${exit} ran ${Math.max(rounds, record?.round ?? 1)} rounds, at most ${loop.maxRounds}`,
      );
    const last = run.nodes[exit];
    if (last?.state !== "COMPLETED") continue;
    if (record?.ended === "condition" && !conditionHolds(loop.until, last.output ?? {}))
      problems.push(`loop ${exit} ended on its condition, which does not hold on its output`);
    else if (record?.ended === "max_rounds" && record.round !== loop.maxRounds)
      problems.push(`loop ${exit} ended at its maximum after ${record.round} rounds`);
    else if (!record?.ended) problems.push(`loop ${exit} completed without ending`);
  }
  return problems.map((detail) => ({
    invariant: "loop within its rounds",
    detail: `run ${run.run_id}: ${detail}`,
  }));
}

/**
 * A child run ends before its parent's node: a node that ended on its child (COMPLETED with the
 * child's status, or FAILED with `dag.child_<status>`) has a child that ended so, earlier in the
 * log than its parent's end. A cancelled parent's child ends, CANCELLED unless it had ended
 * before its parent's cancel was sent.
 */
function childEndedFirst(child: WorkflowRunFacts, runs: readonly WorkflowRunFacts[]): Violation[] {
  const { parent } = child;
  const up = parent && runs.find((r) => r.id === parent.run_id);
  if (!parent || !up?.run || up.run.status === "RUNNING") return [];
  const status = child.run?.status ?? "not started";
  const node = up.run.nodes[parent.node_id];
  const endedOn = (node?.output as { status?: string } | undefined)?.status;
  const problems: string[] = [];
  if (node?.state === "COMPLETED" && endedOn !== status)
    problems.push(`its parent's node completed on a child ${endedOn}, the child is ${status}`);
  if (node?.state === "FAILED" && node.error?.code.startsWith("dag.child_"))
    if (node.error.code !== `dag.child_${status.toLowerCase()}`)
      problems.push(`its parent's node failed with ${node.error.code}, the child is ${status}`);
  const ended = node?.state === "COMPLETED" || node?.error?.code.startsWith("dag.child_");
  if (ended && !((child.endedAt ?? Infinity) < (up.endedAt ?? -1)))
    problems.push("its parent ended before it did");
  if (up.run.status === "CANCELLED" && status === "RUNNING")
    problems.push("its parent was cancelled, it runs on");
  const late = child.endedAt !== undefined && child.endedAt > (child.cancelSentAt ?? Infinity);
  if (up.run.status === "CANCELLED" && late && status !== "CANCELLED")
    problems.push(`its parent was cancelled before it ended, and it ended ${status}`);
  return problems.map((detail) => ({
    invariant: "child ended first",
    detail: `child run ${child.id} of ${parent.run_id} node ${parent.node_id}: ${detail}`,
  }));
}

/**
 * A child node's assignment starts one child run: its start, however often it is delivered or
 * sent, names the assignment's child, so no two runs have the same parent's run, node and
 * generation.
 */
function childrenStartedOnce(runs: readonly WorkflowRunFacts[]): Violation[] {
  const byAssignment = new Map<string, string[]>();
  for (const { id, parent } of runs) {
    if (!parent) continue;
    const key = `${parent.run_id} node ${parent.node_id} generation ${parent.generation}`;
    byAssignment.set(key, [...(byAssignment.get(key) ?? []), id]);
  }
  return [...byAssignment]
    .filter(([, children]) => children.length > 1)
    .map(([key, children]) => ({
      invariant: "child started once",
      detail: `run ${key} started ${children.length} child runs: ${children.join(", ")}`,
    }));
}

/**
 * A wait node's assignment ends once, and as what ended it says: released by a signal in the
 * commit of a `workflow.signal.requested`, by its timer or its deadline (`dag.wait_deadline`) in
 * that of the sweeper's `node.wait.expired`; none is still RUNNING in a run that ended.
 */
function waitsReleasedOnce({ definition, run, id, waitEnds = [] }: WorkflowRunFacts): Violation[] {
  const problems: string[] = [];
  const byAssignment = new Map<string, WaitEnd[]>();
  for (const end of waitEnds) {
    const key = assignmentOf(end);
    byAssignment.set(key, [...(byAssignment.get(key) ?? []), end]);
    const by = end.releasedBy ?? end.error;
    const expected =
      by === "signal"
        ? "workflow.signal.requested"
        : by === "timer" || by === "dag.wait_deadline"
          ? "node.wait.expired"
          : undefined;
    if (expected !== undefined && end.cause !== expected)
      problems.push(`wait ${key} ended ${end.state} (${by}) on a ${end.cause}`);
  }
  for (const [key, ends] of byAssignment)
    if (ends.length > 1)
      problems.push(
        `wait ${key} ended ${ends.length} times: ${ends.map((e) => `${e.state} (${e.releasedBy ?? e.error ?? "-"}) on ${e.cause}`).join(", ")}`,
      );
  if (run && run.status !== "RUNNING")
    for (const node of definition.nodes)
      if (node.wait && run.nodes[node.id]?.state === "RUNNING")
        problems.push(`wait ${node.id} is RUNNING in a run that ended ${run.status}`);
  return problems.map((detail) => ({
    invariant: "wait released once",
    detail: `run ${id}: ${detail}`,
  }));
}

/**
 * A signal releases exactly the wait nodes RUNNING for it when it is applied; one that finds
 * none (it came before its wait ran, after it was released or timed out, or to a run that ended)
 * is recorded as unmatched and changes nothing else in the run.
 */
function signalsReleasedWhatWaited({ id, signals = [] }: WorkflowRunFacts): Violation[] {
  const problems: string[] = [];
  for (const { key, applied } of signals) {
    if (!applied) continue;
    const { waiting, released, unmatched, runChanged, timedOut } = applied;
    const same = waiting.length === released.length && waiting.every((w) => released.includes(w));
    if (!same)
      problems.push(
        `signal ${key} released [${released.join(", ")}], the waits RUNNING for it were [${waiting.join(", ")}]`,
      );
    if (waiting.length > 0 && unmatched)
      problems.push(`signal ${key} was recorded unmatched while ${waiting.join(", ")} waited`);
    if (waiting.length > 0) continue;
    if (!unmatched) problems.push(`signal ${key} found no wait and was not recorded unmatched`);
    if (runChanged)
      problems.push(
        timedOut.length > 0
          ? `signal ${key} came after ${timedOut.join(", ")} timed out, and changed the run`
          : `signal ${key} found no wait, and changed the run`,
      );
  }
  return problems.map((detail) => ({
    invariant: "signal released what waited",
    detail: `run ${id}: ${detail}`,
  }));
}
