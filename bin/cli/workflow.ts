import { readFileSync } from "node:fs";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { Command, Option } from "commander";
import { ulid } from "ulid";
import { DynamoEventStore } from "../../functions/adapters/dynamodb/event-store";
import { DynamoWorkflowRegistry } from "../../functions/adapters/dynamodb/workflow-registry";
import { runInputProblems } from "../../functions/core/dag/input";
import { InMemoryWorkflowRegistry } from "../../functions/core/dag/registry";
import type { StoredState } from "../../functions/core/ports";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import { operatorName, recordApproval } from "../../lib/operator/audit";
import { fromSdk } from "../../lib/operator/from-sdk";
import {
  type OperatorCommand,
  operatorEnvelope,
  putCommandOn,
} from "../../lib/operator/operator-command";
import {
  knownDefinition,
  parseOutput,
  type RunRequest,
  runRequestCommand,
  runRequestProblem,
} from "../../lib/operator/workflow-actions";
import { opaqueIdProblem } from "../../schemas";
import { NodeId, WORKFLOW_NAME_PATTERN } from "../../schemas/events/workflow";
import { MAX_SIGNAL_PAYLOAD_BYTES, SignalKey } from "../../schemas/events/workflow-wait";
import { withStack } from "./ops";
import {
  clientConfig,
  commandsBus,
  NotFoundError,
  out,
  stateTable,
  type Target,
  UsageError,
} from "./target";
import { actingTenantOption, tenantArgument, tenantOption } from "./tenant";
import { allowCommand, listCommand, putCommand, showDefinition } from "./workflow-registry";
import { printRun } from "./workflow-show";

/**
 * `agentbus workflow`: start a run, show it, re-run from a node, reset or resolve a FAILED node,
 * cancel a run, confirm (or refuse) what a BLOCKED node waits for, send a signal its wait nodes
 * wait for; put, list and show the
 * workflows registered at run time (./workflow-registry). Commands go on the stage's `commands` bus as unsequenced envelopes (aggregate
 * `dag_run/<run_id>` at version 0, order key = run id, a correlation id of their own), validated
 * against the registry and checked against the run's stored state before they are sent (a
 * request the orchestrator would refuse is refused here: exit 2, nothing sent); `show` reads the
 * orchestrator's state item `dag_run#<run_id>`.
 */

type Globals = (command: Command) => Target;

// ---------------------------------------------------------------------------------------------
// Input checks

function runIdOf(value: string | undefined, flag: string): string {
  const runId = value ?? `run_${ulid()}`;
  const problem = opaqueIdProblem(runId);
  if (problem || !runId.startsWith("run_"))
    throw new UsageError(
      `${flag} ${JSON.stringify(runId)}: must be a run id run_<token> (${problem ?? "prefix must be run"}), e.g. run_${ulid()}`,
    );
  return runId;
}

function nodeIdOf(value: string, flag: string): string {
  const parsed = NodeId.safeParse(value);
  if (!parsed.success)
    throw new UsageError(
      `${flag} ${JSON.stringify(value)}: ${parsed.error.issues[0]?.message ?? "not a node id"}`,
    );
  return parsed.data;
}

/** `--output` (or `flag`): a JSON object, inline or `@file`; `what` says what it is for. */
function outputOf(value: string, flag = "--output", what?: string): Record<string, unknown> {
  let text = value;
  if (value.startsWith("@")) {
    try {
      text = readFileSync(value.slice(1), "utf8");
    } catch (error) {
      throw new UsageError(`${flag} ${value}: ${(error as Error).message}; nothing sent`);
    }
  }
  const output = parseOutput(text, flag, what);
  if (typeof output === "string") throw new UsageError(output);
  return output;
}

/** `--payload`: a signal's payload, a JSON object of at most MAX_SIGNAL_PAYLOAD_BYTES. */
function signalPayloadOf(value: string): Record<string, unknown> {
  const payload = outputOf(value, "--payload", "the signal's payload");
  const size = Buffer.byteLength(JSON.stringify(payload));
  if (size > MAX_SIGNAL_PAYLOAD_BYTES)
    throw new UsageError(
      `--payload is ${size} bytes of JSON; at most ${MAX_SIGNAL_PAYLOAD_BYTES} fit in a signal; nothing sent`,
    );
  return payload;
}

