import { Command } from "commander";
import { ulid } from "ulid";
import { loggableMessage } from "../functions/handlers/log-redaction";
import {
  type ConversationScenarioResult,
  hasConversation,
  renderConversation,
  runConversationScenario,
} from "../lib/dev/local/conversation";
import { type LocalEnvironment, startLocal } from "../lib/dev/local/environment";
import { DEV_TOKEN_CLAIMS } from "../lib/dev/local/front-door";
import { Progress } from "../lib/dev/local/progress";
import type { RuntimeEvent } from "../lib/dev/local/runtime";
import { runScenario, type ScenarioResult } from "../lib/dev/local/scenario";
import { readDeadLetters } from "../lib/dev/local/scenario/dead-letters";
import { StackPresentError } from "../lib/dev/local/stack-present";
import { renderSummary, renderTimeline, withObservedDuplicates } from "../lib/dev/local/trace";
import { opsActions } from "../lib/operator/actions";
import { type RunningConsole, startConsole } from "../lib/operator/console/server";
import { renderTraceText } from "../lib/operator/render-text";
import { opsSource, traceOf } from "../lib/operator/source";
import { silenceNodeVersionWarning } from "../lib/operator/warnings";

silenceNodeVersionWarning();

const program = new Command()
  .name("npm start --")
  .description(
    "Run AgentBus locally: emulator, deploy, the reference scenario end to end, and its causal trace.",
  )
  .option(
    "--keep",
    "keep the emulator and the handlers running after the scenario (Ctrl-C stops them)",
  )
  .option(
    "--port <port>",
    "port for moto_server on 127.0.0.1 (default: a free port; 4566 with --keep)",
  )
  .option(
    "--endpoint <url>",
    "deploy to an emulator that is already running (default: $AWS_ENDPOINT_URL); what is there is kept, and a stage already deployed there is refused",
  )
  .option("--stage <name>", "the stage to deploy (stack AgentBus-<name>)", "local")
  .option(
    "--reset",
    "with --endpoint (moto_server): wipe everything in that emulator before deploying",
  )
  .option(
    "--no-scenario",
    "bring the stack up and keep it running without playing the reference scenario (implies --keep)",
  )
  .option(
    "--console-port <port>",
    "port of the console page on 127.0.0.1 with --keep (default: 8630; 0 = any free port)",
    "8630",
  )
  .option(
    "--api-port <port>",
    "port of the front door (the HTTP API) on 127.0.0.1 with --keep (default: 8631; 0 = any free port)",
    "8631",
  )
  .option("--verbose", "print the handlers' Powertools logs")
  .parse();

const opts = program.opts<{
  keep?: boolean;
  port?: string;
  endpoint?: string;
  stage: string;
  reset?: boolean;
  verbose?: boolean;
  scenario: boolean;
  consolePort: string;
  apiPort: string;
}>();
const keep = Boolean(opts.keep) || !opts.scenario;
const out = (line = "") => process.stdout.write(`${line}\n`);
let env: LocalEnvironment | undefined;
let consolePage: RunningConsole | undefined;
let live = false;

async function shutdown(code: number): Promise<never> {
  const current = env;
  env = undefined;
  await consolePage?.close();
  if (current) await current.stop();
  process.exit(code);
}
process.on("SIGINT", () => void shutdown(130));
process.on("SIGTERM", () => void shutdown(143));

function liveLine(event: RuntimeEvent): void {
  if (!live) return;
  if (event.kind === "consume-failed") {
    const { error, outcome } = event.failure;
    out(
      `  ${event.group}: ${error.errorClass} ${error.code} (${outcome}): ${loggableMessage(error.message)}`,
    );
  } else if (event.kind === "consumed") {
    for (const s of event.result.steps)
      out(
        `  ${event.group}: ${s.status}${s.reason ? `:${s.reason}` : ""} ${s.eventType} v${s.version} ${s.eventId}${s.repaired ? " (gap repair)" : ""}`,
      );
  } else if (event.kind === "invocation-failed")
    out(`  ! ${event.function}: ${loggableMessage(event.error)}`);
}

