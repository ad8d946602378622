import { userInfo } from "node:os";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { Command } from "commander";
import { ulid } from "ulid";
import { DynamoEventStore } from "../../functions/adapters/dynamodb/event-store";
import type { NodeRun } from "../../functions/core/dag/run";
import type { StoredState } from "../../functions/core/ports";
import { contentWorkflowFor } from "../../functions/roles/content-workflows";
import type { OrchestratorState } from "../../functions/roles/orchestrator-state";
import { putEnvelope } from "../../lib/ops/put-envelope";
import { opaqueIdProblem, registry } from "../../schemas";
import { NodeId, WORKFLOW_KINDS } from "../../schemas/events/workflow";
import {
  clientConfig,
  commandsBus,
  NotFoundError,
  out,
  stateTable,
  type Target,
  UsageError,
} from "./target";

/**
 * `agentbus workflow`: start a run, show it, re-run from a node, reset a FAILED node, cancel a run.
 * Commands go on the stage's `commands` bus as unsequenced envelopes (aggregate `dag_run/<run_id>`
 * at version 0, order key = run id), validated against the registry before they are sent; `show`
 * reads the orchestrator's state item `dag_run#<run_id>`.
 */

const PRODUCER = "agentbus-cli";

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

// ---------------------------------------------------------------------------------------------
// Sending a command

interface Sent {
  readonly eventId: string;
  readonly correlationId: string;
  readonly bus: string;
}

/** Build the envelope, validate it against the registry, and put it on the commands bus. */
async function send(
  t: Target,
  eventType: string,
  runId: string,
  payload: Record<string, unknown>,
  /** Checks against the deployment, run once the envelope is valid and before it is sent. */
  precheck?: () => Promise<void>,
): Promise<Sent> {
  const id = ulid();
  const correlationId = `corr_${id}`;
  const envelope = {
    event_id: id,
    event_type: eventType,
    schema_version: 1,
    occurred_at: new Date().toISOString(),
    correlation_id: correlationId,
    causation_id: null,
    task_id: `task_${id}`,
    aggregate: { type: "dag_run", id: runId, version: 0 },
    order_key: runId,
    producer: PRODUCER,
    attempt: 1,
    payload: { run_id: runId, ...payload },
  };
  const parsed = registry.parse(envelope);
  if (!parsed.ok)
    throw new UsageError(
      `refusing to send an invalid ${eventType} (${parsed.code}):\n${parsed.message}`,
    );
  await precheck?.();
  const bus = commandsBus(t);
  await putEnvelope(clientConfig(t), bus, envelope);
  return { eventId: id, correlationId, bus };
}

function printSent(eventType: string, runId: string, sent: Sent): void {
  out(`${eventType} sent to ${sent.bus}`);
  out(`  run_id          ${runId}`);
  out(`  correlation_id  ${sent.correlationId}`);
  out(`  event_id        ${sent.eventId}`);
}

// ---------------------------------------------------------------------------------------------
// Showing a run

async function loadRun(t: Target, runId: string): Promise<StoredState<OrchestratorState>> {
  const { table, state } = await findRun(t, runId);
  if (!state)
    throw new NotFoundError(
      `no such run: ${runId} (no dag_run#${runId} in ${table}; the orchestrator writes it when it accepts workflow.start.requested)`,
    );
  return state;
}

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
      client: dynamodb,
      tables: { state: table, events: "", inbox: "" },
    });
    const loaded = await store.load({ state: { type: "dag_run", id: runId } });
    return { table, state: loaded.state as StoredState<OrchestratorState> | undefined };
  } finally {
    dynamodb.destroy();
  }
}

/**
 * Refuse a cancel the orchestrator would refuse or ignore: a run that does not exist or has
 * already ended (a cancel of a CANCELLED run changes nothing, of another ended run it is rejected).
 */
async function requireRunning(t: Target, runId: string): Promise<void> {
  const { table, state } = await findRun(t, runId);
  if (!state)
    throw new UsageError(`no such run: ${runId} (no dag_run#${runId} in ${table}); nothing sent`);
  const { status } = state.data.run;
  if (status !== "RUNNING")
    throw new UsageError(
      `run ${runId} already ended ${status}; there is nothing to cancel; nothing sent`,
    );
}

