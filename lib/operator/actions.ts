import { stopMessage } from "../../functions/core/model-guard";
import type { SendResolution } from "../../functions/roles/customer-support/events/conversation";
import { type StepDecision, stepDecisionCheck } from "./agent-actions";
import { operatorName, recordAction, recordApproval } from "./audit";
import { operatorEnvelope, putCommand } from "./operator-command";
import { redrive, redriveAuditAction, redriveTargetProblem } from "./redrive";
import { renderRedriveText } from "./render-text";
import { loadRunState } from "./source";
import type { OpsStack } from "./stack";
import { resumeWork, type StopTarget, stopTargetProblem, stopWork } from "./stops";
import {
  type Decided,
  type ReviewDecision,
  replyKeyTask,
  reviewCheck,
  reviewCommand,
  type SupportCommand,
  type SupportOutcome,
  sendDecided,
  sendResolveCheck,
  sendResolveCommand,
  taskIdProblem,
} from "./support-actions";
import { type RunRequest, runRequestCommand, runRequestProblem } from "./workflow-actions";
import { catalogOf, compiledOf, type StartRequest, startWorkflow } from "./workflows";

/**
 * The operator's actions as the console offers them: the same checks and commands as the CLI
 * (./workflow-actions, ./support-actions, ./agent-actions, ./redrive, ./operator-command), each
 * answering with what was sent or why nothing was. Who asks is `operatorName()` (the user
 * running the console).
 */

/** `sent`: a command went out (or a redrive moved messages); `unchanged`: already so, nothing sent. */
export type ActionOutcomeKind = "sent" | "unchanged" | "refused" | "failed";

export interface ActionOutcome {
  readonly kind: ActionOutcomeKind;
  /** What was sent (with its event id), or why nothing was; the CLI's words. */
  readonly message: string;
  /** The page to show next, when it is not the form's (a started run's). */
  readonly next?: string;
}

/** What the console can ask of a stack. */
export interface OpsActions {
  /** Cancel, reset, resolve or re-run; `reason` is why (re-run's command has no field for it). */
  /** A run request; its reason travels in the request. */
  run(runId: string, request: RunRequest): Promise<ActionOutcome>;
  review(
    taskId: string,
    decision: ReviewDecision,
    fields: { readonly text?: string; readonly reason: string },
  ): Promise<ActionOutcome>;
  resolveSend(key: string, resolution: SendResolution, reason: string): Promise<ActionOutcome>;
  redrive(group: string, from: "queue" | "buffer", reason: string): Promise<ActionOutcome>;
  /**
   * A person's answer to what an agent run waits for (./agent-actions): a decision on call
   * `callId`, or with none the run's `answer`; the reason is optional.
   */
  decideStep(
    runId: string,
    callId: string | undefined,
    decision: StepDecision,
    fields: {
      readonly reason?: string;
      readonly output?: unknown;
      /** Since when the wait decided on waited, as the page showed it (./agent-actions.ts). */
      readonly waitingSince?: string;
    },
  ): Promise<ActionOutcome>;
  /** Start a run of a workflow with `input` (./workflows: checked against its declared input). */
  start(request: StartRequest): Promise<ActionOutcome>;
  /** Stop a tenant or a run, or lift its stop (./stops: the kill switch). */
  stopOrResume(verb: "stop" | "resume", target: StopTarget, reason: string): Promise<ActionOutcome>;
}

const refused = (message: string): ActionOutcome => ({ kind: "refused", message });

async function runAction(
  stack: OpsStack,
  runId: string,
  request: RunRequest,
): Promise<ActionOutcome> {
  const offline = runRequestCommand(runId, request, operatorName());
  const invalid = operatorEnvelope(offline);
  if (typeof invalid === "string") return refused(`refusing to send an ${invalid}; nothing sent`);
  const state = await loadRunState(stack, runId);
  const problem = runRequestProblem(runId, state, request, { compiled: compiledOf(stack.outputs) });
  if (problem) return refused(`${problem}; nothing sent`);
  const command = runRequestCommand(runId, request, operatorName(), state);
  const envelope = operatorEnvelope(command);
  if (typeof envelope === "string") return refused(`refusing to send an ${envelope}; nothing sent`);
  const bus = await putCommand(stack, stack.config, envelope);
  await recordApproval(stack, envelope, "console");
  const eventId = String(envelope.event_id);
  // The command itself says who asked and why; the audit group keeps it.
  const message = `${command.type} sent to ${bus} (event id ${eventId})`;
  return { kind: "sent", message };
}