function signalKeyOf(value: string): string {
  const parsed = SignalKey.safeParse(value);
  if (!parsed.success)
    throw new UsageError(`signal ${JSON.stringify(value)}: must be 1-128 characters; nothing sent`);
  return parsed.data;
}

// ---------------------------------------------------------------------------------------------
// Sending a command

interface Sent {
  readonly envelope: Record<string, unknown>;
  readonly bus: string;
}

/**
 * Validate the command's envelope, run `precheck` (which answers the command to send: the same,
 * in the tenant of the run it acts on), and put it on the commands bus.
 */
async function send(
  t: Target,
  offline: OperatorCommand,
  precheck?: () => Promise<OperatorCommand>,
): Promise<Sent> {
  const invalid = operatorEnvelope(offline);
  if (typeof invalid === "string")
    throw new UsageError(`refusing to send an ${invalid}; nothing sent`);
  const command = precheck ? await precheck() : offline;
  const envelope = operatorEnvelope(command);
  if (typeof envelope === "string")
    throw new UsageError(`refusing to send an ${envelope}; nothing sent`);
  const bus = commandsBus(t);
  await putCommandOn(clientConfig(t), bus, envelope);
  return { envelope, bus };
}

function printSent(runId: string, { envelope, bus }: Sent): void {
  out(`${String(envelope.event_type)} sent to ${bus}`);
  out(`  run_id          ${runId}`);
  out(`  correlation_id  ${String(envelope.correlation_id)}`);
  out(`  event_id        ${String(envelope.event_id)}`);
  if (envelope.tenant_id !== undefined) out(`  tenant_id       ${String(envelope.tenant_id)}`);
  const payload = envelope.payload as Record<string, unknown>;
  if (payload.requested_by !== undefined) out(`  requested_by    ${String(payload.requested_by)}`);
  if (payload.reason !== undefined) out(`  reason          ${JSON.stringify(payload.reason)}`);
  if (payload.answer !== undefined) out(`  answer          ${String(payload.answer)}`);
  if (payload.note !== undefined) out(`  note            ${JSON.stringify(payload.note)}`);
  if (payload.waiting_since !== undefined)
    out(`  waiting_since   ${String(payload.waiting_since)}`);
  if (payload.signal !== undefined) out(`  signal          ${String(payload.signal)}`);
}

/** Who asks: $AGENTBUS_OPERATOR as given (an empty one is refused with the envelope), else the OS user. */
const requester = (): string => process.env.AGENTBUS_OPERATOR ?? operatorName();

/**
 * Send a request about an existing run, once the stored run says it can apply (and is `tenant`'s,
 * when the operator named one).
 */