/** Who is asking: AGENTBUS_OPERATOR, else the OS user name. */
function operator(): string {
  const named = process.env.AGENTBUS_OPERATOR;
  if (named !== undefined) return named;
  try {
    return userInfo().username;
  } catch {
    throw new UsageError(
      "cannot tell who is asking (no user name for this process): set AGENTBUS_OPERATOR",
    );
  }
}

/**
 * Refuse up front what the orchestrator would refuse (with `workflow.rejected`, after the fact):
 * a run that does not exist, a node the run does not have, a reset of a node that is not FAILED.
 * The orchestrator checks again when the command arrives (the run may change in between).
 */
async function requireNode(
  t: Target,
  runId: string,
  nodeId: string,
  request: "rerun" | "reset",
): Promise<void> {
  const { run } = (await loadRun(t, runId)).data;
  const node = run.nodes[nodeId];
  if (!node)
    throw new UsageError(
      `run ${runId} has no node ${nodeId} (its nodes: ${Object.keys(run.nodes).join(", ")}); nothing sent`,
    );
  if (request === "reset" && node.state !== "FAILED")
    throw new UsageError(
      `node ${nodeId} of run ${runId} is ${node.state}; only a FAILED node can be reset (use \`workflow rerun --from ${nodeId}\` to run it again); nothing sent`,
    );
}

/** The run's nodes in the order of its workflow definition (unknown ones last, sorted). */
function nodeOrder({ workflow, run }: OrchestratorState): string[] {
  let defined: string[] = [];
  try {
    defined = contentWorkflowFor({ kind: workflow }).nodes.map((n) => n.id);
  } catch {
    // a definition this CLI does not know: sorted ids only
  }
  const ids = Object.keys(run.nodes);
  return [
    ...defined.filter((id) => ids.includes(id)),
    ...ids.filter((id) => !defined.includes(id)).sort(),
  ];
}

function printRun(stored: StoredState<OrchestratorState>): void {
  const { workflow, run, held, timeline } = stored.data;
  out(`run ${run.run_id}`);
  out(`  workflow    ${workflow} (${run.workflow.name} v${run.workflow.version})`);
  out(`  status      ${run.status}`);
  out(`  generation  ${run.generation}`);
  out(`  revision    ${stored.revision} (stream version ${stored.version})`);
  out();
  const rows = nodeOrder(stored.data).map((id) => [id, run.nodes[id] as NodeRun] as const);
  const cells = rows.map(([id, node]) => [
    id,
    node.state,
    String(node.attempt),
    node.assigned_generation === undefined ? "-" : String(node.assigned_generation),
    node.error ? `${node.error.code}: ${node.error.message.split("\n")[0]}` : "",
  ]);
  const header = ["node", "state", "attempt", "generation", "error"];
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i]?.length ?? 0)));
  const line = (cells: string[]) =>
    `  ${cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd()}`;
  out("nodes");
  out(line(header));
  for (const row of cells) out(line(row));
  if (held.length) {
    out();
    out("held back");
    for (const h of held) out(`  ${JSON.stringify(h)}`);
  }
  out();
  out(`timeline (${timeline.length} steps)`);
  for (const step of timeline) {
    const node = step.node_id ? ` ${step.node_id}` : "";
    const gen = step.generation === undefined ? "" : ` g${step.generation}`;
    out(`  ${step.at}  ${step.event}${node}${gen}  (${step.cause})`);
  }
}

/** The `workflow` command and its subcommands; `targetOf` resolves the global options. */
export function workflowCommand(targetOf: (command: Command) => Target): Command {
  const workflow = new Command("workflow").description(
    "workflow runs (the orchestrator's DAG runs)",
  );
  workflow.addCommand(startCommand(targetOf));
  workflow.addCommand(showCommand(targetOf));
  workflow.addCommand(rerunCommand(targetOf));
  workflow.addCommand(resetCommand(targetOf));
  workflow.addCommand(cancelCommand(targetOf));
  return workflow;
}

