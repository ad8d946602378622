import { createHash } from "node:crypto";
import type { z } from "zod";
import type { AggregateRef, Envelope } from "../../schemas";
import {
  CONTENT_ROLE_EVENTS,
  type ContentRole,
  contentEventTypes,
  type FactCheckOutput,
  MAX_HEARTBEAT_LEASE_SECONDS,
  type NodeCompleted,
  type NodeFailed,
  type NodeHeartbeat,
  type NodeRequested,
} from "../../schemas/events/workflow";
import {
  type AgentRun,
  classifyFailure,
  DEFAULT_LEASE_SECONDS,
  DEFAULT_MAX_ATTEMPTS,
  MODEL_INVALID_OUTPUT,
  newRun,
  type RunError,
  transition,
} from "../core/agent-run";
import type { HeartbeatSpec } from "../core/emit";
import { PermanentError } from "../core/errors";
import {
  invokeStructured,
  ModelOutputInvalidError,
  type ModelPort,
  type StructuredResult,
} from "../core/model";
import type { Decision, Role } from "../core/pipeline";
import type { StateSummary } from "../core/ports";
import {
  type CommandStream,
  cancelIssued,
  cancelledWhileRunning,
  decideCancel,
  discardCancelled,
} from "./content-agent-cancel";
import { INSTRUCTIONS, promptOf } from "./content-prompts";

/**
 * The four content agents of seed 001 §6 (topic selection, fact check, writing, review), one
 * factory. Each is a consumer group named after its role that takes `<role>.requested` commands
 * from the orchestrator and answers `<role>.completed` or `<role>.failed` on the stream of its
 * agent run: aggregate `agent_run/<agentRunId(run_id, node_id, generation)>`, so a re-run (new
 * generation) is a new agent run and a redelivered request finds the one it already finished.
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
 * The agent run is stored only when it has ended, so a request for an assignment already answered
 * (the orchestrator sends it again when the node's lease ran out with the outcome unknown) finds
 * it COMPLETED / FAILED / NEEDS_HUMAN and sends the same answer again, without a model call.
 *
 * It also takes `<role>.cancel.requested`: a cancelled assignment's request is discarded
 * `cancelled` before any model call, or ends CANCELLED unanswered (./content-agent-cancel).
 *
 * Long model calls: the consumer handler extends the message's SQS visibility while `decide`
 * runs and publishes the agent's `heartbeat`, a `node.heartbeat` that extends the node's lease
 * in the orchestrator by `leaseSeconds` (capped at an hour); if the worker dies, the message becomes visible again and counts as the
 * next attempt, and a node that stays RUNNING past its lease is reported by the sweeper with
 * `node.lease.expired`.
 */

export interface ContentAgentOptions {
  readonly role: ContentRole;
  readonly model: ModelPort;
  /** Attempts of one agent run in total: redeliveries and corrected model replies. @default 3 */
  readonly maxModelAttempts?: number;
  /** Lease of the RUNNING agent run, in seconds. @default DEFAULT_LEASE_SECONDS */
  readonly leaseSeconds?: number;
  /** Cap on the model's answer. @default 2048 */
  readonly maxTokens?: number;
  /** The event store, to find a request's cancel behind it on the run's stream. @default none */
  readonly commandStream?: CommandStream;
}

export const AGENT_RUN_AGGREGATE = "agent_run";
export const FACT_CHECK_REJECTED = "fact_check.rejected";

/** The agent run id of one assignment: `arun_` + 32 letters of a SHA-256 (no digit runs). */
export function agentRunId(runId: string, nodeId: string, generation: number): string {
  const hex = createHash("sha256")
    .update(`${runId}\u0000${nodeId}\u0000${generation}`)
    .digest("hex")
    .slice(0, 32);
  const letters = [...hex].map((c) => String.fromCharCode(97 + Number.parseInt(c, 16))).join("");
  return `arun_${letters}`;
}

/** What a content agent subscribes to: its requests and their cancels. */
export function contentAgentSubscriptions(role: ContentRole): string[] {
  const { requested, cancel } = contentEventTypes(role);
  return [requested, cancel];
}

export function createContentAgent(options: ContentAgentOptions): Role<AgentRun> {
  const agent = resolveAgent(options);
  const isCancel = (event: Envelope) => event.event_type === agent.types.cancel;
  return {
    group: agent.role,
    subscriptions: contentAgentSubscriptions(agent.role),
    stateOf: agentRunRef,
    heartbeat: (event) => heartbeatOf(agent, event),
    discard: (existing, event) =>
      isCancel(event)
        ? undefined
        : discardCancelled(existing, () =>
            cancelIssued(agent.commandStream, agent.types.cancel, event),
          ),
    decide: (existing, event, { now, receiveCount }) =>
      isCancel(event)
        ? decideCancel(existing, event, () => freshRun(agent, event, now), now)
        : decideRequest(agent, existing, event, now, receiveCount),
    summarize: summarizeAgentRun,
  };
}

