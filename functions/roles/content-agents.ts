import { createHash } from "node:crypto";
import type { AggregateRef, Envelope } from "../../schemas";
import {
  type ContentRole,
  contentEventTypes,
  type NodeHeartbeat,
  type NodeRequested,
} from "../../schemas/events/workflow";
import { type AgentRun, newRun, transition } from "../core/agent-run";
import type { HeartbeatSpec } from "../core/emit";
import { invokeStructured, type StructuredResult } from "../core/model";
import type { Decision, Role } from "../core/pipeline";
import type { StateSummary } from "../core/ports";
import {
  answerAgain,
  answerOf,
  correctedReply,
  failureOf,
  type NodeRef,
  retried,
} from "./content-agent-answers";
import {
  cancelIssued,
  cancelledWhileRunning,
  decideCancel,
  discardCancelled,
} from "./content-agent-cancel";
import {
  type ContentAgent,
  type ContentAgentOptions,
  resolveAgent,
} from "./content-agent-settings";
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

export const AGENT_RUN_AGGREGATE = "agent_run";
export { FACT_CHECK_REJECTED } from "./content-agent-answers";
export type { ContentAgentOptions } from "./content-agent-settings";

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