/** `workflow start` */
function startCommand(globals: (command: Command) => Target): Command {
  return new Command("start")
    .description("start a run: puts workflow.start.requested on the commands bus")
    .requiredOption("--kind <kind>", `workflow kind: ${WORKFLOW_KINDS.join(" | ")}`)
    .requiredOption("--topic <hint>", "topic hint for the run (the request's topic_hint)")
    .option("--run-id <id>", "run id run_<token> (default: run_<new ULID>)")
    .action(async function (
      this: Command,
      options: { kind: string; topic: string; runId?: string },
    ) {
      if (!(WORKFLOW_KINDS as readonly string[]).includes(options.kind))
        throw new UsageError(
          `--kind ${JSON.stringify(options.kind)}: unknown workflow kind (one of ${WORKFLOW_KINDS.join(", ")})`,
        );
      const runId = runIdOf(options.runId, "--run-id");
      const t = globals(this);
      const sent = await send(t, "workflow.start.requested", runId, {
        workflow: options.kind,
        request: { topic_hint: options.topic },
      });
      printSent("workflow.start.requested", runId, sent);
    });
}

/** `workflow show` */
function showCommand(globals: (command: Command) => Target): Command {
  return new Command("show")
    .description("show a run: status, generation, nodes and timeline (from the state table)")
    .argument("<run-id>", "run id run_<token>")
    .option("--json", "print the stored state item as JSON")
    .action(async function (this: Command, runIdArg: string, options: { json?: boolean }) {
      const runId = runIdOf(runIdArg, "run id");
      const t = globals(this);
      const stored = await loadRun(t, runId);
      if (options.json) out(JSON.stringify(stored, null, 2));
      else printRun(stored);
    });
}

/** `workflow rerun` */
function rerunCommand(globals: (command: Command) => Target): Command {
  return new Command("rerun")
    .description("re-run a node and everything below it: puts workflow.rerun.requested")
    .argument("<run-id>", "run id run_<token>")
    .requiredOption("--from <node-id>", "the node to run again")
    .action(async function (this: Command, runIdArg: string, options: { from: string }) {
      const runId = runIdOf(runIdArg, "run id");
      const nodeId = nodeIdOf(options.from, "--from");
      const t = globals(this);
      const sent = await send(t, "workflow.rerun.requested", runId, { node_id: nodeId }, () =>
        requireNode(t, runId, nodeId, "rerun"),
      );
      printSent("workflow.rerun.requested", runId, sent);
    });
}

/** `workflow reset` */
function resetCommand(globals: (command: Command) => Target): Command {
  return new Command("reset")
    .description(
      "reset a FAILED node (it and its descendants run again): puts workflow.reset.requested",
    )
    .argument("<run-id>", "run id run_<token>")
    .requiredOption("--node <node-id>", "the FAILED node")
    .option("--reason <text>", "why (kept on the command, at most 1000 characters)")
    .action(async function (
      this: Command,
      runIdArg: string,
      options: { node: string; reason?: string },
    ) {
      const runId = runIdOf(runIdArg, "run id");
      const nodeId = nodeIdOf(options.node, "--node");
      const t = globals(this);
      const sent = await send(
        t,
        "workflow.reset.requested",
        runId,
        { node_id: nodeId, ...(options.reason === undefined ? {} : { reason: options.reason }) },
        () => requireNode(t, runId, nodeId, "reset"),
      );
      printSent("workflow.reset.requested", runId, sent);
    });
}

/** `workflow cancel` */
function cancelCommand(globals: (command: Command) => Target): Command {
  return new Command("cancel")
    .description(
      "cancel a running run (it ends CANCELLED, its agents drop the work): puts workflow.cancel.requested, requested by $AGENTBUS_OPERATOR or else the OS user name",
    )
    .argument("<run-id>", "run id run_<token>")
    .option(
      "--reason <text>",
      "why (kept on the command and the run's end, at most 1000 characters)",
    )
    .action(async function (this: Command, runIdArg: string, options: { reason?: string }) {
      const runId = runIdOf(runIdArg, "run id");
      const requestedBy = operator();
      const reason = options.reason === undefined ? {} : { reason: options.reason };
      const t = globals(this);
      const sent = await send(
        t,
        "workflow.cancel.requested",
        runId,
        { requested_by: requestedBy, ...reason },
        () => requireRunning(t, runId),
      );
      printSent("workflow.cancel.requested", runId, sent);
      out(`  requested_by    ${requestedBy}`);
      if (options.reason !== undefined) out(`  reason          ${JSON.stringify(options.reason)}`);
    });
}