/** An agent run is listed by its state; NEEDS_HUMAN waits for a person. */
function summarizeAgentRun(run: AgentRun): StateSummary {
  return {
    kind: "agent_run",
    status: run.state,
    label: `${run.role}${run.node_id ? ` ${run.node_id}` : ""} of ${run.run_id}`,
    ...(run.state === "NEEDS_HUMAN" ? { waiting: "needs_human" } : {}),
  };
}

/** One content agent's settings, checked and resolved once when the agent is created. */
interface ContentAgent {
  readonly role: ContentRole;
  readonly model: ModelPort;
  readonly maxAttempts: number;
  readonly leaseSeconds: number;
  readonly heartbeatLease: number;
  readonly maxTokens: number;
  readonly outputSchema: z.ZodType<unknown>;
  readonly types: ReturnType<typeof contentEventTypes>;
  readonly commandStream: CommandStream | undefined;
}

/** The fields of a request that name the node it is for, repeated in every answer. */
interface NodeRef {
  readonly run_id: string;
  readonly node_id: string;
  readonly generation: number;
}

function resolveAgent(options: ContentAgentOptions): ContentAgent {
  const { role, model } = options;
  const maxAttempts = options.maxModelAttempts ?? DEFAULT_MAX_ATTEMPTS;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1)
    throw new PermanentError(
      "agent.invalid_option",
      `maxModelAttempts must be a positive integer, got ${maxAttempts}`,
    );
  const entry = CONTENT_ROLE_EVENTS[role];
  if (!entry) throw new PermanentError("agent.unknown_role", `no content role ${role}`);
  const leaseSeconds = options.leaseSeconds ?? DEFAULT_LEASE_SECONDS;
  return {
    role,
    model,
    maxAttempts,
    leaseSeconds,
    heartbeatLease: Math.min(MAX_HEARTBEAT_LEASE_SECONDS, Math.max(1, Math.round(leaseSeconds))),
    maxTokens: options.maxTokens ?? 2048,
    outputSchema: entry.output,
    types: contentEventTypes(role),
    commandStream: options.commandStream,
  };
}

/** The agent run a request (or its cancel) belongs to: one per (run, node, generation). */
function agentRunRef(event: Envelope): AggregateRef {
  const { run_id, node_id, generation } = event.payload as NodeRef;
  return { type: AGENT_RUN_AGGREGATE, id: agentRunId(run_id, node_id, generation) };
}

/** The `node.heartbeat` that extends the node's lease while a request is being worked on. */
function heartbeatOf(agent: ContentAgent, event: Envelope): HeartbeatSpec | undefined {
  if (event.event_type !== agent.types.requested) return undefined;
  const { run_id, node_id, generation } = event.payload as NodeRequested;
  const payload: NodeHeartbeat = {
    run_id,
    node_id,
    generation,
    lease_seconds: agent.heartbeatLease,
  };
  return {
    type: "node.heartbeat",
    payload,
    aggregate: { type: "dag_run", id: run_id },
    orderKey: run_id,
  };
}

async function decideRequest(
  agent: ContentAgent,
  existing: AgentRun | undefined,
  event: Envelope,
  now: Date,
  receiveCount: number,
): Promise<Decision<AgentRun>> {
  const request = event.payload as NodeRequested;
  // Stored only once ended: this assignment was already answered (the orchestrator sends it again
  // when the answer may have been lost), so the same answer goes again.
  if (existing) return answerAgain(agent, request, existing);
  const started = startRun(agent, event, request, now, receiveCount);
  const decision = await work(agent, event, request, started, now);
  // A cancel committed while the model call ran wins over its answer.
  if (await cancelIssued(agent.commandStream, agent.types.cancel, event))
    return cancelledWhileRunning(started, now);
  return decision;
}

/** The model call and what its outcome decides (a retry is rethrown). */
async function work(
  agent: ContentAgent,
  event: Envelope,
  request: NodeRequested,
  started: AgentRun,
  now: Date,
): Promise<Decision<AgentRun>> {
  let run = started;
  try {
    const result = await callModel(agent, event, request, run);
    run = retried(run, result.attempts - 1, now, correctedReply());
    return answerOf(agent, request, run, result.value, now);
  } catch (error) {
    return failureOf(agent, request, run, error, now);
  }
}

/**
 * The answer an ended agent run gave, sent again for a repeated request of its assignment: the
 * DAG counts one answer per assignment, so a second one changes nothing, and a lost one arrives.
 * A CANCELLED run answers nothing (the DAG no longer waits for it).
 */
function answerAgain(
  agent: ContentAgent,
  request: NodeRequested,
  run: AgentRun,
): Decision<AgentRun> {
  if (run.state === "COMPLETED") return completedDecision(agent, request, run, run.output);
  if (run.state === "FAILED" || run.state === "NEEDS_HUMAN")
    return failedDecision(agent, request, run);
  return {};
}

/** A new agent run (IDLE) for the assignment a request or a cancel names. */
function freshRun(agent: ContentAgent, event: Envelope, now: Date): AgentRun {
  return newRun({
    run_id: agentRunRef(event).id,
    task_id: event.task_id,
    role: agent.role,
    node_id: (event.payload as NodeRef).node_id,
    max_attempts: agent.maxAttempts,
    lease_seconds: agent.leaseSeconds,
    now,
  });
}

