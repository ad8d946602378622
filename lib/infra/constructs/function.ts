import { existsSync } from "node:fs";
import { dirname, isAbsolute, join, relative, sep } from "node:path";
import { Duration, RemovalPolicy, Stack, Validations } from "aws-cdk-lib";
import { Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import { Architecture, type CfnFunction, Runtime, Tracing } from "aws-cdk-lib/aws-lambda";
import { NodejsFunction } from "aws-cdk-lib/aws-lambda-nodejs";
import { LogGroup, type RetentionDays } from "aws-cdk-lib/aws-logs";
import type { Construct } from "constructs";
import { absoluteEntry } from "../handler-entry";
import { PACKAGE_ROOT } from "../package-root";
import { logRetentionAt } from "../retention";
import { FUNCTION_RUNTIME } from "./bundling";
import { applyTelemetry, bundlingFor, telemetrySettingsOf } from "./telemetry";

export { FUNCTION_RUNTIME } from "./bundling";

/**
 * The repository root (the package's): relative handler entries, and the `agentbus:entry`
 * metadata of the entries inside it, are relative to it.
 */
export const REPO_ROOT = PACKAGE_ROOT;

/** What a function does in the path of an event; the local runtime emulates each kind. */
export type FunctionKind =
  | "relay"
  | "dispatch"
  | "consumer"
  | "sweeper"
  | "front-door"
  | "front-door-stream"
  | "a2a-push";

/** CloudWatch namespace of the metrics every handler publishes (`POWERTOOLS_METRICS_NAMESPACE`). */
export const METRICS_NAMESPACE = "AgentBus";

/** CloudFormation metadata keys on every AgentBus function (read by the local runtime). */
export const METADATA = {
  entry: "agentbus:entry",
  kind: "agentbus:kind",
  group: "agentbus:group",
} as const;

/**
 * The actions active tracing grants on `Resource: "*"`: X-Ray has no resource-level permissions
 * for them (https://docs.aws.amazon.com/xray/latest/devguide/security_iam_service-with-iam.html).
 */
export const XRAY_ACTIONS = ["xray:PutTraceSegments", "xray:PutTelemetryRecords"] as const;

export interface AgentBusFunctionProps {
  /**
   * The handler file, which must exist and export `handler`: a path relative to the repository
   * root with `/` separators (e.g. `functions/handlers/relay.ts`), or, for an application's own
   * handler outside the package, an absolute path or a file URL (handlerEntryProblem). Recorded
   * as `agentbus:entry` metadata (entryMetadata) so the local runtime can run the same handler.
   */
  readonly entry: string;

  /** The function's role in the path of an event, recorded as `agentbus:kind` metadata. */
  readonly kind: FunctionKind;

  /**
   * The consumer group the function serves, recorded as `agentbus:group` metadata.
   * @default - none (the relay serves every group)
   */
  readonly group?: string;

  /**
   * `POWERTOOLS_SERVICE_NAME` of the function's logs, metrics and traces.
   * @default - the group name, or `agentbus-<kind>` without a group
   */
  readonly serviceName?: string;

  /**
   * Environment of the handler, added to the Powertools and Node.js settings every function gets.
   * @default - none
   */
  readonly environment?: Record<string, string>;

  /**
   * @default Duration.seconds(30)
   */
  readonly timeout?: Duration;

  /**
   * @default 256
   */
  readonly memorySize?: number;

  /**
   * Retention of the function's log group.
   * @default - the declared retention of `functionLogs` (functions/core/retention.ts, a month),
   * or the context's `agentbus:retention:functionLogs`
   */
  readonly logRetention?: RetentionDays;

  /**
   * @default - none
   */
  readonly description?: string;

  /**
   * Actions the function is granted on `Resource: "*"` besides X-Ray's, each with the reason it
   * cannot be scoped to a resource. They are acknowledged, with these reasons, as the cdk-nag
   * finding `AwsSolutions-IAM5[Resource::*]` on the function's role policy; the stack's IAM
   * tests fail on any other action on `*`.
   * @default - none
   */
  readonly unscopedActions?: Readonly<Record<string, string>>;
}

/**
 * A Lambda function of AgentBus: Node.js 22 on arm64, bundled by esbuild as minified ESM with
 * source maps and the AWS SDK v3 inside (`FUNCTION_BUNDLING` in ./bundling.ts says why the SDK
 * is bundled rather than taken from the runtime, and what is trimmed), X-Ray active tracing (and
 * OpenTelemetry's export when the stack's context asks for it: ./telemetry.ts), a log
 * group with retention, and the `agentbus:*` metadata the local runtime uses to run the handler
 * in-process (from its TypeScript source: the local runtime never loads a bundle).
 *
 * Its execution role (`<id>ServiceRole`, next to the function) starts with no AWS managed policy:
 * it may write to the function's own log group (`logs:CreateLogStream`, `logs:PutLogEvents` on
 * that group only, where `AWSLambdaBasicExecutionRole` would allow every log group of the
 * account) and send traces to X-Ray; every other permission comes from a grant.
 */
export class AgentBusFunction extends NodejsFunction {
  /** The handler path as its `agentbus:entry` metadata records it (entryMetadata). */
  readonly entryPath: string;
  readonly kind: FunctionKind;
  readonly group: string | undefined;

  constructor(scope: Construct, id: string, props: AgentBusFunctionProps) {
    const entry = resolveEntry(props.entry);
    const projectRoot = lockRootAbove(entry);
    const logGroup = new LogGroup(scope, `${id}LogGroup`, {
      retention: props.logRetention ?? logRetentionAt(scope, "functionLogs"),
      removalPolicy: RemovalPolicy.DESTROY,
    });
    const role = new Role(scope, `${id}ServiceRole`, {
      assumedBy: new ServicePrincipal("lambda.amazonaws.com"),
      description: props.description && `Execution role: ${props.description}`.slice(0, 1000),
    });
    logGroup.grantWrite(role);
    const serviceName = props.serviceName ?? props.group ?? `agentbus-${props.kind}`;
    super(scope, id, {
      role,
      entry,
      handler: "handler",
      projectRoot: projectRoot.folder,
      depsLockFilePath: projectRoot.lockFile,
      runtime: FUNCTION_RUNTIME,
      architecture: Architecture.ARM_64,
      timeout: props.timeout ?? Duration.seconds(30),
      memorySize: props.memorySize ?? 256,
      tracing: Tracing.ACTIVE,
      logGroup,
      description: props.description,
      environment: {
        POWERTOOLS_SERVICE_NAME: serviceName,
        POWERTOOLS_METRICS_NAMESPACE: METRICS_NAMESPACE,
        ...props.environment,
      },
      bundling: bundlingFor(telemetrySettingsOf(scope)),
    });
    this.entryPath = entryMetadata(entry);
    this.kind = props.kind;
    this.group = props.group;

    const cfn = this.node.defaultChild as CfnFunction;
    cfn.addMetadata(METADATA.entry, this.entryPath);
    cfn.addMetadata(METADATA.kind, props.kind);
    if (props.group !== undefined) cfn.addMetadata(METADATA.group, props.group);
    acknowledgeNagFindings(cfn, role, props.unscopedActions);
    applyTelemetry(this, role, serviceName);
    this.node.addValidation({
      validate: () => environmentProblems(Stack.of(this).resolve(cfn.environment)),
    });
  }
}

/** Lambda's limit on a function's environment: its names and values, 4 KB in all. */
export const MAX_ENVIRONMENT_BYTES = 4096;
/** What a value the deployment fills in (a name, an ARN, a queue's URL) is counted as. */
const DEPLOYED_VALUE_BYTES = 128;

/**
 * The synth's refusal of an environment over Lambda's 4 KB, naming its largest variables, instead
 * of a deploy that fails late: every budget of a variable (workflows, tenants' limits...) is
 * checked on its own, and this checks what they add up to. A value CloudFormation fills in is
 * counted at DEPLOYED_VALUE_BYTES.
 */
export function environmentProblems(resolved: unknown): string[] {
  const variables = (resolved as { variables?: Record<string, unknown> } | undefined)?.variables;
  if (!variables) return [];
  const sizes = Object.entries(variables).map(
    ([name, value]) => [name, Buffer.byteLength(name) + valueBytes(value)] as const,
  );
  const total = sizes.reduce((sum, [, bytes]) => sum + bytes, 0);
  if (total <= MAX_ENVIRONMENT_BYTES) return [];
  const largest = [...sizes].sort((a, b) => b[1] - a[1]).slice(0, 3);
  return [
    `the function's environment takes about ${total} bytes, over Lambda's ${MAX_ENVIRONMENT_BYTES} (largest: ${largest.map(([name, bytes]) => `${name} ${bytes}`).join(", ")}): give it fewer workflows or tenants' limits`,
  ];
}

/** A resolved value's bytes: a string's own; a join's parts; any other intrinsic as deployed. */
function valueBytes(value: unknown): number {
  if (typeof value === "string") return Buffer.byteLength(value);
  const join = (value as { "Fn::Join"?: [string, unknown[]] } | null)?.["Fn::Join"];
  if (join) {
    const [separator, parts] = join;
    const inner = parts.reduce<number>((sum, part) => sum + valueBytes(part), 0);
    return inner + Buffer.byteLength(separator) * Math.max(0, parts.length - 1);
  }
  return DEPLOYED_VALUE_BYTES;
}

/**
 * The cdk-nag findings every AgentBus function has on purpose: its runtime (L1), and the X-Ray
 * actions (and the caller's `unscoped` ones) that cannot be scoped to a resource (IAM5).
 */
function acknowledgeNagFindings(
  cfn: CfnFunction,
  role: Role,
  unscopedActions: AgentBusFunctionProps["unscopedActions"],
): void {
  Validations.of(cfn).acknowledge({
    id: "AwsSolutions-L1",
    reason: `${FUNCTION_RUNTIME.name} on purpose: the project requires Node.js 22 for its functions (esbuild bundles for node22; the handlers and their Powertools and SDK versions are tested on it). cdk-nag asks for the newest runtime aws-cdk-lib knows (${newestNodeRuntime()}); moving to it is a deliberate upgrade of the runtime and the bundling target together, not a per-function setting`,
  });
  // Active tracing put the X-Ray statement into the role's default policy (created with it).
  const unscoped = {
    ...Object.fromEntries(
      XRAY_ACTIONS.map((action) => [
        action,
        "X-Ray has no resource-level permissions; active tracing needs it",
      ]),
    ),
    ...unscopedActions,
  };
  const defaultPolicy = role.node.findChild("DefaultPolicy");
  Validations.of(defaultPolicy).acknowledge({
    id: "AwsSolutions-IAM5[Resource::*]",
    reason: `Resource "*" is granted only for actions that cannot be scoped to a resource: ${Object.entries(
      unscoped,
    )
      .map(([action, why]) => `${action} (${why})`)
      .join("; ")}. Every other statement names its table, queue, stream, bus or log group`,
  });
}

/** The newest Node.js Lambda runtime this aws-cdk-lib knows (what cdk-nag's L1 asks for). */
function newestNodeRuntime(): string {
  const version = (name: string) => Number(/^nodejs(\d+)/.exec(name)?.[1] ?? 0);
  return Runtime.ALL.map((runtime) => runtime.name)
    .filter((name) => name.startsWith("nodejs"))
    .reduce(
      (newest, name) => (version(name) > version(newest) ? name : newest),
      FUNCTION_RUNTIME.name,
    );
}

/**
 * Why `entry` is not a usable handler entry, if it is not: a `.ts`/`.js` file that exists (`exists`
 * is given the absolute path), named by a path relative to the repository root with `/`
 * separators (the reference applications' roles), or by an absolute path or a file URL (an
 * application's own roles outside the package: `handlerBeside(import.meta.url)`).
 */
export function handlerEntryProblem(
  entry: string,
  exists: (absolutePath: string) => boolean = existsSync,
): string | undefined {
  const absolute = typeof entry === "string" ? absoluteEntry(entry) : undefined;
  if (absolute === undefined || !/\.(ts|mts|js|mjs)$/.test(absolute)) {
    return `handler entry ${JSON.stringify(entry)} must be a .ts/.js file: a path relative to the repository root with / separators, an absolute path, or a file URL (handlerBeside(import.meta.url))`;
  }
  if (!exists(absolute)) {
    return `handler entry ${JSON.stringify(entry)} does not exist (looked at ${absolute})`;
  }
  return undefined;
}

/** The absolute path of a handler entry, checked to exist. */
function resolveEntry(entry: string): string {
  const problem = handlerEntryProblem(entry);
  if (problem) throw new Error(problem);
  return absoluteEntry(entry) as string;
}

/**
 * The `agentbus:entry` metadata of a handler file: relative to the repository root with `/`
 * separators when it is inside (the same on every checkout), else its absolute path (an
 * application's own handler); the local runtime imports either.
 */
export function entryMetadata(absolutePath: string): string {
  const inside = relative(REPO_ROOT, absolutePath);
  if (inside.startsWith("..") || isAbsolute(inside)) return absolutePath;
  return inside.split(sep).join("/");
}

/** The lock files a function's dependencies can be bundled from, in the order looked for. */
const LOCK_FILES = ["package-lock.json", "pnpm-lock.yaml", "yarn.lock"] as const;

/**
 * The project a handler is bundled in: the nearest folder above it with a lock file, whose
 * node_modules esbuild resolves its imports from. For the hub's handlers that is the checkout, or
 * the application AgentBus is installed in (a package ships no lock file); for an application's
 * own handler, the application.
 */
export function lockRootAbove(file: string): { folder: string; lockFile: string } {
  for (let folder = dirname(file); ; folder = dirname(folder)) {
    const lockFile = LOCK_FILES.map((name) => join(folder, name)).find((path) => existsSync(path));
    if (lockFile) return { folder, lockFile };
    if (dirname(folder) === folder)
      throw new Error(
        `no lock file (${LOCK_FILES.join(", ")}) in a folder above the handler ${file}: its function is bundled from the application's root, the folder with its lock file`,
      );
  }
}
