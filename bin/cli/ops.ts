import { Command } from "commander";
import { opsActions } from "../../lib/operator/actions";
import { recordAction } from "../../lib/operator/audit";
import { startConsole } from "../../lib/operator/console/server";
import { listDeadLetters } from "../../lib/operator/dead-letters";
import { redrive, redriveAuditAction, redriveTargetProblem } from "../../lib/operator/redrive";
import {
  renderDeadLettersText,
  renderRedriveText,
  renderStatusText,
  renderTraceText,
} from "../../lib/operator/render-text";
import { opsSource, traceOf } from "../../lib/operator/source";
import { connect, type OpsStack, readPublishedOutputs } from "../../lib/operator/stack";
import { status, waiting } from "../../lib/operator/status";
import type { TraceNode, TraceView } from "../../lib/operator/views";
import { DEFAULT_TENANT, tenantConversationId } from "../../schemas/ids";
import { clientConfig, NotFoundError, out, type Target, UsageError } from "./target";
import { tenantArgument, tenantOption } from "./tenant";

/**
 * `agentbus trace | status | dlq | console`: what happened to a task, where work waits, what is in
 * the dead-letter queues, and a console page. Names come from `--outputs` (a deployed stack) or,
 * with `--endpoint`, from the outputs the local stack published in the emulator.
 */

