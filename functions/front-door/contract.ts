import { Channel, ClientSeq, MessageText } from "../../schemas/events/conversation";
import { RunInput } from "../../schemas/events/run-input";
import { OpaqueId, Ulid } from "../../schemas/ids";
import * as z from "../../schemas/zod";
import { WorkflowDefinitionSchema } from "../core/dag/definition";
import { TURN_STATUSES } from "../roles/customer-support/conversation-projection/conversation-projection";
import { WORKFLOW_SCOPES } from "./workflows";

/**
 * What the front door's routes take and give, as zod schemas: the bodies are validated with them,
 * and the OpenAPI document (`npm run schemas` -> ./openapi.json) is generated from them.
 */

/** `POST /v1/conversations/{conversation_id}/messages` */
export const PostMessageBody = z.strictObject({
  text: MessageText,
  /** Where the reply goes back to. @default "chat" */
  channel: z.optional(Channel),
  /**
   * The customer the message is from, for a service that speaks for its customers; a person's
   * own token leaves it out (the customer is the token's user).
   */
  customer_id: z.optional(OpaqueId),
  /**
   * The message's place in the conversation (1, 2, 3, ...): the conversation applies its messages
   * in this order, whatever order they reach it in. Left out: the next one, in the order the
   * front door takes the messages. The same number with the same message again is the same
   * request; with another message it is refused (409 `client_seq_taken`), as is a number more
   * than 100 above the conversation's highest (409 `client_seq_ahead`) or one older than the last
   * 16 (409 `client_seq_stale`).
   */
  client_seq: z.optional(ClientSeq),
});

/** What a posted message gives back (202): the ids to follow it by, and its place. */
export const MessageAcceptedResponse = z.object({
  event_id: Ulid,
  task_id: OpaqueId,
  correlation_id: OpaqueId,
  conversation_id: OpaqueId,
  /** The message's place in the conversation: the one sent, or the one the front door gave it. */
  client_seq: ClientSeq,
  links: z.object({ conversation: z.string() }),
});

/**
 * One turn of a conversation, as the conversation's view has it. A turn `superseded` will get no
 * reply: a newer message came before its reply went out, and `superseded_by` names the turn that
 * answers instead.
 */
export const ConversationTurnResponse = z.looseObject({
  task_id: OpaqueId,
  status: z.enum(TURN_STATUSES),
  text: z.optional(z.string()),
  reply_text: z.optional(z.string()),
  superseded_by: z.optional(OpaqueId),
});

/** `GET /v1/conversations/{conversation_id}` */
export const ConversationResponse = z.object({
  conversation_id: OpaqueId,
  version: z.int(),
  turns: z.array(ConversationTurnResponse),
});

/**
 * `POST /v1/workflows/{workflow_name}/runs`: the run's input, a JSON object that must fit the
 * workflow's declared input (`input` of its definition; a content workflow's: `topic_hint`).
 */
export const StartRunBody = RunInput;

/**
 * `PUT /v1/workflows/{workflow_name}`: a workflow definition (functions/core/dag/README.md), its
 * `name` the path's; without `version`, it becomes the next one.
 */
export const PutWorkflowBody = z.extend(WorkflowDefinitionSchema, {
  version: z.optional(z.int().check(z.positive())),
});

/** What a put did: `stored` (201) a new version, or found it `unchanged` (200). */
export const WorkflowPutResponse = z.object({
  outcome: z.enum(["stored", "unchanged"]),
  name: z.string(),
  version: z.int(),
  scope: z.literal("tenant"),
  links: z.object({ workflow: z.string() }),
});

/**
 * A workflow a tenant may start: given to the stack, its own, or shared (an operator's). A
 * stack's workflow may have an alias, the name a start gives it when its own is not one.
 */
const ListedWorkflow = z.object({
  name: z.string(),
  alias: z.optional(z.string()),
  scope: z.enum(WORKFLOW_SCOPES),
  versions: z.array(z.int()),
});