/**
 * A new agent run for the request, taken to RUNNING: IDLE -TaskAssigned-> READY
 * -DependenciesSatisfied-> RUNNING, with the attempts of earlier deliveries recorded.
 */
function startRun(
  agent: ContentAgent,
  event: Envelope,
  request: NodeRequested,
  now: Date,
  receiveCount: number,
): AgentRun {
  let run = transition(freshRun(agent, event, now), "TaskAssigned", {
    now,
    reason: `run ${request.run_id} node ${request.node_id} generation ${request.generation} assignment ${request.attempt}`,
  });
  run = transition(run, "DependenciesSatisfied", { now });
  // Delivery n is attempt n: the earlier ones did not commit (transient failure or a lost
  // worker), and each of them spent an attempt of the budget.
  return retried(run, Math.min(receiveCount, agent.maxAttempts) - 1, now, {
    code: "agent_run.redelivered",
    errorClass: "transient",
    message: "an earlier delivery of the request did not complete",
  });
}

/** The model call, correcting invalid replies with the attempts the run has left. */
function callModel(
  agent: ContentAgent,
  event: Envelope,
  request: NodeRequested,
  run: AgentRun,
): Promise<StructuredResult<unknown>> {
  return invokeStructured(
    agent.model,
    {
      system: INSTRUCTIONS[agent.role],
      messages: [{ role: "user", text: promptOf(request) }],
      maxTokens: agent.maxTokens,
      metadata: { role: agent.role, task_id: event.task_id, correlation_id: event.correlation_id },
    },
    agent.outputSchema,
    { maxAttempts: run.max_attempts - run.attempt + 1 },
  );
}

/** The decision for a valid model reply: completed, or a fact check's business refusal. */
function answerOf(
  agent: ContentAgent,
  request: NodeRequested,
  run: AgentRun,
  output: unknown,
  now: Date,
): Decision<AgentRun> {
  if (agent.role === "fact-check" && (output as FactCheckOutput).verdict === "fail") {
    const notes = (output as FactCheckOutput).notes;
    const error: RunError = {
      code: FACT_CHECK_REJECTED,
      errorClass: "business",
      message: `fact check failed: ${notes}`.slice(0, 4096),
    };
    return failedDecision(agent, request, transition(run, "TaskFailed", { now, error }));
  }
  const completed = transition(run, "TaskCompleted", { now, output });
  return completedDecision(agent, request, completed, output);
}

/**
 * The decision for a failed model call: rethrows what the queue should redeliver, otherwise
 * ends the run (FAILED or NEEDS_HUMAN) and answers `<role>.failed`.
 */
function failureOf(
  agent: ContentAgent,
  request: NodeRequested,
  started: AgentRun,
  error: unknown,
  now: Date,
): Decision<AgentRun> {
  const run =
    error instanceof ModelOutputInvalidError
      ? retried(started, error.attempts - 1, now, correctedReply())
      : started;
  let trigger = classifyFailure(error, run);
  // A model call has no side effect to confirm: an unknown outcome is retried like a
  // transient error, and fails the run once the budget is spent.
  if (trigger === "TaskBlocked")
    trigger = run.attempt < run.max_attempts ? "RetryScheduled" : "TaskFailed";
  if (trigger === "RetryScheduled") throw error;
  return failedDecision(agent, request, transition(run, trigger, { now, error }));
}

function nodeRefOf(request: NodeRequested): NodeRef {
  return { run_id: request.run_id, node_id: request.node_id, generation: request.generation };
}

function completedDecision(
  agent: ContentAgent,
  request: NodeRequested,
  run: AgentRun,
  output: unknown,
): Decision<AgentRun> {
  const payload: NodeCompleted = { ...nodeRefOf(request), output };
  return {
    state: run,
    emit: [{ type: agent.types.completed, payload, orderKey: request.run_id }],
  };
}

function failedDecision(
  agent: ContentAgent,
  request: NodeRequested,
  run: AgentRun,
): Decision<AgentRun> {
  const error = run.error ?? {
    code: "agent_run.failed",
    errorClass: "permanent" as const,
    message: `${agent.role} failed`,
  };
  const payload: NodeFailed = { ...nodeRefOf(request), error };
  return { state: run, emit: [{ type: agent.types.failed, payload, orderKey: request.run_id }] };
}

/** Record `count` attempts that ended in a retry: RUNNING -RetryScheduled-> READY -> RUNNING. */
function retried(run: AgentRun, count: number, now: Date, error: RunError): AgentRun {
  let next = run;
  for (let i = 0; i < count && next.attempt < next.max_attempts; i++) {
    next = transition(next, "RetryScheduled", { now, error });
    next = transition(next, "DependenciesSatisfied", { now });
  }
  return next;
}

function correctedReply(): RunError {
  return {
    code: MODEL_INVALID_OUTPUT,
    errorClass: "permanent",
    message: "the model's reply did not match the output schema; asked again with the issues",
  };
}