async function main(): Promise<void> {
  const consolePort = Number(opts.consolePort);
  for (const [flag, value] of [
    ["--console-port", opts.consolePort],
    ["--api-port", opts.apiPort],
  ]) {
    const port = Number(value);
    if (!Number.isInteger(port) || port < 0 || port > 65535) {
      process.stderr.write(`${flag} ${JSON.stringify(value)} is not a port\n`);
      process.exit(2);
    }
  }
  const endpoint = opts.endpoint ?? process.env.AWS_ENDPOINT_URL;
  if (opts.reset && !endpoint) {
    process.stderr.write(
      "--reset wipes an emulator given with --endpoint; without one, a new moto_server is started empty\n",
    );
    process.exit(2);
  }
  const progress = new Progress(out);
  out("AgentBus local run");
  progress.part("starting: emulator, synth, deploy");
  env = await startStack(endpoint);
  describeStack(env, progress);
  if (opts.scenario) {
    const failed = await runAndReport(env, progress);
    progress.stop();
    if (!keep) return shutdown(failed ? 1 : 0);
  }
  progress.stop();
  consolePage = await startConsole({
    source: opsSource(env.ops),
    actions: opsActions(env.ops),
    port: consolePort,
  });
  await keepUp(env, consolePage.url);
  live = true;
  await new Promise(() => {});
}

/** The local stack, on the emulator at `endpoint` if one is given, else on a new moto_server. */
function startStack(endpoint: string | undefined): Promise<LocalEnvironment> {
  const port = opts.port ? Number(opts.port) : keep && !endpoint ? 4566 : undefined;
  return startLocal({
    endpoint,
    port,
    stage: opts.stage,
    verbose: opts.verbose,
    reset: Boolean(opts.reset),
    ...(keep ? { frontDoorPort: Number(opts.apiPort) } : {}),
    onEvent: liveLine,
    onDelivery: (d) => {
      if (live) out(`  channel: delivered ${d.key} to ${d.recipient}: ${d.text}`);
    },
  });
}

function describeStack(env: LocalEnvironment, progress: Progress): void {
  const d = env.deployment;
  const t = env.timings;
  const skipped = Object.entries(d.skipped)
    .map(([type, n]) => `${type.replace("AWS::", "")}×${n}`)
    .join(", ");
  progress.print(
    `  emulator   ${env.moto ? `moto_server at ${env.endpoint} (pid ${env.moto.pid}), up in ${t.emulator} ms` : `given endpoint ${env.endpoint}`}`,
  );
  progress.print(
    `  stack      ${d.stackName}: synthesized in ${t.synth} ms, ${d.resources.size} resources deployed to the emulator in ${t.deploy} ms`,
  );
  progress.print(
    `             ${d.functions.length} functions run in-process (${d.functions.map((f) => (f.group ? `${f.kind} ${f.group}` : f.kind)).join(", ")}), ${d.mappings.length} event source mappings, ${d.pipes.length} pipes and ${d.subscribers.length} subscribers of new buses emulated`,
  );
  progress.print(`             not needed locally: ${skipped || "nothing"}`);
}

/** The reference scenario, then everything it shows; the number of failed checks. */
async function runAndReport(env: LocalEnvironment, progress: Progress): Promise<number> {
  out();
  progress.part("scenario: tasks and content-production workflows");
  const result = await runScenario(env, (line) => progress.step(line));
  progress.checked(result.checks);
  let support: ConversationScenarioResult | undefined;
  if (hasConversation(env)) {
    progress.part("scenario: customer-support conversations");
    support = await runConversationScenario(env, (line) => progress.step(line));
    progress.checked(support.checks);
  }
  progress.part("report: causal traces, dead letters, checks");
  // Dead letters of both parts (the scenario read them before the conversations ran).
  const deadLetters = support ? await readDeadLetters(env) : result.deadLetters;
  await printTraces(env, result, support);
  printDeadLetters(env, deadLetters);
  const checks = [...result.checks, ...(support?.checks ?? [])];
  out("checks");
  for (const c of checks)
    out(`  ${c.ok ? "ok  " : "FAIL"} ${c.name}${c.ok ? "" : ` — ${c.detail}`}`);
  const failed = checks.filter((c) => !c.ok).length;
  out(`${checks.length - failed} passed, ${failed} failed`);
  return failed;
}

async function printTraces(
  env: LocalEnvironment,
  result: ScenarioResult,
  support: ConversationScenarioResult | undefined,
): Promise<void> {
  out();
  out("causal trace (as `agentbus trace <correlation id>` reads it from the stack)");
  for (const correlation of result.correlations) {
    out(await traceText(env, correlation));
    out();
  }
  if (support) {
    out("customer-support conversations (causal trace of each message)");
    for (const correlation of support.correlations) {
      out(await traceText(env, correlation));
      out();
    }
    out("customer-support conversations (the conversation view and the channel's deliveries)");
    for (const c of support.cases) {
      out(renderConversation(c, env.channel.deliveries()));
      out();
    }
  }
  out("content-production runs (node timelines from the orchestrator's state)");
  for (const run of result.runs) {
    out(renderTimeline(run.label, run.state));
    out();
    for (const child of run.children ?? []) {
      out(renderTimeline(`${run.label}, ${child.nodeId}'s child run`, child.state));
      out();
    }
  }
}

