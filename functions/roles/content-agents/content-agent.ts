import * as z from "../../../schemas/zod";
import type {
  AggregateRef,
  DecideContext,
  Envelope,
  HeartbeatSpec,
  Role,
  StateSummary,
} from "../../kit";
import {
  type AgentRun,
  confirmEventType,
  type DescriptorOf,
  defineRole,
  discardCancelled,
  firstRequestOf,
  invokeStructured,
  modelSchemaOf,
  type NodeRequested,
  newRun,
  nodeHeartbeat,
  payloadOf,
  type StructuredResult,
  tenantOf,
  transition,
  upcastRun,
  withRunId,
} from "../../kit";
import { answerAgain, answerOf, correctedReply, failureOf, retried } from "./answers";
import { cancelBehind, cancelledWhileRunning, decideCancel } from "./cancel";
import {
  block,
  blockedDecision,
  ConfirmationNeeded,
  confirmationText,
  decideConfirm,
  questionOf,
  requestOf,
} from "./confirm";
import { CONTENT_ROLE_EVENTS, type ContentRole, contentEventTypes } from "./events";
import { agentRunIdOf, agentRunKey, itemIndexOf, type NodeRef } from "./ids";
import modelSchemas from "./model-schemas.json";
import { CONFIRMATION_INSTRUCTION, INSTRUCTIONS, promptOf } from "./prompts";
import {
  type ContentAgent,
  type ContentAgentOptions,
  type ContentAnswer,
  type ContentCommand,
  type ContentDecision,
  resolveAgent,
} from "./settings";

/**
 * The four content agents of seed 001 §6 (topic selection, fact check, writing, review), one
 * factory. Each is a consumer group named after its role that takes `<role>.requested` commands
 * from the orchestrator and answers `<role>.completed` or `<role>.failed` on the stream of its
 * agent run: aggregate `agent_run/<agentRunKey(run_id, node_id, generation, item)>`, so a re-run
 * (new generation) is a new agent run and a redelivered request finds the one it already finished.
 * An item of a map node (the fact check of one claim, say) is an assignment of its own: its
 * request carries the item (`item`: index, count, value), its agent run is keyed by the item's
 * index too, and everything the agent answers about it (completed, failed, blocked) names it;
 * a cancel naming the item stops that item's work only.
 * Each run of it (a request's delivery that runs the model, a resume) has a run id of its own,
 * which the agent run records and everything the run emits carries (./ids).
 *
 * One request, inside `decide` (the pipeline commits after it returns, so the model call is never
 * inside a transaction):
 *   newRun (IDLE) -TaskAssigned-> READY -DependenciesSatisfied-> RUNNING -> call the model with
 *   `invokeStructured` (metadata.role = the role, prompt from the node's input and the run's
 *   input, output schema per role) -TaskCompleted-> COMPLETED, emit `<role>.completed`.
 * Failures go through the agent run's `classifyFailure`:
 * - transient (throttling, outage, unexpected errors) with attempts left -> the error is rethrown:
 *   nothing is committed and the queue redelivers the request after its visibility timeout;
 *   delivery n counts as attempt n (`receiveCount`), so the budget holds across redeliveries;
 *   once it is spent -> FAILED and `<role>.failed` with the error's code (class transient);
 * - the model never answered in shape: every reply `invokeStructured` had to correct counts as an
 *   attempt of the run; when the budget is spent -> NEEDS_HUMAN and `<role>.failed` with code
 *   `model.invalid_output`;
 * - permanent (no access, bad model id, ...) -> FAILED at once and `<role>.failed`;
 * - fact check with verdict "fail" is a business refusal -> FAILED and `fact_check.failed` with
 *   code `fact_check.rejected` (class business), the checker's notes as the message.
 * The agent run is stored only when it has ended (or is BLOCKED, below), so a request for an
 * assignment already answered (the orchestrator sends it again when the node's lease ran out with
 * the outcome unknown) finds it COMPLETED / FAILED / NEEDS_HUMAN and sends the same answer again,
 * without a model call.
 *
 * When the model asks for an external confirmation instead, the agent run goes BLOCKED and
 * answers `node.blocked`; `<role>.confirm.requested` resumes it or ends it (./confirm).
 * The agent acknowledges each request when it starts on it with `node.started` (see `heartbeatOf`).
 *
 * It also takes `<role>.cancel.requested`: a cancelled assignment's request is discarded
 * `cancelled` before any model call, or ends CANCELLED unanswered (./cancel).
 *
 * Long model calls: the consumer handler extends the message's SQS visibility while `decide`
 * runs and publishes the agent's `heartbeat`, a `node.heartbeat` that extends the node's lease
 * in the orchestrator by `leaseSeconds` (capped at an hour); if the worker dies, the message becomes visible again and counts as the
 * next attempt, and a node that stays RUNNING past its lease is reported by the sweeper with
 * `node.lease.expired`.
 */