/** `GET /v1/workflows` */
export const WorkflowListResponse = z.object({ workflows: z.array(ListedWorkflow) });

/**
 * `GET /v1/workflows/{workflow_name}`: what a start by that name runs (its newest version), or the
 * version asked for.
 */
export const WorkflowResponse = z.object({
  ...ListedWorkflow.shape,
  definition: z.looseObject({ name: z.string(), version: z.int() }),
});

/** What a started run gives back (202). */
export const RunAcceptedResponse = z.object({
  event_id: Ulid,
  run_id: OpaqueId,
  task_id: OpaqueId,
  correlation_id: OpaqueId,
  links: z.object({ run: z.string() }),
});

/** A run the orchestrator started: the workflow it pinned, its status, each node's state and output. */
const StartedRun = z.object({
  run_id: OpaqueId,
  workflow: z.object({ name: z.string(), version: z.int() }),
  status: z.string(),
  nodes: z.record(
    z.string(),
    z.object({
      state: z.string(),
      output: z.optional(z.unknown()),
      error: z.optional(z.object({ code: z.string(), message: z.string() })),
    }),
  ),
});

/**
 * `GET /v1/runs/{run_id}`: the run, each node's state and, when it has one, its output. A start
 * the orchestrator refused is a run that never ran: status `REJECTED`, no workflow, no nodes, and
 * `error` the refusal's code and message.
 */
export const RunResponse = z.object({
  ...StartedRun.shape,
  workflow: z.optional(
    StartedRun.shape.workflow.check(
      z.describe("the workflow and version the run pinned (absent when REJECTED)"),
    ),
  ),
  status: z
    .string()
    .check(
      z.describe(
        "RUNNING, COMPLETED, PARTIAL, FAILED, CANCELLED; REJECTED: the orchestrator refused the start (error says why)",
      ),
    ),
  error: z.optional(
    z
      .object({ code: z.string(), message: z.string() })
      .check(z.describe("why the orchestrator refused the start (status REJECTED)")),
  ),
});

/**
 * `GET /v1/runs`: a page of the tenant's runs, newest first (by when each was first listed), each
 * as `GET /v1/runs/{run_id}` shows it (a refused start is never listed); `next_cursor` when more
 * may follow.
 */
export const RunListResponse = z.object({
  runs: z.array(z.object({ ...StartedRun.shape, listed_at: z.string() })),
  next_cursor: z.optional(z.string()),
});

/** `GET /v1/tasks/{task_id}`: what the task's steps recorded, in order, without their payloads. */
export const TaskResponse = z.object({
  task_id: OpaqueId,
  events: z.array(
    z.object({
      event_id: Ulid,
      event_type: z.string(),
      occurred_at: z.string(),
      producer: z.string(),
      aggregate: z.object({ type: z.string(), id: z.string(), version: z.int() }),
    }),
  ),
});

/** Why a customer is erased (kept with the erasure; say nothing personal). */
export const EraseCustomerBody = z.strictObject({
  reason: z.optional(z.string().check(z.maxLength(1000))),
});

/** What an erasure did, or the earlier one found (`already_erased`: nothing changed now). */
export const ErasureResponse = z.object({
  tenant_id: z.string(),
  customer_id: OpaqueId,
  outcome: z.enum(["erased", "already_erased"]),
  erased_at: z.optional(z.string()),
  erased_by: z.optional(z.string()),
  conversations: z.int(),
  /** State items and stored texts overwritten by this request. */
  overwritten: z.int(),
  /** Where copies stay until their retention runs out (default days): erasure cannot reach them. */
  unreachable: z.array(z.object({ where: z.string(), days: z.int() })),
});

/** Every error (RFC 9457 problem details). */
export const ProblemResponse = z.object({
  type: z.string(),
  title: z.string(),
  status: z.int(),
  code: z.string(),
  detail: z.string(),
  instance: z.string(),
  errors: z.optional(z.array(z.object({ path: z.string(), message: z.string() }))),
});
