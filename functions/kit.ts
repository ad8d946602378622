/**
 * AgentBus's authoring kit (`import { defineRole, ... } from "agentbus"`): what a role author
 * writes a role, an agent, a tool, an integration, a workflow and the attention a role raises
 * with. No AWS code: a role built from it runs in the in-memory test kit (`agentbus/testing`) as
 * it does on Lambda (`agentbus/lambda`), and the stack deploys it (`agentbus/cdk`). The reference
 * applications (under functions/roles) use nothing of the hub but these entry points, so they are
 * the examples of this API.
 *
 * An application's own event type: `defineEventType({ ...streamFact, type, description,
 * payload: z.object({...}) })`, listed in the `events` of the role module that owns it, and its
 * payload type added to `EventPayloads` by declaration merging. Schemas are written with the
 * registry's own zod (mini), `import * as z from "agentbus/zod"`: an entry point of its own, so
 * that a bundler keeps only the parts of zod a function uses (a namespace re-exported from here
 * would bring all of zod, every locale, into every bundle: about 440 KB).
 * `declare module "agentbus" { interface EventPayloads extends PayloadTypes<typeof t> {} }`.
 * The hub's relay and dispatch carry it without knowing it: the topic is stored with the event
 * when it is committed (schemas/README.md).
 */

