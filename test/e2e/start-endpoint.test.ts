import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import {
  CreateTableCommand,
  DynamoDBClient,
  GetItemCommand,
  ListTablesCommand,
  PutItemCommand,
} from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { emulatorConfig } from "../../lib/dev/local/deploy";
import { type MotoServer, startMoto } from "../../lib/dev/local/moto";
import { SLOW_STEP_TIMEOUT_MS } from "../support/timeouts";

/**
 * `npm start -- --endpoint URL` deploys to an emulator someone else runs: what is there stays. A
 * table of the user's, with an item, survives a start and its stop; a second start of the same
 * stage is refused with the flags that would deploy beside it or wipe the emulator, and changes
 * nothing either.
 */

const ROOT = join(import.meta.dirname, "..", "..");

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** `npm start -- ...args`; stopped with Ctrl-C (SIGINT to its process group) once `until` shows. */
function npmStart(args: readonly string[], until?: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child: ChildProcess = spawn("npm", ["start", "--", ...args], {
      cwd: ROOT,
      env: { ...process.env, AWS_ENDPOINT_URL: undefined },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    let stdout = "";
    let stderr = "";
    let stopped = false;
    child.stdout?.on("data", (chunk) => {
      stdout += chunk;
      if (until && !stopped && stdout.includes(until) && child.pid) {
        stopped = true;
        process.kill(-child.pid, "SIGINT");
      }
    });
    child.stderr?.on("data", (chunk) => {
      stderr += chunk;
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

describe("npm start -- --endpoint: an emulator it did not start", () => {
  let moto: MotoServer;
  let dynamodb: DynamoDBClient;
  const key = { customer_id: { S: "c-1" } };

  beforeAll(async () => {
    moto = await startMoto({ timeoutMs: SLOW_STEP_TIMEOUT_MS });
    dynamodb = new DynamoDBClient(emulatorConfig(moto.endpoint));
    await dynamodb.send(
      new CreateTableCommand({
        TableName: "customers",
        KeySchema: [{ AttributeName: "customer_id", KeyType: "HASH" }],
        AttributeDefinitions: [{ AttributeName: "customer_id", AttributeType: "S" }],
        BillingMode: "PAY_PER_REQUEST",
      }),
    );
    await dynamodb.send(
      new PutItemCommand({ TableName: "customers", Item: { ...key, name: { S: "Ada" } } }),
    );
  }, SLOW_STEP_TIMEOUT_MS);

  afterAll(async () => {
    dynamodb?.destroy();
    await moto?.stop();
  });

  const itemThere = async () =>
    (await dynamodb.send(new GetItemCommand({ TableName: "customers", Key: key }))).Item?.name?.S;

  it("keeps what was there: the user's item outlives a --keep --no-scenario start and its stop", async () => {
    const run = await npmStart(
      ["--keep", "--no-scenario", "--endpoint", moto.endpoint, "--console-port", "0"],
      "the stack stays up",
    );
    expect(run.stdout, run.stderr).toContain(`given endpoint ${moto.endpoint}`);
    expect(await itemThere()).toBe("Ada");
    const tables = (await dynamodb.send(new ListTablesCommand({}))).TableNames ?? [];
    expect(tables).toContain("customers");
    expect(tables.some((t) => t.startsWith("AgentBus-local-"))).toBe(true);
  }, 240_000);

  it("refuses a stage that is there already, naming --stage and --reset, and changes nothing", async () => {
    const run = await npmStart(["--no-scenario", "--endpoint", moto.endpoint]);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain(`the emulator at ${moto.endpoint} already has AgentBus-local`);
    expect(run.stderr).toMatch(/--stage <name>.*--reset/);
    expect(await itemThere()).toBe("Ada");
  }, 240_000);

  it(
    "--reset without an endpoint is a usage error",
    async () => {
      const run = await npmStart(["--reset"]);
      expect(run.code).toBe(2);
      expect(run.stderr).toContain("--reset wipes an emulator given with --endpoint");
    },
    SLOW_STEP_TIMEOUT_MS,
  );
});