/** A correlation's trace read from the stack, with the duplicates this run observed. */
async function traceText(env: LocalEnvironment, correlation: string): Promise<string> {
  const view = await traceOf(env.ops, correlation);
  if (!view) return `trace of ${correlation}: nothing recorded`;
  return renderTraceText(withObservedDuplicates(view, env.observations));
}

function printDeadLetters(env: LocalEnvironment, deadLetters: ScenarioResult["deadLetters"]): void {
  if (env.observations.faults.length) {
    out("injected faults");
    for (const f of env.observations.faults) out(`  ${f}`);
    out();
  }
  out("dead-letter queues");
  for (const dl of deadLetters)
    out(
      `  ${dl.queue}: ${dl.code} (event ${dl.eventId ?? "?"}): ${dl.reason.split("\n").slice(0, 2).join(" ")}`,
    );
  if (deadLetters.length === 0) out("  empty");
  out();
  out(renderSummary(env.groups, env.observations));
  out();
}

/** What a person needs to use the running stack, then every delivery as it happens. */
async function keepUp(env: LocalEnvironment, consoleUrl: string): Promise<void> {
  const bus = env.buses.events ?? "";
  const taskId = `task_${ulid()}`;
  const envelope = {
    event_id: ulid(),
    event_type: "task.feedback.received",
    schema_version: 1,
    occurred_at: new Date().toISOString(),
    correlation_id: `corr_${ulid()}`,
    causation_id: null,
    task_id: taskId,
    aggregate: { type: "task", id: taskId, version: 0 },
    producer: "cli",
    payload: { rating: 4, comment: "sent with the AWS CLI" },
  };
  const entries = JSON.stringify([
    {
      EventBusName: bus,
      Source: "agentbus.cli",
      DetailType: envelope.event_type,
      Detail: JSON.stringify(envelope),
    },
  ]);
  out();
  out("the stack stays up (Ctrl-C stops it)");
  out(`  console    ${consoleUrl}`);
  out(`  endpoint   ${env.endpoint}`);
  out(`  bus        ${bus}`);
  for (const [name, value] of Object.entries(env.deployment.outputs))
    if (/TableName$/.test(name)) out(`  ${name.padEnd(10)} ${value}`);
  out("  send an event:");
  out(
    `  AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_DEFAULT_REGION=${env.region} aws events put-events --endpoint-url ${env.endpoint} --entries '${entries.replaceAll("'", "'\\''")}'`,
  );
  if (env.frontDoor) {
    const token = await env.frontDoor.issuer.token(DEV_TOKEN_CLAIMS, 24 * 3600);
    const conversation = `conv_${ulid()}`;
    out(
      `  front door ${env.frontDoor.url}  (HTTP API; this token is tenant ${DEV_TOKEN_CLAIMS.tenant_id}, user ${DEV_TOKEN_CLAIMS.sub}, for 24 h)`,
    );
    out(`  token      ${token}`);
    out("  send a customer's message and read the conversation:");
    out(`  TOKEN=${token}`);
    out(
      `  curl -s -X POST ${env.frontDoor.url}/conversations/${conversation}/messages -H "authorization: Bearer $TOKEN" -H 'content-type: application/json' -H 'idempotency-key: ${ulid()}' -d '{"text":"Where is my order 123?"}'`,
    );
    out(
      `  curl -s ${env.frontDoor.url}/conversations/${conversation} -H "authorization: Bearer $TOKEN"`,
    );
    out("  follow it as it happens (server-sent events):");
    out(
      `  curl -sN ${env.frontDoor.url}/conversations/${conversation}/stream -H "authorization: Bearer $TOKEN"`,
    );
  }
  out("  see what happened (in another terminal):");
  for (const command of operatorCommands(env)) out(`  ${command}`);
  out("deliveries:");
}

/** The operator commands keepUp suggests, as typed in another terminal. */
function operatorCommands(env: LocalEnvironment): string[] {
  const stage = opts.stage === "local" ? "" : ` --stage ${opts.stage}`;
  const conversation = env.frontDoor
    ? [`trace <conversation id of a curl above> --tenant ${DEV_TOKEN_CLAIMS.tenant_id}`]
    : [];
  return ["status", "dlq list", "trace <event, task or correlation id>", ...conversation].map(
    (command) => `npx agentbus --endpoint ${env.endpoint}${stage} ${command}`,
  );
}

main().catch(async (error: unknown) => {
  if (error instanceof StackPresentError) {
    process.stderr.write(`npm start: ${error.message}\n`);
    return shutdown(2);
  }
  process.stderr.write(
    `npm start failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  await shutdown(1);
});
