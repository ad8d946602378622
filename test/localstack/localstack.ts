import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { SQSClient } from "@aws-sdk/client-sqs";
import { LocalstackContainer, type StartedLocalStackContainer } from "@testcontainers/localstack";
import { getContainerRuntimeClient } from "testcontainers";

/**
 * Helpers of the LocalStack suite: find a container runtime, start LocalStack with Testcontainers,
 * deploy the CDK app into it with `cdklocal` (its Lambda functions then run inside LocalStack), and
 * read the stack's outputs. Nothing here runs without a Docker engine.
 */

/** The last LocalStack image that runs without an auth token (the free image froze in March 2026). */
export const DEFAULT_LOCALSTACK_IMAGE = "localstack/localstack:4.14.0";
export const REGION = "us-east-1";
/** LocalStack accepts any credentials; `test` maps to account 000000000000. */
export const CREDENTIALS = { accessKeyId: "test", secretAccessKey: "test" } as const;

/**
 * Services LocalStack loads (`SERVICES`, strict loading). Names the image does not have are
 * ignored by LocalStack itself: `schemas`, `pipes` and `ecr` only exist with an auth token (the CDK
 * bootstrap stack's ECR repository is a CloudFormation placeholder on the free image).
 */
export const LOCALSTACK_SERVICES = [
  "cloudformation",
  "cloudwatch",
  "dynamodb",
  "dynamodbstreams",
  "ecr",
  "events",
  "iam",
  "kms",
  "lambda",
  "logs",
  "pipes",
  "s3",
  "schemas",
  "sqs",
  "ssm",
  "sts",
] as const;

/**
 * Context the suite passes to the CDK app: which emulator the synthesized template is for, so the
 * stack can leave out what that emulator cannot run (`localstack-free`: no Pipes, no schema
 * registry, no archives, no dashboards). The stack may ignore it; see `checkTemplate`.
 */
export const EMULATOR_CONTEXT_KEY = "agentbus:emulator";

const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));
const require = createRequire(import.meta.url);

export type DockerCheck = { ok: true } | { ok: false; why: string };

/**
 * Whether Testcontainers finds a working container runtime (its own detection: DOCKER_HOST,
 * ~/.testcontainers.properties, the Docker/rootless/npipe sockets), within `timeoutMs`.
 */