async function stackOf(t: Target): Promise<OpsStack> {
  const config = clientConfig(t);
  const stackName = `AgentBus-${t.stage}`;
  const outputs =
    t.outputs ?? (t.endpoint ? await readPublishedOutputs(config, stackName) : undefined);
  if (!outputs) {
    if (t.endpoint)
      throw new NotFoundError(
        `no stack ${stackName} at ${t.endpoint} (its outputs are published by npm start -- --keep): is it running, and is --stage right?`,
      );
    throw new UsageError(
      "the stack's names are needed: give --outputs <cdk deploy --outputs-file JSON>, or --endpoint for the local stack",
    );
  }
  try {
    return connect(config, stackName, outputs);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

export async function withStack<T>(t: Target, use: (stack: OpsStack) => Promise<T>): Promise<T> {
  const stack = await stackOf(t);
  try {
    return await use(stack);
  } finally {
    stack.close();
  }
}

const ID = /^[A-Za-z0-9_-]{1,100}$/;

export function traceCommand(targetOf: (command: Command) => Target): Command {
  return new Command("trace")
    .argument(
      "<id>",
      "an event id (ULID), a task id (task_...), a conversation id (conv_...) or a correlation id",
    )
    .option("--json", "print the trace as JSON")
    .addOption(
      tenantOption(
        "only if the trace is this tenant's; a conversation id is the one this tenant's clients use",
      ),
    )
    .action(async function (
      this: Command,
      id: string,
      options: { json?: boolean; tenant?: string },
    ) {
      const tenant = tenantArgument(options.tenant);
      if (!ID.test(id))
        throw new UsageError(
          `${JSON.stringify(id)} is not an id (letters, digits, _ and -, at most 100)`,
        );
      const view = await withStack(targetOf(this), (stack) => traceByClientId(stack, id, tenant));
      if (!view) {
        const hint =
          tenant === undefined && id.startsWith("conv_")
            ? "; a conversation a client posted over HTTP is kept under an id of its tenant's: add --tenant <the tenant of the client's token>"
            : "";
        throw new NotFoundError(
          `nothing is recorded under ${id} (no event, task or correlation)${hint}`,
        );
      }
      if (tenant !== undefined && traceTenant(view) !== tenant)
        throw new NotFoundError(`nothing of tenant ${tenant} is recorded under ${id}`);
      out(options.json ? JSON.stringify(view, null, 2) : renderTraceText(view));
    });
}

export function statusCommand(targetOf: (command: Command) => Target): Command {
  return new Command("status")
    .option("--json", "print the status as JSON")
    .addOption(
      tenantOption(
        "only this tenant's runs and waits (the queues are every tenant's); what names no tenant is the tenant default's",
      ),
    )
    .action(async function (this: Command, options: { json?: boolean; tenant?: string }) {
      const tenant = tenantArgument(options.tenant);
      await withStack(targetOf(this), async (stack) => {
        const w = await waiting(stack, 50, tenant);
        const view = await status(stack, w, tenant);
        const of = tenant === undefined ? {} : { tenant };
        out(
          options.json
            ? JSON.stringify({ ...of, ...view, waiting: w }, null, 2)
            : renderStatusText(view, w, tenant),
        );
      });
    });
}

export function dlqCommand(targetOf: (command: Command) => Target): Command {
  const dlq = new Command("dlq");
  const list = async (command: Command, group: string | undefined, options: ListOptions) => {
    const tenant = tenantArgument(options.tenant);
    await withStack(targetOf(command), async (stack) => {
      if (group !== undefined && !(group in stack.names.groups))
        throw new UsageError(
          `no consumer group ${group} (groups: ${Object.keys(stack.names.groups).join(", ")})`,
        );
      const letters = await listDeadLetters(stack, {
        ...(group === undefined ? {} : { group }),
        ...(tenant === undefined ? {} : { tenant }),
      });
      const json = options.json;
      out(json ? JSON.stringify(letters, null, 2) : renderDeadLettersText(letters));
    });
  };
  dlq
    .command("list")
    .description("every dead letter of every group (read without removing them)")
    .option("--json", "print as JSON")
    .addOption(deadLetterTenant())
    .action(async function (this: Command, options: ListOptions) {
      await list(this, undefined, options);
    });
  dlq.addCommand(redriveCommand(targetOf));
  dlq
    .command("show")
    .description("the dead letters of one group, with their error code and reason")
    .argument("<group>", "consumer group name")
    .option("--json", "print as JSON")
    .addOption(deadLetterTenant())
    .action(async function (this: Command, group: string, options: ListOptions) {
      await list(this, group, options);
    });
  return dlq;
}

interface ListOptions {
  readonly json?: boolean;
  readonly tenant?: string;
}

const deadLetterTenant = () =>
  tenantOption(
    "only the dead letters whose envelope is this tenant's (one without a tenant is the tenant default's; a body that is no envelope is left out)",
  );

/**
 * The trace of `id`; with a tenant, a conversation id is first read as the id that tenant's
 * clients use (the front door keeps a tenant's conversation under `tenantConversationId`), then
 * as the id it is stored under.
 */
async function traceByClientId(
  stack: OpsStack,
  id: string,
  tenant: string | undefined,
): Promise<TraceView | undefined> {
  const stored =
    tenant !== undefined && id.startsWith("conv_") ? tenantConversationId(tenant, id) : id;
  return (stored !== id ? await traceOf(stack, stored) : undefined) ?? traceOf(stack, id);
}

/**
 * The tenant a trace belongs to, as the front door tells a task's: the one its events name, the
 * default tenant when they name none; none when they name two.
 */
function traceTenant(view: TraceView): string | undefined {
  const named = new Set<string>();
  const visit = (nodes: readonly TraceNode[]) => {
    for (const node of nodes) {
      if (node.event.tenantId !== undefined) named.add(node.event.tenantId);
      visit(node.children);
    }
  };
  visit(view.roots);
  if (named.size > 1) return undefined;
  return [...named][0] ?? DEFAULT_TENANT;
}

function redriveCommand(targetOf: (command: Command) => Target): Command {
  return new Command("redrive")
    .description(
      "put a group's dead letters back on its queue, in order per order key, deleting each only once re-queued",
    )
    .argument("<group>", "consumer group name")
    .option("--event-id <id...>", "only these events (default: every dead letter of the group)")
    .option("--buffer", "the dispatcher's dead letters, back to the buffer queue")
    .option("--dry-run", "show what would move; change nothing")
    .option("--reason <text>", "why (kept in the audit trail, at most 1000 characters)")
    .action(async function (this: Command, group: string, options: RedriveCliOptions) {
      const t = targetOf(this);
      checkRedrive(options);
      await withStack(t, async (stack) => {
        const from = options.buffer ? "buffer" : "queue";
        const problem = redriveTargetProblem(stack, group, from);
        if (problem) throw new UsageError(problem);
        const report = await redrive(stack, group, {
          eventIds: options.eventId ?? [],
          dryRun: Boolean(options.dryRun),
          from,
        });
        out(renderRedriveText(report));
        if (options.dryRun || report.moved.length === 0) return;
        const id = await recordAction(
          stack,
          clientConfig(t),
          redriveAuditAction(report, options.reason),
        );
        out(`recorded in the audit trail as operator.action.recorded ${id}`);
        if (report.failed.length > 0)
          throw new Error(`${report.failed.length} dead letter(s) could not be re-queued`);
      });
    });
}

interface RedriveCliOptions {
  readonly eventId?: string[];
  readonly buffer?: boolean;
  readonly dryRun?: boolean;
  readonly reason?: string;
}

const EVENT_ID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

function checkRedrive(options: RedriveCliOptions): void {
  for (const id of options.eventId ?? [])
    if (!EVENT_ID.test(id))
      throw new UsageError(`--event-id ${JSON.stringify(id)} is not an event id (a ULID)`);
  if (options.reason !== undefined && options.reason.length > 1000)
    throw new UsageError(`--reason is ${options.reason.length} characters, at most 1000`);
}

export function consoleCommand(targetOf: (command: Command) => Target): Command {
  return new Command("console")
    .option("--port <port>", "port on 127.0.0.1 (default: 8630)", "8630")
    .action(async function (this: Command, options: { port: string }) {
      const port = Number(options.port);
      if (!Number.isInteger(port) || port < 0 || port > 65535)
        throw new UsageError(`--port ${JSON.stringify(options.port)} is not a port number`);
      const stack = await stackOf(targetOf(this));
      const running = await startConsole({
        source: opsSource(stack),
        actions: opsActions(stack),
        port,
      });
      out(`console of ${stack.stackName}: ${running.url}`);
      await new Promise<void>((resolve) => {
        process.once("SIGINT", resolve);
        process.once("SIGTERM", resolve);
      });
      await running.close();
      stack.close();
    });
}
