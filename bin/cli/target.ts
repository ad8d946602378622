import { readFileSync } from "node:fs";
import { type DynamoDBClient, paginateListTables } from "@aws-sdk/client-dynamodb";
import { getProfileName, loadSharedConfigFiles } from "@smithy/core/config";

/**
 * Where the operator commands act: endpoint, region, stage and resource names, from the global
 * options, the environment and a `cdk deploy --outputs-file` JSON.
 */

/** Exit codes (bin/agentbus-cli.ts): 1 found a problem, 2 refused the input (0: done). */
export const EXIT_PROBLEM = 1;
export const EXIT_REFUSED = 2;

export const out = (line = "") => process.stdout.write(`${line}\n`);

/** A command-line mistake found before any AWS call: exit 2, nothing sent. */
export class UsageError extends Error {}
/** The AWS side does not have what was asked for, or not as it should be (exit 1). */
export class NotFoundError extends Error {}

export interface GlobalOptions {
  endpoint?: string;
  region?: string;
  stage?: string;
  outputs?: string;
  /** The application's module (bin/cli/app.ts). */
  app?: string;
  bus?: string;
  stateTable?: string;
}

export interface Target {
  readonly endpoint?: string;
  readonly region: string;
  readonly stage: string;
  readonly outputs?: Record<string, string>;
  readonly bus?: string;
  readonly stateTable?: string;
}

const STAGE_PATTERN = /^[a-z0-9]+(-[a-z0-9]+)*$/;

/**
 * The target of a command. `options.region` must be set: the CLI sets it before any command runs,
 * from `chooseRegion`.
 */
export function target(options: GlobalOptions): Target {
  const endpoint = endpointOf(options);
  const { region } = options;
  if (!region) throw new UsageError("no AWS region chosen (chooseRegion runs before the command)");
  const chosen = stackOf(options, endpoint);
  const stage = chosen.stage ?? (endpoint ? "local" : "dev");
  if (!STAGE_PATTERN.test(stage) || stage.length > 20)
    throw new UsageError(
      `--stage ${JSON.stringify(stage)}: lower-case letters, digits and single hyphens, at most 20 characters`,
    );
  const { outputs } = chosen;
  return {
    endpoint,
    region,
    stage,
    outputs,
    bus: options.bus ?? outputs?.CommandsBusName,
    stateTable: options.stateTable ?? outputs?.StateTableName,
  };
}

function endpointOf(options: GlobalOptions): string | undefined {
  const endpoint = options.endpoint ?? (process.env.AWS_ENDPOINT_URL || undefined);
  if (endpoint !== undefined) {
    try {
      new URL(endpoint);
    } catch {
      throw new UsageError(`--endpoint ${JSON.stringify(endpoint)} is not a URL`);
    }
  }
  return endpoint;
}

/** The stage, and the stack's outputs when an outputs file is given (the stack of that stage). */
function stackOf(
  options: GlobalOptions,
  endpoint: string | undefined,
): { stage?: string; outputs?: Record<string, string> } {
  let stage = options.stage ?? (process.env.AGENTBUS_STAGE || undefined);
  if (!options.outputs) return { stage };
  const file = readOutputs(options.outputs);
  const stacks = Object.keys(file).filter((key) => key.startsWith("AgentBus-"));
  if (stage === undefined && stacks.length === 1) stage = stacks[0]?.slice("AgentBus-".length);
  const stack = `AgentBus-${stage ?? (endpoint ? "local" : "dev")}`;
  const found = file[stack];
  if (!found || typeof found !== "object")
    throw new UsageError(
      `${options.outputs} has no stack ${stack} (it has: ${stacks.join(", ") || "none"}); pick one with --stage`,
    );
  return { stage, outputs: found as Record<string, string> };
}

/** A region and where it came from, as the CLI says it. */
export interface RegionChoice {
  readonly region: string;
  readonly source: string;
}

/** The region of the stack's outputs (`Region`, recorded by every stack since it was added). */
const REGION_OUTPUT = "Region";

/**
 * The region to act in: `--region`, else the one the outputs file records for the stack, else
 * the environment (`AWS_REGION`, `AWS_DEFAULT_REGION`), else the AWS profile's (`AWS_PROFILE` or
 * default, in the shared config file). With an endpoint and none of these, the local emulator's
 * us-east-1, said as such; against AWS, no default: a usage error.
 */
export async function chooseRegion(options: GlobalOptions): Promise<RegionChoice> {
  if (options.region) return { region: options.region, source: "--region" };
  const endpoint = endpointOf(options);
  const recorded = stackOf(options, endpoint).outputs?.[REGION_OUTPUT];
  if (recorded) return { region: recorded, source: `the outputs file ${options.outputs}` };
  for (const name of ["AWS_REGION", "AWS_DEFAULT_REGION"]) {
    const value = process.env[name];
    if (value) return { region: value, source: `$${name}` };
  }
  const profile = getProfileName({});
  const { configFile } = await loadSharedConfigFiles({ ignoreCache: true });
  const fromProfile = configFile?.[profile]?.region;
  if (fromProfile) return { region: fromProfile, source: `the AWS profile ${profile}` };
  if (endpoint)
    return { region: "us-east-1", source: "the local emulator's default: no other was given" };
  throw new UsageError(
    "no AWS region: give --region, an --outputs file of a deployed stack, $AWS_REGION, or a region in your AWS profile",
  );
}

function readOutputs(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new UsageError(`cannot read --outputs ${path}: ${(error as Error).message}`);
  }
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed))
      return parsed as Record<string, unknown>;
  } catch {
    // reported below
  }
  throw new UsageError(
    `--outputs ${path} is not a cdk deploy --outputs-file JSON object keyed by stack`,
  );
}

export function clientConfig(t: Target) {
  const local = t.endpoint !== undefined && !process.env.AWS_ACCESS_KEY_ID;
  return {
    region: t.region,
    ...(t.endpoint ? { endpoint: t.endpoint } : {}),
    // An emulator accepts any credentials; real AWS uses the default provider chain.
    ...(local ? { credentials: { accessKeyId: "testing", secretAccessKey: "testing" } } : {}),
  };
}

/** The commands bus: --bus, the outputs file, or the stage's physical name. */
export function commandsBus(t: Target): string {
  return t.bus ?? `agentbus-${t.stage}-commands`;
}

/** The state table: --state-table, the outputs file, or (with an endpoint) found by ListTables. */
export async function stateTable(t: Target, dynamodb: DynamoDBClient): Promise<string> {
  if (t.stateTable) return t.stateTable;
  if (!t.endpoint)
    throw new UsageError(
      "the state table name is needed: give --outputs <cdk outputs file> or --state-table <name>",
    );
  const prefix = `AgentBus-${t.stage}-TablesState`;
  const found: string[] = [];
  for await (const page of paginateListTables({ client: dynamodb }, {}))
    for (const name of page.TableNames ?? []) if (name.startsWith(prefix)) found.push(name);
  if (found.length === 1) return found[0] as string;
  if (found.length === 0)
    throw new NotFoundError(
      `no state table of stage ${t.stage} at ${t.endpoint} (no table named ${prefix}*): is the stack deployed there (npm start -- --keep), and is --stage right?`,
    );
  throw new NotFoundError(
    `several state tables match ${prefix}* at ${t.endpoint} (${found.join(", ")}): pick one with --state-table`,
  );
}