export async function dockerAvailable(timeoutMs = 10_000): Promise<DockerCheck> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<DockerCheck>((resolve) => {
    timer = setTimeout(
      () => resolve({ ok: false, why: `no container runtime answered within ${timeoutMs} ms` }),
      timeoutMs,
    );
    timer.unref();
  });
  const probe = getContainerRuntimeClient().then(
    (): DockerCheck => ({ ok: true }),
    (error: unknown): DockerCheck => ({
      ok: false,
      why: `no Docker engine found (testcontainers: ${oneLine(error)}); start Docker or set DOCKER_HOST`,
    }),
  );
  try {
    return await Promise.race([probe, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export interface LocalStack {
  readonly container: StartedLocalStackContainer;
  /** `http://<host>:<mapped port>`: the edge port, reachable from this machine. */
  readonly endpoint: string;
  readonly image: string;
  /** True when LOCALSTACK_AUTH_TOKEN was passed (paid features such as Pipes may be available). */
  readonly licensed: boolean;
  /** The last lines LocalStack logged, optionally only those matching `filter`. */
  logTail(lines?: number, filter?: RegExp): string;
  /** Stops and removes the container (LocalStack first stops the Lambda containers it started). */
  stop(): Promise<void>;
}

export interface StartOptions {
  /** Image; default `LOCALSTACK_IMAGE` or the pinned free image. */
  readonly image?: string;
  /** Auth token for newer or paid images; default `LOCALSTACK_AUTH_TOKEN`. */
  readonly authToken?: string;
  readonly startupTimeoutMs?: number;
}

/**
 * Start LocalStack with Testcontainers (edge port 4566 mapped to a random host port) and with
 * what Lambda needs: the container runtime's socket mounted at /var/run/docker.sock, so that
 * LocalStack can start one container per function environment next to itself.
 */
export async function startLocalStack(options: StartOptions = {}): Promise<LocalStack> {
  const image = options.image || process.env.LOCALSTACK_IMAGE || DEFAULT_LOCALSTACK_IMAGE;
  const authToken = options.authToken ?? process.env.LOCALSTACK_AUTH_TOKEN ?? "";
  const runtime = await getContainerRuntimeClient();
  // The socket path as the Docker engine sees it (Testcontainers mounts the same one into Ryuk).
  const socket = runtime.info.containerRuntime.remoteSocketPath;

  const environment: Record<string, string> = {
    SERVICES: LOCALSTACK_SERVICES.join(","),
    // Testcontainers' module sets LOCALSTACK_HOST=localhost unless it is given. LocalStack builds
    // queue URLs from it (http://sqs.<region>.<host>:4566/...), and the SDK in a function sends SQS
    // calls to the queue URL's host: only localhost.localstack.cloud (LocalStack's own default)
    // resolves to LocalStack inside the function containers, whose DNS server is LocalStack.
    LOCALSTACK_HOST: "localhost.localstack.cloud:4566",
    // The functions are built for arm64; their bundles are plain JavaScript, so run them on the
    // engine's native architecture instead of emulating arm64 on x86 hosts.
    LAMBDA_IGNORE_ARCHITECTURE: "1",
    // The first start of each function container may include pulling the Node.js 22 image.
    LAMBDA_RUNTIME_ENVIRONMENT_TIMEOUT: "120",
    // LocalStack 4.x deploys resource types it has no provider for as placeholders; set it
    // explicitly (the default is announced to flip) — checkTemplate says which ones these are.
    CFN_IGNORE_UNSUPPORTED_RESOURCE_TYPES: "1",
  };
  if (authToken) environment.LOCALSTACK_AUTH_TOKEN = authToken;

  const container = await new LocalstackContainer(image)
    .withEnvironment(environment)
    .withBindMounts([{ source: socket, target: "/var/run/docker.sock" }])
    .withStartupTimeout(options.startupTimeoutMs ?? 180_000)
    .start();

  const lines: string[] = [];
  try {
    const stream = await container.logs();
    let partial = "";
    stream.on("data", (chunk: Buffer | string) => {
      const text = partial + chunk.toString();
      const parts = text.split("\n");
      partial = parts.pop() ?? "";
      lines.push(...parts);
      if (lines.length > 2000) lines.splice(0, lines.length - 2000);
    });
    stream.on("error", () => {});
  } catch {
    // Logs are only for diagnostics.
  }

  const host = container.getHost() === "localhost" ? "127.0.0.1" : container.getHost();
  let stopped = false;
  return {
    container,
    endpoint: `http://${host}:${container.getPort()}`,
    image,
    licensed: authToken !== "",
    logTail(count = 40, filter?: RegExp) {
      const picked = filter ? lines.filter((l) => filter.test(l)) : lines;
      return picked.slice(-count).join("\n");
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await container.stop({ timeout: 30_000 });
    },
  };
}

/** SDK clients of this process pointed at LocalStack (explicit endpoint: queue URLs carry 4566). */
export function awsClients(endpoint: string) {
  const config = { endpoint, region: REGION, credentials: CREDENTIALS };
  const dynamodb = new DynamoDBClient(config);
  const eventbridge = new EventBridgeClient(config);
  const sqs = new SQSClient(config);
  return {
    dynamodb,
    eventbridge,
    sqs,
    destroy() {
      dynamodb.destroy();
      eventbridge.destroy();
      sqs.destroy();
    },
  };
}

/**
 * The environment `cdklocal` runs with. With aws-cdk >= 2.177 cdklocal configures the CLI through
 * AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_S3 (both required) and drops every other AWS_* variable,
 * so a developer's profile or real credentials never reach the deploy. CDK_S3_FORCE_PATH_STYLE
 * (aws-cdk >= 2.1138) makes asset uploads path-style, so no `<bucket>.s3.<host>` DNS name is needed.
 */
export function cdkLocalEnvironment(endpoint: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    // No AWS configuration of the caller, and nothing of the test runner: the app is synthesized
    // as `cdk synth` would synthesize it from a shell.
    if (/^(AWS_|CDK_DEFAULT_|VITEST)/.test(key) || key === "NODE_ENV") continue;
    env[key] = value;
  }
  return {
    ...env,
    AWS_ENDPOINT_URL: endpoint,
    AWS_ENDPOINT_URL_S3: endpoint,
    AWS_ACCESS_KEY_ID: CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: CREDENTIALS.secretAccessKey,
    AWS_REGION: REGION,
    AWS_DEFAULT_REGION: REGION,
    AWS_ENVAR_ALLOWLIST: "AWS_REGION,AWS_DEFAULT_REGION",
    CDK_S3_FORCE_PATH_STYLE: "1",
    CDK_DISABLE_VERSION_CHECK: "1",
    CDK_DISABLE_CLI_TELEMETRY: "true",
    CI: "true",
    FORCE_COLOR: "0",
    NO_COLOR: "1",
  };
}

export interface CommandResult {
  readonly command: string;
  readonly ms: number;
}

/**
 * Run `cdklocal <args>` from the repository root, its output appended to `logFile`. Rejects with
 * the output's tail on a non-zero exit or after `timeoutMs` (then ends the process group it
 * started, and only that).
 */
export async function cdkLocal(
  args: readonly string[],
  options: { env: NodeJS.ProcessEnv; logFile: string; timeoutMs: number },
): Promise<CommandResult> {
  const bin = require.resolve("aws-cdk-local/bin/cdklocal");
  const command = `cdklocal ${args.join(" ")}`;
  const started = Date.now();
  const log = createWriteStream(options.logFile, { flags: "a" });
  log.write(`\n$ ${command}\n`);
  let tail = "";
  const keep = (chunk: Buffer) => {
    log.write(chunk);
    tail = (tail + chunk.toString()).slice(-6000);
  };
  try {
    const child: ChildProcess = spawn(process.execPath, [bin, ...args], {
      cwd: REPO_ROOT,
      env: options.env,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    running.add(child);
    child.once("close", () => running.delete(child));
    child.stdout?.on("data", keep);
    child.stderr?.on("data", keep);
    const outcome = await new Promise<{ code: number | null; timedOut: boolean }>(
      (resolve, reject) => {
        let timedOut = false;
        const timer = setTimeout(() => {
          timedOut = true;
          killGroup(child, "SIGTERM");
          setTimeout(() => killGroup(child, "SIGKILL"), 5000).unref();
        }, options.timeoutMs);
        child.once("error", (error) => {
          clearTimeout(timer);
          reject(error);
        });
        child.once("close", (code) => {
          clearTimeout(timer);
          resolve({ code, timedOut });
        });
      },
    );
    if (outcome.timedOut || outcome.code !== 0) {
      const what = outcome.timedOut
        ? `timed out after ${Math.round(options.timeoutMs / 1000)} s`
        : `exited with ${outcome.code}`;
      throw new Error(`${command} ${what} (full log: ${options.logFile}):\n${tail}`);
    }
    return { command, ms: Date.now() - started };
  } finally {
    await new Promise<void>((resolve) => log.end(resolve));
  }
}

/** cdklocal processes under way; each leads its own process group (`detached`). */
const running = new Set<ChildProcess>();
// A detached group outlives this process: end what is still running when it exits.
process.once("exit", () => stopCommands());

/** End every cdklocal process group this module started that is still running. */
export function stopCommands(): void {
  for (const child of running) killGroup(child, "SIGKILL");
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // already gone
  }
}

export interface CfnTemplate {
  readonly Resources?: Record<string, { readonly Type: string }>;
}

/**
 * CloudFormation types of the AgentBus stack (and of the CDK bootstrap stack) that LocalStack
 * 4.14's free image has a resource provider for. Anything else it deploys as a placeholder.
 */
const FREE_IMAGE_TYPES = new Set([
  "AWS::CDK::Metadata",
  "AWS::CloudFormation::Stack",
  "AWS::CloudFormation::WaitCondition",
  "AWS::CloudFormation::WaitConditionHandle",
  "AWS::CloudWatch::Alarm",
  "AWS::CloudWatch::CompositeAlarm",
  "AWS::DynamoDB::GlobalTable",
  "AWS::DynamoDB::Table",
  "AWS::ECR::Repository",
  "AWS::Events::ApiDestination",
  "AWS::Events::Connection",
  "AWS::Events::EventBus",
  "AWS::Events::EventBusPolicy",
  "AWS::Events::Rule",
  "AWS::IAM::ManagedPolicy",
  "AWS::IAM::Policy",
  "AWS::IAM::Role",
  "AWS::KMS::Alias",
  "AWS::KMS::Key",
  "AWS::Lambda::EventInvokeConfig",
  "AWS::Lambda::EventSourceMapping",
  "AWS::Lambda::Function",
  "AWS::Lambda::Permission",
  "AWS::Lambda::Version",
  "AWS::Logs::LogGroup",
  "AWS::Logs::LogStream",
  "AWS::Logs::SubscriptionFilter",
  "AWS::S3::Bucket",
  "AWS::S3::BucketPolicy",
  "AWS::Scheduler::Schedule",
  "AWS::Scheduler::ScheduleGroup",
  "AWS::SNS::Subscription",
  "AWS::SNS::Topic",
  "AWS::SNS::TopicPolicy",
  "AWS::SQS::Queue",
  "AWS::SQS::QueueInlinePolicy",
  "AWS::SQS::QueuePolicy",
  "AWS::SSM::Parameter",
  "AWS::StepFunctions::StateMachine",
]);

/** Types that carry events: as placeholders, events would silently never arrive. */
const DELIVERY_PATH_TYPES = new Set(["AWS::Pipes::Pipe"]);

export interface TemplateCheck {
  /** Placeholder types on the event path: the scenario cannot pass with them. */
  readonly blocking: string[];
  /** Placeholder types off the event path, with counts (`AWS::Events::Archive x3`). */
  readonly placeholders: string[];
}

/**
 * What LocalStack's free image will not really deploy from `template`. With an auth token the
 * image may support more (Pipes, schema registry), so nothing is reported then.
 */
export function checkTemplate(template: CfnTemplate, licensed: boolean): TemplateCheck {
  if (licensed) return { blocking: [], placeholders: [] };
  const counts = new Map<string, number>();
  for (const resource of Object.values(template.Resources ?? {})) {
    if (FREE_IMAGE_TYPES.has(resource.Type)) continue;
    counts.set(resource.Type, (counts.get(resource.Type) ?? 0) + 1);
  }
  const described = [...counts].sort(([a], [b]) => a.localeCompare(b));
  return {
    blocking: described.filter(([t]) => DELIVERY_PATH_TYPES.has(t)).map(([t, n]) => `${t} x${n}`),
    placeholders: described
      .filter(([t]) => !DELIVERY_PATH_TYPES.has(t))
      .map(([t, n]) => `${t} x${n}`),
  };
}

export interface DeployedStack {
  readonly stackName: string;
  readonly stage: string;
  readonly outputs: StackOutputs;
  readonly check: TemplateCheck;
  readonly timings: readonly CommandResult[];
}

/**
 * Synthesize the app (local esbuild bundling, no Docker), check the template, bootstrap, and
 * deploy the synthesized assembly into LocalStack; the stack outputs come from `--outputs-file`.
 *
 *   cdklocal synth AgentBus-<stage> -c stage=<stage> -c agentbus:emulator=<...> -o <work>/cdk.out --quiet
 *   cdklocal bootstrap --app <work>/cdk.out
 *   cdklocal deploy AgentBus-<stage> --app <work>/cdk.out --require-approval never
 *            --outputs-file <work>/outputs.json --progress events
 */
export async function deployStack(
  localstack: LocalStack,
  options: {
    stage: string;
    workDir: string;
    /** Epoch ms by which every step must have finished (each step also has its own limit). */
    deadline?: number;
    log?: (line: string) => void;
  },
): Promise<DeployedStack> {
  const log = options.log ?? (() => {});
  const stackName = `AgentBus-${options.stage}`;
  const assembly = join(options.workDir, "cdk.out");
  const outputsFile = join(options.workDir, "outputs.json");
  const logFile = join(options.workDir, "cdklocal.log");
  const env = cdkLocalEnvironment(localstack.endpoint);
  const emulator = localstack.licensed ? "localstack" : "localstack-free";
  const timings: CommandResult[] = [];
  const step = async (args: string[], stepLimitMs: number) => {
    const left = (options.deadline ?? Number.POSITIVE_INFINITY) - Date.now();
    const timeoutMs = Math.max(1000, Math.min(stepLimitMs, left));
    const result = await cdkLocal(args, { env, logFile, timeoutMs });
    timings.push(result);
    log(`${result.command.split(" ").slice(0, 2).join(" ")}: ${Math.round(result.ms / 1000)} s`);
  };

  await step(
    [
      "synth",
      stackName,
      "-c",
      `stage=${options.stage}`,
      "-c",
      `${EMULATOR_CONTEXT_KEY}=${emulator}`,
      "-o",
      assembly,
      "--quiet",
      "--no-notices",
    ],
    10 * 60_000,
  );
  const template = JSON.parse(
    await readFile(join(assembly, `${stackName}.template.json`), "utf8"),
  ) as CfnTemplate;
  const check = checkTemplate(template, localstack.licensed);
  if (check.blocking.length > 0) {
    throw new Error(
      `the synthesized stack has ${check.blocking.join(", ")}, which ${localstack.image} without LOCALSTACK_AUTH_TOKEN deploys as a placeholder, so events would never reach the consumer groups: synthesize with delivery "dispatch-function" for context ${EMULATOR_CONTEXT_KEY}=${emulator}, or set LOCALSTACK_AUTH_TOKEN`,
    );
  }
  if (check.placeholders.length > 0) {
    log(
      `deployed as placeholders (no provider in ${localstack.image}): ${check.placeholders.join(", ")}`,
    );
  }

  await step(["bootstrap", "--app", assembly, "--no-notices"], 10 * 60_000);
  await step(
    [
      "deploy",
      stackName,
      "--app",
      assembly,
      "--require-approval",
      "never",
      "--outputs-file",
      outputsFile,
      "--progress",
      "events",
      "--no-notices",
    ],
    15 * 60_000,
  );
  const all = JSON.parse(await readFile(outputsFile, "utf8")) as Record<
    string,
    Record<string, string>
  >;
  const outputs = all[stackName];
  if (!outputs) throw new Error(`${outputsFile} has no outputs for ${stackName}`);
  return {
    stackName,
    stage: options.stage,
    outputs: new StackOutputs(stackName, outputs),
    check,
    timings,
  };
}

/** A stack's outputs, looked up by key or by the physical names the stack gives its resources. */
export class StackOutputs {
  constructor(
    readonly stackName: string,
    readonly values: Readonly<Record<string, string>>,
  ) {}

  /** The output of that key. */
  get(key: string): string {
    const value = this.values[key];
    if (value === undefined) throw new Error(this.missing(`output ${key}`));
    return value;
  }

  /** The one output whose key ends with `keySuffix` and whose value satisfies `match`. */
  find(what: string, keySuffix: string, match: (value: string) => boolean): string {
    const found = Object.entries(this.values).filter(
      ([key, value]) => key.endsWith(keySuffix) && match(value),
    );
    if (found.length !== 1) {
      throw new Error(this.missing(`${found.length === 0 ? "no" : "more than one"} ${what}`));
    }
    return found[0]?.[1] ?? "";
  }

  private missing(what: string): string {
    return `${this.stackName}: ${what} among its outputs ${JSON.stringify(this.values, null, 2)}`;
  }
}

/** The last path segment of a queue URL: the queue name. */
export function queueName(url: string): string {
  return url.split("/").at(-1) ?? url;
}

/**
 * Call `probe` every `intervalMs` until `done` accepts its value; reject after `timeoutMs` with the
 * last value seen (or the last error of `probe`) and `diagnostics()`.
 */
export async function eventually<T>(
  what: string,
  probe: () => Promise<T>,
  done: (value: T) => boolean,
  options: { timeoutMs: number; intervalMs?: number; diagnostics?: () => string },
): Promise<T> {
  const deadline = Date.now() + options.timeoutMs;
  let last: { value: T } | { error: unknown } | undefined;
  for (;;) {
    try {
      const value = await probe();
      if (done(value)) return value;
      last = { value };
    } catch (error) {
      last = { error };
    }
    if (Date.now() >= deadline) break;
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 2000));
  }
  const seen =
    last === undefined
      ? "nothing"
      : "error" in last
        ? `error ${oneLine(last.error)}`
        : JSON.stringify(last.value);
  const extra = options.diagnostics?.();
  throw new Error(
    `${what}: not reached within ${Math.round(options.timeoutMs / 1000)} s; last seen: ${seen}${extra ? `\n${extra}` : ""}`,
  );
}

function oneLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.replace(/\s+/g, " ").trim();
}