export const AGENT_RUN_AGGREGATE = "agent_run";
export { FACT_CHECK_REJECTED } from "./answers";
export { agentRunIdOf, agentRunKey } from "./ids";
export type { ContentAgentOptions } from "./settings";

/** What a content agent subscribes to: its requests, their cancels and their confirmations. */
export function contentAgentSubscriptions(role: ContentRole) {
  const { requested, cancel } = contentEventTypes(role);
  return [requested, cancel, confirmTypeOf(role)];
}

/** The confirmation command of a content role: `<stem>.confirm.requested`. */
export function confirmTypeOf(role: ContentRole) {
  return confirmEventType(CONTENT_ROLE_EVENTS[role].stem);
}

/** A content agent outside its handler: group = role, its subscriptions, one state per run. */
export function contentAgentDescriptor(
  role: ContentRole,
): DescriptorOf<ContentCommand, ContentAnswer> {
  const { completed, failed } = contentEventTypes(role);
  return {
    group: role,
    subscriptions: contentAgentSubscriptions(role),
    emits: [completed, failed, "node.blocked"],
    // A run's stream carries the requests of all its nodes, one agent run each; each agent run
    // keeps its own checkpoint of that stream, from its request (`contentAgentRole`).
    stateOf: agentRunRefOf(role),
  };
}

export function contentAgentRole(options: ContentAgentOptions): Role<AgentRun> {
  const agent = resolveAgent(options);
  const isCancel = (event: Envelope) => event.event_type === agent.types.cancel;
  // Typed as any content agent's commands and answers (./settings); the check holds it to its own.
  return defineRole<AgentRun, ContentCommand, ContentAnswer>({
    ...contentAgentDescriptor(agent.role),
    // Each first request starts an agent run of its own (Role.beginsState).
    beginsState: firstRequestOf(agent.types.requested),
    heartbeat: (event, receiveCount) => heartbeatOf(agent, event, receiveCount),
    discard: (existing, event) =>
      isCancel(event)
        ? undefined
        : discardCancelled(existing?.state, () =>
            cancelBehind(agent, event, assignmentOf(agent.role, event)),
          ),
    decide: (stored, event, context) => {
      const existing = upcastRun(stored);
      return Promise.resolve(decideOn(agent, existing, event, context)).then((decision) =>
        stamped(decision, existing),
      );
    },
    summarize: summarizeAgentRun,
    // An agent run is read only through AgentBus (the agent, the operator tools, the console).
    compactState: true,
  });
}

/** What a content agent decides on a command: a cancel, a confirmation, or a request. */
function decideOn(
  agent: ContentAgent,
  existing: AgentRun | undefined,
  event: Envelope,
  { now, receiveCount }: DecideContext<AgentRun>,
): ContentDecision | Promise<ContentDecision> {
  if (event.event_type === agent.types.cancel)
    return decideCancel(existing, event, () => freshRun(agent, event, now), now);
  const runId = agentRunIdOf(agent.role, event, receiveCount);
  if (event.event_type === confirmTypeOf(agent.role))
    return decideConfirm(agent, existing, event, { now, runId }, (started, confirm) =>
      finish({
        agent,
        event,
        request: requestOf(confirm),
        started,
        now,
        confirmation: confirmationText(confirm),
      }),
    );
  return decideRequest(agent, existing, event, now, receiveCount);
}

/**
 * The decision with the run that emits stamped on what it emits: the agent run's current run (a
 * repeated answer carries the run that made it), none when the agent never ran it; a run that
 * resumed a BLOCKED one names the run it resumed (`resumed_from`).
 */
function stamped(decision: ContentDecision, existing: AgentRun | undefined): ContentDecision {
  const runId = (decision.state ?? existing)?.run_id;
  if (!decision.emit || runId === undefined) return decision;
  const before = existing?.state === "BLOCKED" ? existing.run_id : undefined;
  const resumed = before !== undefined && before !== runId ? { resumedFrom: before } : {};
  return { ...decision, emit: decision.emit.map((spec) => ({ ...spec, runId, ...resumed })) };
}