// The envelope and the event types it carries; an application's own types.
export type {
  AggregateRef,
  Envelope,
  EventPayloads,
  EventType,
  EventTypeDefinition,
  PayloadTypes,
  Topic,
} from "../schemas";
export {
  defineEventType,
  IsoTime,
  letterDigest,
  MAX_STREAM_VERSION,
  OpaqueId,
  tenantOf,
  Ulid,
} from "../schemas";
// Agents that loop over tools, and the single-call agent run.
export {
  AgentDecisionRequestedPayload,
  AgentStepRequestedPayload,
  ToolCallId,
  ToolName,
} from "../schemas/events/agent-loop";
// A workflow node's commands and reports as a step role reads and answers them, and a person's
// confirmation of a node: the payloads a role that spells its own commands and outcomes defines
// them from (`<stem>.requested`, `<stem>.completed`, ...).
export type {
  NodeBlocked,
  NodeConfirmRequested,
} from "../schemas/events/agent-run";
export {
  ConfirmationQuestion,
  confirmEventType,
  NodeConfirmRequestedPayload,
} from "../schemas/events/agent-run";
// A customer's message as it enters (the front door's contract), for an application that takes it.
export {
  Channel,
  ClientSeq,
  CONVERSATION_AGGREGATE,
  MessageText,
} from "../schemas/events/conversation";
// Who asked for a command sent from outside, and why (an operator's or a client's).
export { RequestedByShape } from "../schemas/events/fields";
export { outsideCommand, outsideFact, streamCommand, streamFact } from "../schemas/events/kinds";
// A run's input: a JSON object within bounds; an application's own input schema checks them too.
export { RunInput, runInputBounds } from "../schemas/events/run-input";
export type { NodeCompleted, NodeFailed, NodeRequested } from "../schemas/events/workflow";
export {
  MAX_HEARTBEAT_LEASE_SECONDS,
  NodeFailedPayload,
  NodeRequestedPayload,
  nodeCompletedPayload,
} from "../schemas/events/workflow";
export { NodeCancelRequestedPayload } from "../schemas/events/workflow-cancel";
export type { AgentDefinition, AgentJournal } from "./core/agent/agent";
export { agentModelSchemas, currentRunOf, defineAgent } from "./core/agent/agent";
export type { RunConversation } from "./core/agent/agent-role";
export { AGENT_RUN_AGGREGATE, agentDescriptor, agentRole } from "./core/agent/agent-role";
export { personWaitRules } from "./core/agent/attention";
export type { ContentStore } from "./core/agent/content";
export { toolOutputsSeen } from "./core/agent/content";
export type { WriteDone } from "./core/agent/loop";
export type { ToolDefinition } from "./core/agent/tool";
export { defineTool, ToolRejectedError, ToolTimeoutError } from "./core/agent/tool";
export type { AgentRun, RunError } from "./core/agent-run";
export {
  agentRunIdOf,
  classifyFailure,
  DEFAULT_CONFIRM_SECONDS,
  DEFAULT_LEASE_SECONDS,
  DEFAULT_MAX_ATTEMPTS,
  isInvalidOutput,
  MODEL_INVALID_OUTPUT,
  newRun,
  transition,
  upcastRun,
  withRunId,
} from "./core/agent-run";
export type { ApprovalDecision, ApprovalRequest } from "./core/approval";
export { ruleOnApproval } from "./core/approval";
// What a person must act on.
export type { AttentionAlarm, AttentionRule, AttentionSignal } from "./core/attention";
export {
  AWAITING_APPROVAL,
  FAILED_RUNS,
  NEEDS_HUMAN,
  operatorCommand,
  PARTIAL_RUNS,
  raiseOn,
  UNKNOWN_SIDE_EFFECTS,
} from "./core/attention";
export { newestWithin } from "./core/budget";
// Workflow steps: what a step role declares, how its handler is called, what the orchestrator knows,
// and how a role finds a cancel queued behind a request before it works on it.
export type { CancelledAssignment, CommandStream } from "./core/cancel-look-ahead";
export { cancelIssued, discardCancelled } from "./core/cancel-look-ahead";
// Workflows.
export type { WorkflowDefinition, WorkflowDefinitionInput } from "./core/dag/definition";
export { DagRequestError } from "./core/dag/errors";
export { defineWorkflow } from "./core/dag/graph";
export { isRecord, show } from "./core/dag/values";
// Roles and role modules.
export type {
  DescriptorOf,
  EmitOf,
  EventOf,
  RoleDefinition,
  TypedDecision,
} from "./core/define-role";
export { defineRole } from "./core/define-role";
export type { EmitSpec, HeartbeatSpec } from "./core/emit";
// Errors: what happens to a message is decided by the class of what a decision throws.
export type { ErrorInfo } from "./core/errors";
export {
  AgentBusError,
  BusinessRejection,
  PermanentError,
  TransientError,
  UnknownOutcomeError,
} from "./core/errors";
// Integrations: the outside systems a role calls, and the ones the hub ships.
export type {
  AnyIntegration,
  AnyIntegrationUse,
  Integration,
  IntegrationUse,
  IntegrationUses,
  PortOf,
  RolePorts,
} from "./core/integration";
export { defineIntegration, use } from "./core/integration";
// Models: one call with a structured answer, and the schemas a role shows its model.
export type {
  ModelMessage,
  ModelPort,
  ModelRequest,
  ModelResponse,
  ModelScope,
  Spend,
  StructuredResult,
} from "./core/model";
export {
  canonicalJson,
  DEFAULT_STRUCTURED_ATTEMPTS,
  invokeStructured,
  ModelOutputInvalidError,
} from "./core/model";
// The model budgets and the operator's stops, which every role's model port is guarded by.
export type { Exhausted, ModelBudgets, OperatorStop } from "./core/model-guard";
export { BudgetExhaustedError, OperatorStopError } from "./core/model-guard";
export { modelSchemaOf } from "./core/model-schemas";
// The output guard: a model's text checked before it reaches a customer.
export type {
  OutputGuardContext,
  OutputGuardFinding,
  OutputGuardKind,
  OutputGuardResult,
  OutputGuardVerdict,
} from "./core/output-guard";
export {
  guardOutput,
  guardRecord,
  OUTPUT_GUARD_ATTENTION,
  OUTPUT_GUARD_KINDS,
  OUTPUT_GUARD_REFUSALS,
  OUTPUT_GUARD_REFUSED,
  OutputGuardRecord,
  refusalReason,
  VERDICT_OF_KIND,
  withheld,
} from "./core/output-guard";
export { parseEnv } from "./core/parse-env";
export { payloadOf } from "./core/payload";
export { ERASED } from "./core/personal-data/erased";
export type {
  Clock,
  DiscardReason,
  EventStore,
  IdSource,
  RecordedDecision,
  StateSummary,
} from "./core/ports";
export type { DecideContext, Decision, Role, RoleDescriptor } from "./core/role";
export type {
  Deployment,
  GroupNeeds,
  ModuleSteps,
  RoleModule,
  StepModuleDefinition,
} from "./core/role-module";
export {
  buildRole,
  defineModule,
  defineStepModule,
  handlerBeside,
  moduleSettings,
} from "./core/role-module";
export { systemClock, ulidSource } from "./core/runtime";
// Outside writes, each run once under an idempotency key the step derives.
export type { SideEffectRecord, SideEffectResult, SideEffectStore } from "./core/side-effects";
export { InMemorySideEffects, sideEffectKey } from "./core/side-effects";
export type { StepContext, StepHandler, StepRun } from "./core/step-role";
export { assignmentKey, firstRequestOf, nodeHeartbeat, StepWaiting } from "./core/step-role";
export type { StepA2a, StepDeclaration, StepRoleEntry, StepRoleTable } from "./core/steps";
export { stepRolesOf } from "./core/steps";
export { DAG_RUN_AGGREGATE } from "./core/sweeper";
export type {
  LearntBy,
  OutputRecord,
  OutsideWrite,
  PersonFound,
  WriteFound,
  WriteOnce,
  WriteOutcome,
} from "./core/write-once";
export {
  closeByPerson,
  DEFAULT_MAX_UNKNOWN_ATTEMPTS,
  DEFAULT_UNKNOWN_CODE,
  resendByPerson,
  writeOnce,
} from "./core/write-once";
// Another system's A2A agent as an agent's tool or a workflow step, every write once through the ledger.
export type {
  A2aAgentOptions,
  A2aFileRef,
  A2aOutput,
  A2aStepDeclaration,
  A2aToolDeclaration,
  A2aToolInput,
} from "./integrations/a2a";
export { a2a, a2aCardHash, a2aStep, a2aTool, readA2aFile } from "./integrations/a2a";
export { content } from "./integrations/content";
// An MCP server's tools, each marked read or write, every write once through the side-effect ledger.
export type {
  McpServerOptions,
  McpToolDeclaration,
  McpToolOutput,
  McpToolsDeclaration,
} from "./integrations/mcp";
export { IDEMPOTENCY_KEY_META, mcp, mcpListingHash, mcpTools } from "./integrations/mcp";
// The model, and the scripts a role answers with on the local model (a stand-in, NOT a model).
export type {
  LocalScript,
  LocalScripts,
  ModelOptions,
  RequestFacts,
} from "./integrations/model";
export { LOCAL_MODEL_NAME, model, ToolUse } from "./integrations/model";
export type { QueueDepthSource } from "./integrations/queue-depth";
export { queueDepth } from "./integrations/queue-depth";
export { sideEffects } from "./integrations/side-effects";
