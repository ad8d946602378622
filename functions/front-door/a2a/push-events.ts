import { RUN_ENDS } from "../../roles/orchestrator/apply";
import { DAG_RUN } from "../runs-in-flight";

/**
 * The stored events that move an A2A task from one row of ./task.ts's table to another: what the
 * relay sends the push function's queue (lib/infra/constructs/a2a-push.ts, `Relay.deliverTo`), as
 * the relay matches them, an EventBridge pattern per topic without `source`
 * (functions/core/direct-delivery.ts). Only runs' (order key `run_...`): the push function tells
 * an A2A task's run from another's.
 *
 * - commands: what the orchestrator appends to a run's own stream, which it writes with the run's
 *   state: a step's request (the task is `working`), its confirmation (`working` again after
 *   `input-required`), its cancel, a child run's start or cancel. Their names are the stack's
 *   step roles' (`<stem>.requested`, ...): the pattern takes the stream, not the names.
 * - events: how a run ended (`completed`, `failed`, `canceled`) or was refused, on its own stream;
 *   and the reports that make a task `input-required` without any event on the run's stream: a
 *   step role's `node.blocked` (a confirmation), a child's `workflow.child.approval.requested` (a
 *   plan that writes). The push function waits for the orchestrator to apply those.
 *
 * Left out: the step roles' answers (`step.completed`, ...), whose effect on the run the
 * orchestrator writes as one of the above (the next step's request, the run's end), and every
 * event of the agents' and conversations' own streams.
 */
export const PUSH_EVENT_RULES = {
  commands: {
    detail: { aggregate: { type: [DAG_RUN] }, order_key: [{ prefix: "run_" }] },
  },
  events: {
    "detail-type": [
      ...RUN_ENDS,
      "workflow.rejected",
      "node.blocked",
      "workflow.child.approval.requested",
    ],
    detail: { order_key: [{ prefix: "run_" }] },
  },
} as const;