/** An agent run is listed by its state; NEEDS_HUMAN waits for a person. */
function summarizeAgentRun(stored: AgentRun): StateSummary {
  const run = upcastRun(stored);
  return {
    kind: "agent_run",
    status: run.state,
    label: `${run.role}${run.node_id ? ` ${run.node_id}` : ""} of ${run.agent_run_key}`,
    ...(run.state === "NEEDS_HUMAN" ? { waiting: "needs_human" } : {}),
    ...(run.tenant_id === undefined ? {} : { tenant: run.tenant_id }),
  };
}

/** The assignment a content agent's command names: a request, its cancel or its confirmation. */
function assignmentOf(role: ContentRole, event: Envelope): NodeRef {
  const { requested, cancel } = contentEventTypes(role);
  return payloadOf(event, requested, cancel, confirmTypeOf(role));
}

/** Each role's `stateOf`, made once: the topology's descriptor and the built role share it. */
const agentRunRefs = new Map<ContentRole, (event: Envelope) => AggregateRef>();

function agentRunRefOf(role: ContentRole): (event: Envelope) => AggregateRef {
  const known = agentRunRefs.get(role);
  if (known) return known;
  const stateOf = (event: Envelope) => agentRunRef(role, event);
  agentRunRefs.set(role, stateOf);
  return stateOf;
}

/** The agent run a command belongs to: one per (run, node, generation, map item). */
function agentRunRef(role: ContentRole, event: Envelope): AggregateRef {
  const assignment = assignmentOf(role, event);
  const { run_id, node_id, generation } = assignment;
  return {
    type: AGENT_RUN_AGGREGATE,
    id: agentRunKey(run_id, node_id, generation, itemIndexOf(assignment)),
  };
}

/**
 * The acknowledgement and the heartbeats of a request being worked on (and of a confirmation the
 * agent resumes on): first `node.started`, then `node.heartbeat`, each extending the node's lease.
 *
 * The acknowledgement is published straight to the bus when the request enters the consumer,
 * before the model call, not committed with the agent's answer: that commit comes only after
 * `decide`, which is the model call, so it could not say "started" while the work runs. A
 * separate first commit would cost every request a second transaction and split one delivery into
 * two commits the pipeline would have to reconcile on redelivery. The acknowledgement changes no
 * decision, only what the orchestrator shows and how long the node's lease is, so losing one costs
 * a longer (queued) lease and nothing else; it is still a recorded fact on the bus (audit keeps
 * it, the trace shows it).
 */
function heartbeatOf(
  agent: ContentAgent,
  event: Envelope,
  receiveCount: number,
): HeartbeatSpec | undefined {
  const confirmType = confirmTypeOf(agent.role);
  const resumed = event.event_type === confirmType;
  if (event.event_type !== agent.types.requested && !resumed) return undefined;
  const payload = payloadOf(event, agent.types.requested, confirmType);
  if ("outcome" in payload && payload.outcome !== "confirmed") return undefined;
  // The run this processing is, as `decide` names it: the beats and the answer carry one run id.
  const runId = agentRunIdOf(agent.role, event, receiveCount);
  return nodeHeartbeat(payload, agent.role, agent.heartbeatLease, runId, resumed || undefined);
}

async function decideRequest(
  agent: ContentAgent,
  existing: AgentRun | undefined,
  event: Envelope,
  now: Date,
  receiveCount: number,
): Promise<ContentDecision> {
  const request = payloadOf(event, agent.types.requested);
  // Stored only once BLOCKED or ended. A BLOCKED assignment waits for its confirmation: the
  // orchestrator is told so again. An ended one was already answered (the orchestrator sends it
  // again when the answer may have been lost), so the same answer goes again.
  if (existing?.state === "BLOCKED") return blockedDecision(agent, request, existing);
  if (existing) return answerAgain(agent, request, existing);
  const started = startRun(agent, event, request, now, receiveCount);
  return finish({ agent, event, request, started, now });
}

/** An assignment a RUNNING agent run works on (a new request, or a resumed BLOCKED one). */
interface Work {
  readonly agent: ContentAgent;
  /** The request, or the confirmation that resumes it. */
  readonly event: Envelope;
  readonly request: NodeRequested;
  readonly started: AgentRun;
  readonly now: Date;
  /** What the model is told on resuming: its question and the confirmation. */
  readonly confirmation?: string;
}