async function request(
  t: Target,
  runId: string,
  req: RunRequest,
  tenant: string | undefined,
): Promise<void> {
  const requestedBy = requester();
  const command = runRequestCommand(runId, req, requestedBy);
  const sent = await send(t, command, async () => {
    const { table, state } = await findRun(t, runId);
    // A node of a run that does not exist is not found (exit 1); a cancel of one is refused.
    if (!state && req.kind !== "cancel")
      throw new NotFoundError(
        `no such run: ${runId} (no dag_run#${runId} in ${table}); nothing sent`,
      );
    const compiled = await stackCompiled(t);
    const problem = runRequestProblem(runId, state?.data, req, {
      ...(tenant === undefined ? {} : { tenant }),
      compiled,
    });
    if (problem)
      throw new UsageError(
        `${problem}${state ? "" : ` (no dag_run#${runId} in ${table})`}; nothing sent`,
      );
    // In the run's tenant, so that what the command causes stays there.
    return runRequestCommand(runId, req, requestedBy, state?.data ?? undefined);
  });
  printSent(runId, sent);
  // A node's confirmation answers an approval (a BLOCKED node's, a plan's): the audit topic gets
  // who answered what, as for an agent's tool call or a held reply.
  if (req.kind !== "confirm") return;
  const auditId = await withStack(t, (stack) => recordApproval(stack, sent.envelope, "cli"));
  if (auditId) out(`  recorded in the audit trail as operator.approval.answered ${auditId}`);
}

// ---------------------------------------------------------------------------------------------
// Reading a run

/** The run's stored state, if there is one, and the state table it was looked up in. */
async function findRun(
  t: Target,
  runId: string,
): Promise<{ table: string; state: StoredState<OrchestratorState> | undefined }> {
  const dynamodb = new DynamoDBClient(clientConfig(t));
  try {
    const table = await stateTable(t, dynamodb);
    // Only the state table is read (no inbox or checkpoint is asked for).
    const store = new DynamoEventStore({
      client: fromSdk(dynamodb),
      tables: { state: table, events: "", inbox: "" },
    });
    const loaded = await store.load({ state: { type: "dag_run", id: runId } });
    return { table, state: loaded.state as StoredState<OrchestratorState> | undefined };
  } finally {
    dynamodb.destroy();
  }
}

async function loadRun(t: Target, runId: string): Promise<StoredState<OrchestratorState>> {
  const { table, state } = await findRun(t, runId);
  if (!state)
    throw new NotFoundError(
      `no such run: ${runId} (no dag_run#${runId} in ${table}; the orchestrator writes it when it accepts workflow.start.requested)`,
    );
  return state;
}

// ---------------------------------------------------------------------------------------------
// Commands

/** The `workflow` command and its subcommands; `targetOf` resolves the global options. */
export function workflowCommand(targetOf: Globals): Command {
  const workflow = new Command("workflow");
  for (const make of [startCommand, showCommand, rerunCommand, resetCommand, resolveCommand])
    workflow.addCommand(make(targetOf));
  workflow.addCommand(putCommand(targetOf));
  workflow.addCommand(listCommand(targetOf));
  workflow.addCommand(allowCommand(targetOf));
  workflow.addCommand(cancelCommand(targetOf));
  workflow.addCommand(confirmCommand(targetOf));
  workflow.addCommand(signalCommand(targetOf));
  return workflow;
}

/** `workflow start` */
function startCommand(globals: Globals): Command {
  return new Command("start")
    .description(
      "start a run: checks the input against the workflow's declared input (every problem named, nothing sent), then puts workflow.start.requested on the commands bus",
    )
    .option(
      "--workflow <name>",
      "the workflow's name or alias: given to the stack, or registered (the run's tenant's own first): agentbus workflow list",
    )
    .option("--kind <alias>", "the same as --workflow, for an alias (a kind, as quick-news)")
    .option("--input <json>", "the run's input, a JSON object (default {})")
    .option("--topic <hint>", "topic hint for the run: the input's topic_hint (a content run's)")
    .option("--run-id <id>", "run id run_<token> (default: run_<new ULID>)")
    .addOption(tenantOption("the tenant whose run it is (default: the tenant default)"))
    .action(async function (this: Command, options: StartOptions) {
      const tenantId = tenantArgument(options.tenant);
      const name = workflowNameOf(options);
      const runId = runIdOf(options.runId, "--run-id");
      const request = runInputOf(options);
      const t = globals(this);
      if (options.kind !== undefined) await checkAlias(t, options.kind);
      await checkStartInput(t, name, request, tenantId);
      const sent = await send(t, {
        type: "workflow.start.requested",
        aggregate: { type: "dag_run", id: runId },
        ...(tenantId === undefined ? {} : { tenantId }),
        payload: { run_id: runId, workflow_name: name, request },
      });
      printSent(runId, sent);
    });
}

interface StartOptions {
  readonly kind?: string;
  readonly workflow?: string;
  readonly input?: string;
  readonly topic?: string;
  readonly runId?: string;
  readonly tenant?: string;
}

/** The run's input: `--input`'s object, with `--topic` as its topic_hint. */
function runInputOf(options: StartOptions): Record<string, unknown> {
  let input: unknown = {};
  if (options.input !== undefined) {
    try {
      input = JSON.parse(options.input);
    } catch (error) {
      throw new UsageError(`--input is not JSON (${(error as Error).message}); nothing sent`);
    }
    if (input === null || typeof input !== "object" || Array.isArray(input))
      throw new UsageError("--input must be a JSON object; nothing sent");
  }
  return {
    ...(input as Record<string, unknown>),
    ...(options.topic === undefined ? {} : { topic_hint: options.topic }),
  };
}

/**
 * Refuse a start whose input does not fit its workflow's declared input, every problem on a line
 * (a stack workflow is checked here, the stack's read from its outputs; a
 * registered one as the registry has it). A name none of them knows is left to the orchestrator,
 * which refuses it on the bus (`workflow.rejected`).
 */
async function checkStartInput(
  t: Target,
  name: string,
  input: Record<string, unknown>,
  tenant: string | undefined,
): Promise<void> {
  const { findWorkflow } = await import("../../lib/operator/workflows");
  const config = clientConfig(t);
  const compiled = await stackCompiled(t);
  const dynamodb = new DynamoDBClient(config);
  try {
    const registry = compiled.names.includes(name)
      ? new InMemoryWorkflowRegistry()
      : new DynamoWorkflowRegistry({
          client: fromSdk(dynamodb),
          tableName: await stateTable(t, dynamodb),
        });
    const found = await findWorkflow(
      { compiled, registry },
      name,
      tenant === undefined ? {} : { tenant },
    );
    const problems = found ? runInputProblems(found.definition.input, input) : [];
    if (problems.length > 0)
      throw new UsageError(
        [
          `refusing to start ${name} v${found?.version}: the input does not fit its declared input; nothing sent`,
          ...problems.map((p) => `  ${p}`),
        ].join("\n"),
      );
  } finally {
    dynamodb.destroy();
  }
}

/**
 * The workflow a start names: `--workflow` or `--kind` (the same, read as an alias), one of them;
 * the catalog says whether the stack or the registry has it (checkStartInput).
 */
function workflowNameOf(options: { kind?: string; workflow?: string }): string {
  if ((options.kind === undefined) === (options.workflow === undefined))
    throw new UsageError(
      "give either --workflow <name> (the stack's, or a registered one) or --kind <alias>",
    );
  const [option, name] =
    options.workflow !== undefined
      ? ["--workflow", options.workflow]
      : ["--kind", options.kind ?? ""];
  if (!WORKFLOW_NAME_PATTERN.test(name))
    throw new UsageError(
      `${option} ${JSON.stringify(name)}: a name a start gives is kebab-case (a-z, 0-9 and -, starting with a letter, at most 64)`,
    );
  return name;
}

/**
 * Refuse a `--kind` no workflow of the stack declares as its alias (only a stack's workflow may
 * declare one), naming those it has; nothing is sent.
 */
async function checkAlias(t: Target, kind: string): Promise<void> {
  const aliases = (await stackCompiled(t)).listed.flatMap((w) => (w.alias ? [w.alias] : []));
  if (!aliases.includes(kind))
    throw new UsageError(
      `--kind ${JSON.stringify(kind)}: unknown workflow kind, no workflow of the stack declares it as its alias (${aliases.join(", ") || "none declares one"}); nothing sent`,
    );
}

/** The stack's workflows, from its outputs (a local stack's as it published them). */
async function stackCompiled(t: Target) {
  const { compiledOf } = await import("../../lib/operator/workflows");
  const { readPublishedOutputs } = await import("../../lib/operator/stack");
  const outputs =
    t.outputs ??
    (t.endpoint ? await readPublishedOutputs(clientConfig(t), `AgentBus-${t.stage}`) : undefined);
  return compiledOf(outputs);
}

/** `workflow show` */
function showCommand(globals: Globals): Command {
  return new Command("show")
    .description(
      "show a run: status, generation, nodes and timeline (from the state table); or, given a workflow's name, its definition (the stack's or registered)",
    )
    .argument("<run-id|name>", "run id run_<token>, or a workflow's name")
    .option("--json", "print the stored state item (or the definition) as JSON")
    .option("--version <n>", "the definition's version (default: the newest)")
    .addOption(tenantOption("a workflow's name: this tenant's own first, then every tenant's"))
    .action(async function (
      this: Command,
      arg: string,
      options: { json?: boolean; version?: string; tenant?: string },
    ) {
      if (WORKFLOW_NAME_PATTERN.test(arg) || options.version !== undefined)
        return showDefinition(globals(this), arg, options);
      const stored = await loadRun(globals(this), runIdOf(arg, "run id"));
      if (options.json) out(JSON.stringify(stored, null, 2));
      else printRun(stored, knownDefinition(stored.data, await stackCompiled(globals(this))));
    });
}

const REASON_HELP = "why (kept on the command, at most 1000 characters)";

/** `workflow rerun` */
function rerunCommand(globals: Globals): Command {
  return new Command("rerun")
    .description("re-run a node and everything below it: puts workflow.rerun.requested")
    .argument("<run-id>", "run id run_<token>")
    .requiredOption("--from <node-id>", "the node to run again")
    .option("--reason <text>", REASON_HELP)
    .addOption(actingTenantOption())
    .action(async function (
      this: Command,
      runIdArg: string,
      options: { from: string; reason?: string; tenant?: string },
    ) {
      const tenant = tenantArgument(options.tenant);
      const runId = runIdOf(runIdArg, "run id");
      const nodeId = nodeIdOf(options.from, "--from");
      const req: RunRequest = { kind: "rerun", nodeId, reason: options.reason };
      await request(globals(this), runId, req, tenant);
    });
}

/** `workflow reset` */
function resetCommand(globals: Globals): Command {
  return new Command("reset")
    .description(
      "reset a FAILED node (it and its descendants run again): puts workflow.reset.requested",
    )
    .argument("<run-id>", "run id run_<token>")
    .requiredOption("--node <node-id>", "the FAILED node")
    .option("--reason <text>", REASON_HELP)
    .addOption(actingTenantOption())
    .action(async function (
      this: Command,
      runIdArg: string,
      options: { node: string; reason?: string; tenant?: string },
    ) {
      const tenant = tenantArgument(options.tenant);
      const runId = runIdOf(runIdArg, "run id");
      const nodeId = nodeIdOf(options.node, "--node");
      const req: RunRequest = { kind: "reset", nodeId, reason: options.reason };
      await request(globals(this), runId, req, tenant);
    });
}

/** `workflow resolve` */
function resolveCommand(globals: Globals): Command {
  return new Command("resolve")
    .description(
      "resolve a FAILED node (one whose agent needs a person) with an output you supply: it counts as COMPLETED with it and the nodes below it run; puts workflow.resolve.requested, requested by $AGENTBUS_OPERATOR or else the OS user name",
    )
    .argument("<run-id>", "run id run_<token>")
    .requiredOption("--node <node-id>", "the FAILED node")
    .requiredOption(
      "--output <json>",
      "the node's output as a JSON object, or @file; checked against the node role's output schema",
    )
    .option("--reason <text>", REASON_HELP)
    .addOption(actingTenantOption())
    .action(async function (
      this: Command,
      runIdArg: string,
      options: { node: string; output: string; reason?: string; tenant?: string },
    ) {
      const tenant = tenantArgument(options.tenant);
      const runId = runIdOf(runIdArg, "run id");
      const nodeId = nodeIdOf(options.node, "--node");
      const output = outputOf(options.output);
      const req: RunRequest = { kind: "resolve", nodeId, output, reason: options.reason };
      await request(globals(this), runId, req, tenant);
    });
}

/** `workflow cancel` */
function cancelCommand(globals: Globals): Command {
  return new Command("cancel")
    .description(
      "cancel a running run (it ends CANCELLED, its agents drop the work): puts workflow.cancel.requested, requested by $AGENTBUS_OPERATOR or else the OS user name",
    )
    .argument("<run-id>", "run id run_<token>")
    .option(
      "--reason <text>",
      "why (kept on the command and the run's end, at most 1000 characters)",
    )
    .addOption(actingTenantOption())
    .action(async function (
      this: Command,
      runIdArg: string,
      options: { reason?: string; tenant?: string },
    ) {
      const tenant = tenantArgument(options.tenant);
      const runId = runIdOf(runIdArg, "run id");
      await request(globals(this), runId, { kind: "cancel", reason: options.reason }, tenant);
    });
}

/** Confirm or refuse what a BLOCKED node waits for (also `agentbus approve|reject <run> --step`). */
export function confirmNode(
  t: Target,
  runId: string,
  nodeId: string,
  answer: "confirmed" | "refused",
  options: { note?: string; tenant?: string; waitingSince?: string },
): Promise<void> {
  const { note, tenant, waitingSince } = options;
  const req: RunRequest = {
    kind: "confirm",
    nodeId: nodeIdOf(nodeId, "--step"),
    answer,
    ...(note === undefined ? {} : { note }),
    ...(waitingSince === undefined ? {} : { waitingSince: waitingSinceOf(waitingSince) }),
  };
  return request(t, runIdOf(runId, "run id"), req, tenant);
}

/** `--since`: the time a wait began, as `agentbus approvals` prints it (ISO 8601). */
export function waitingSinceOf(text: string): string {
  if (Number.isNaN(Date.parse(text)))
    throw new UsageError(
      `--since ${JSON.stringify(text)} is not a time (ISO 8601, as agentbus approvals prints it); nothing sent`,
    );
  return text;
}

/** `--since`: the wait a step's answer is for (a node waits more than once, a call id recurs). */
export const waitingSinceOption = () =>
  new Option(
    "--since <time>",
    "the wait answered, by since when it waits (as agentbus approvals prints it): refused when the step now waits for something else",
  );

/** `workflow confirm` */
function confirmCommand(globals: Globals): Command {
  return new Command("confirm")
    .description(
      "answer a BLOCKED node (its agent waits for an external confirmation): it resumes, or fails with --refuse; puts workflow.confirm.requested, requested by $AGENTBUS_OPERATOR or else the OS user name",
    )
    .argument("<run-id>", "run id run_<token>")
    .requiredOption("--node <node-id>", "the BLOCKED node")
    .option("--refuse", "refuse instead of confirming (the node fails)")
    .option("--note <text>", "what you confirm, or why you refuse (handed to the agent)")
    .addOption(waitingSinceOption())
    .addOption(actingTenantOption())
    .action(async function (
      this: Command,
      runIdArg: string,
      options: { node: string; refuse?: boolean; note?: string; since?: string; tenant?: string },
    ) {
      const tenant = tenantArgument(options.tenant);
      const runId = runIdOf(runIdArg, "run id");
      const nodeId = nodeIdOf(options.node, "--node");
      const answer = options.refuse ? "refused" : "confirmed";
      await confirmNode(globals(this), runId, nodeId, answer, {
        ...(options.note === undefined ? {} : { note: options.note }),
        ...(tenant === undefined ? {} : { tenant }),
        ...(options.since === undefined ? {} : { waitingSince: options.since }),
      });
    });
}

/** `workflow signal` */
function signalCommand(globals: Globals): Command {
  return new Command("signal")
    .description(
      "send a signal to a run: the wait nodes waiting for it complete with its payload; puts workflow.signal.requested, requested by $AGENTBUS_OPERATOR or else the OS user name",
    )
    .argument("<run-id>", "run id run_<token>")
    .argument("<signal>", "the signal, as the wait node's `signal` names it")
    .option(
      "--payload <json>",
      `what the released wait nodes answer with: a JSON object, or @file (at most ${MAX_SIGNAL_PAYLOAD_BYTES} bytes)`,
    )
    .option("--reason <text>", REASON_HELP)
    .addOption(actingTenantOption())
    .action(async function (
      this: Command,
      runIdArg: string,
      signalArg: string,
      options: { payload?: string; reason?: string; tenant?: string },
    ) {
      const tenant = tenantArgument(options.tenant);
      const runId = runIdOf(runIdArg, "run id");
      const signal = signalKeyOf(signalArg);
      const payload = options.payload === undefined ? undefined : signalPayloadOf(options.payload);
      const req: RunRequest = {
        kind: "signal",
        signal,
        ...(payload === undefined ? {} : { payload }),
        reason: options.reason,
      };
      await request(globals(this), runId, req, tenant);
    });
}