/** A decided command's fate in the CLI's words: sent, already so, or refused. */
function decidedOutcome(outcome: SupportOutcome): ActionOutcome {
  if ("refused" in outcome) return refused(`${outcome.refused}; nothing sent`);
  if ("already" in outcome)
    return { kind: "unchanged", message: `${outcome.already}; nothing sent` };
  const { command, envelope, bus } = outcome.sent;
  return {
    kind: "sent",
    message: `${command.type} sent to ${bus} (event id ${String(envelope.event_id)})`,
  };
}

async function supportAction(
  stack: OpsStack,
  offline: SupportCommand,
  check: () => Promise<Decided>,
): Promise<ActionOutcome> {
  const problem = operatorEnvelope(offline);
  if (typeof problem === "string") return refused(`${problem}; nothing sent`);
  return decidedOutcome(await sendDecided(stack, await check(), "console"));
}

async function redriveAction(
  stack: OpsStack,
  group: string,
  from: "queue" | "buffer",
  reason: string,
): Promise<ActionOutcome> {
  const problem = redriveTargetProblem(stack, group, from);
  if (problem) return refused(problem);
  const report = await redrive(stack, group, { from });
  const summary = renderRedriveText(report).split("\n")[0] ?? "";
  if (report.moved.length === 0) return { kind: "unchanged", message: summary };
  const id = await recordAction(stack, stack.config, redriveAuditAction(report, reason), {
    via: "console",
  });
  const undeleted = report.notDeleted.length;
  const message = `${summary}; recorded in the audit trail as operator.action.recorded ${id}${
    undeleted > 0
      ? `; ${undeleted} re-queued dead letter(s) could not be deleted from the dead-letter queue (their copies come back there; redriving them again is harmless)`
      : ""
  }`;
  if (report.failed.length === 0) return { kind: "sent", message };
  const failures = report.failed.map((f) => `${f.messageId}: ${f.error}`).join("; ");
  return {
    kind: "failed",
    message: `${message}; ${report.failed.length} dead letter(s) could not be re-queued (${failures})`,
  };
}

async function stopAction(
  stack: OpsStack,
  verb: "stop" | "resume",
  target: StopTarget,
  reason: string,
): Promise<ActionOutcome> {
  const problem = stopTargetProblem(target);
  if (problem) return refused(`${problem}; nothing recorded`);
  const act = { via: "console" as const, ...(reason ? { reason } : {}) };
  const what = `${target.scope} ${target.id}`;
  if (verb === "resume") {
    const { lifted, auditId } = await resumeWork(stack, target, act);
    return lifted
      ? {
          kind: "sent",
          message: `${what} resumed (stopped by ${lifted.by} at ${lifted.at}); recorded as operator.resumed ${auditId}`,
        }
      : { kind: "unchanged", message: `${what} was not stopped; nothing lifted` };
  }
  const report = await stopWork(stack, target, act);
  const cancelled = report.runsCancelled.length;
  const message = `${report.recorded ? "stopped" : "already stopped"}: ${stopMessage(report.stop)}; ${cancelled} workflow run(s) cancelled; recorded as operator.stopped ${report.auditId}`;
  return { kind: report.recorded ? "sent" : "unchanged", message };
}

/** The actions over a stack (its commands bus, its dead-letter queues, its audit trail). */
export function opsActions(stack: OpsStack): OpsActions {
  return {
    run: (runId, request) => runAction(stack, runId, request),
    async review(taskId, decision, fields) {
      const problem = taskIdProblem(taskId);
      if (problem) return refused(problem);
      const command = reviewCommand(taskId, decision, fields, operatorName());
      return supportAction(stack, command, () => reviewCheck(stack, command, decision));
    },
    async resolveSend(key, resolution, reason) {
      const parsed = replyKeyTask(key);
      if ("problem" in parsed) return refused(parsed.problem);
      const command = sendResolveCommand(key, parsed.taskId, resolution, reason, operatorName());
      return supportAction(stack, command, () => sendResolveCheck(stack, command, resolution));
    },
    redrive: (group, from, reason) => redriveAction(stack, group, from, reason),
    async decideStep(runId, callId, decision, fields) {
      const requestedBy = operatorName();
      const decided = await stepDecisionCheck(stack, runId, callId, decision, {
        ...fields,
        requestedBy,
      });
      return decidedOutcome(await sendDecided(stack, decided, "console"));
    },
    start: (request) => startWorkflow(stack, catalogOf(stack), request),
    stopOrResume: (verb, target, reason) => stopAction(stack, verb, target, reason),
  };
}