/**
 * The work of a RUNNING agent run and its answer; a cancel committed while the model call ran
 * wins over the answer.
 */
async function finish(work: Work): Promise<ContentDecision> {
  const { agent, event, request, started, now } = work;
  const decision = await outcomeOf(work);
  if (await cancelBehind(agent, event, request)) return cancelledWhileRunning(started, now);
  return decision;
}

/** The model call and what its outcome decides (a retry is rethrown). */
async function outcomeOf(work: Work): Promise<ContentDecision> {
  const { agent, request, now } = work;
  let run = work.started;
  try {
    const result = await callModel(work);
    run = retried(run, result.attempts - 1, now, correctedReply());
    const question = questionOf(result.value);
    if (question !== undefined) return block(agent, request, run, question, now);
    return answerOf(agent, request, run, result.value, now);
  } catch (error) {
    return failureOf(agent, request, run, error, now);
  }
}

/** A new agent run (IDLE, never run yet) for the assignment a request or a cancel names. */
function freshRun(agent: ContentAgent, event: Envelope, now: Date): AgentRun {
  return newRun({
    agent_run_key: agentRunRef(agent.role, event).id,
    task_id: event.task_id,
    tenant_id: event.tenant_id,
    role: agent.role,
    node_id: assignmentOf(agent.role, event).node_id,
    max_attempts: agent.maxAttempts,
    lease_seconds: agent.leaseSeconds,
    now,
  });
}

/**
 * A new agent run for the request, taken to RUNNING: IDLE -TaskAssigned-> READY
 * -DependenciesSatisfied-> RUNNING, with the attempts of earlier deliveries recorded, each under
 * the run id it had; the run that goes on is this delivery's.
 */
function startRun(
  agent: ContentAgent,
  event: Envelope,
  request: NodeRequested,
  now: Date,
  receiveCount: number,
): AgentRun {
  // Delivery n is attempt n: the earlier ones did not commit (transient failure or a lost
  // worker), and each of them spent an attempt of the budget.
  const attempts = Math.min(receiveCount, agent.maxAttempts);
  const runOf = (n: number) => agentRunIdOf(agent.role, event, n === attempts ? receiveCount : n);
  let run = transition(withRunId(freshRun(agent, event, now), runOf(1)), "TaskAssigned", {
    now,
    reason: `run ${request.run_id} node ${request.node_id} generation ${request.generation} assignment ${request.attempt}`,
  });
  run = transition(run, "DependenciesSatisfied", { now });
  for (let n = 2; n <= attempts; n++) {
    run = transition(run, "RetryScheduled", { now, error: REDELIVERED });
    run = transition(withRunId(run, runOf(n)), "DependenciesSatisfied", { now });
  }
  return run;
}

const REDELIVERED = {
  code: "agent_run.redelivered",
  errorClass: "transient",
  message: "an earlier delivery of the request did not complete",
} as const;

/** What a content agent's model answers: the role's output, or a question (ConfirmationNeeded). */
export function contentAnswer(output: z.ZodMiniType<unknown>): z.ZodMiniType<unknown> {
  return z.union([output, ConfirmationNeeded]);
}

/**
 * The model call, correcting invalid replies with the attempts the run has left. The model
 * answers the role's output, or asks for a confirmation (ConfirmationNeeded); a resumed run gets
 * its confirmation after the request.
 */
function callModel(work: Work): Promise<StructuredResult<unknown>> {
  const { agent, event, request, started: run, confirmation } = work;
  const prompt = promptOf(agent.role, request);
  return invokeStructured(
    agent.model,
    {
      system: `${INSTRUCTIONS[agent.role]} ${CONFIRMATION_INSTRUCTION}`,
      messages: [{ role: "user", text: confirmation ? `${prompt}\n\n${confirmation}` : prompt }],
      maxTokens: agent.maxTokens,
      metadata: {
        role: agent.role,
        task_id: event.task_id,
        correlation_id: event.correlation_id,
        tenant_id: tenantOf(event),
        run_id: request.run_id,
      },
    },
    contentAnswer(agent.outputSchema),
    {
      maxAttempts: run.max_attempts - run.attempt + 1,
      output: {
        name: agent.role,
        schema: modelSchemaOf(modelSchemas, agent.role, `content agent ${agent.role}`),
      },
    },
  );
}
