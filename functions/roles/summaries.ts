import type { StateSummary } from "../core/ports";
import type { ConversationView } from "./conversation-projection";
import type { OrchestratorState } from "./orchestrator-state";
import type { TaskView } from "./task-projection";

/**
 * How the operator's lists find the states of the reference roles (Role.summarize): kind and
 * status, and what waits for a person. Pure functions of the state, one per role.
 */

/** A workflow run; FAILED and PARTIAL runs wait for a person (re-run, reset or accept). */
export function summarizeRun(state: OrchestratorState): StateSummary {
  const { run } = state;
  const failed = Object.values(run.nodes).filter((n) => n.state === "FAILED").length;
  return {
    kind: "run",
    status: run.status,
    label: `${run.workflow.name} v${run.workflow.version}`,
    ...(run.status === "FAILED" || run.status === "PARTIAL" ? { waiting: "failed_run" } : {}),
    counts: { failed_nodes: failed, nodes: Object.keys(run.nodes).length },
  };
}

/**
 * A conversation, by its newest turn's status; a held reply waits for a person. Turns handed off
 * after a step failed for good are counted (`handed_off`).
 */
export function summarizeConversation(view: ConversationView): StateSummary {
  const turns = view.turn_order.flatMap((id) => {
    const turn = view.turns[id];
    return turn ? [turn] : [];
  });
  const held = turns.filter((t) => t.status === "held_for_review").length;
  const handedOff = turns.filter((t) => t.step_failure !== undefined).length;
  const newest = turns.at(-1);
  return {
    kind: "conversation",
    status: newest?.status ?? "empty",
    ...(newest?.intent ? { label: newest.intent } : {}),
    ...(held > 0 ? { waiting: "held_reply" } : {}),
    counts: { turns: turns.length, held, ...(handedOff > 0 ? { handed_off: handedOff } : {}) },
  };
}

/** A task, by its status. */
export function summarizeTask(view: TaskView): StateSummary {
  // Two literals rather than a spread of a conditional one: this runs on every write of a view.
  return view.title
    ? { kind: "task", status: view.status, label: view.title.slice(0, 80) }
    : { kind: "task", status: view.status };
}
