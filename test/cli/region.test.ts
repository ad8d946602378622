import { mkdtempSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DynamoDBClient, ListTablesCommand } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chooseRegion, clientConfig, target } from "../../bin/cli/target";
import { synthesizeStack } from "../cdk/synth";
import { runCli } from "../support/cli";

/**
 * Which Region the operator CLI acts in: --region, else the Region the outputs file records for
 * the stack, else the environment, else the AWS profile's; never a silent default. Nothing here
 * leaves loopback: the CLI's calls go to a recorder on 127.0.0.1, which reads the Region each
 * request is signed for, and the SDK's endpoint for real AWS is read from the request before it
 * is sent.
 */

const dir = mkdtempSync(join(tmpdir(), "agentbus-region-"));

/** A `cdk deploy --outputs-file` of a stack deployed to eu-west-1: every output the stack has. */
function recordedOutputs(region: string): string {
  const { template } = synthesizeStack({}, "AgentBus-prod");
  const keys = Object.keys(template.toJSON().Outputs as Record<string, unknown>);
  expect(keys).toContain("Region");
  const value = (key: string) =>
    key === "Region"
      ? region
      : key.endsWith("Url")
        ? `https://sqs.${region}.amazonaws.com/111122223333/${key}`
        : key.endsWith("Arn")
          ? `arn:aws:events:${region}:111122223333:${key}`
          : `AgentBus-prod-${key}`;
  const file = join(dir, "outputs.json");
  writeFileSync(
    file,
    JSON.stringify({ "AgentBus-prod": Object.fromEntries(keys.map((k) => [k, value(k)])) }),
  );
  return file;
}

/** An AWS config file whose profile `ops` says us-west-2, and that profile's credentials. */
function profileConfig(): string {
  const file = join(dir, "config");
  writeFileSync(file, "[profile ops]\nregion = us-west-2\n");
  writeFileSync(
    join(dir, "credentials"),
    "[ops]\naws_access_key_id = a\naws_secret_access_key = b\n",
  );
  return file;
}

/** The CLI's environment: the profile `ops`, no region variable, no static credentials. */
const profileEnv = (config: string) => ({
  AWS_REGION: undefined,
  AWS_DEFAULT_REGION: undefined,
  AWS_ACCESS_KEY_ID: undefined,
  AWS_SECRET_ACCESS_KEY: undefined,
  AWS_PROFILE: "ops",
  AWS_CONFIG_FILE: config,
  AWS_SHARED_CREDENTIALS_FILE: join(dir, "credentials"),
});

describe("the operator CLI's Region", () => {
  let outputs: string;
  let config: string;
  let server: Server;
  const signedFor: string[] = [];

  beforeAll(async () => {
    outputs = recordedOutputs("eu-west-1");
    config = profileConfig();
    server = createServer((request: IncomingMessage, response) => {
      const scope = /Credential=[^/]+\/\d+\/([^/]+)\//.exec(request.headers.authorization ?? "");
      signedFor.push(scope?.[1] ?? "unsigned");
      request.resume();
      response.writeHead(200, { "content-type": "application/x-amz-json-1.0" });
      response.end(JSON.stringify({ Items: [], Count: 0 }));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it("with an outputs file of a stack in eu-west-1 and a profile in us-west-2: calls go to eu-west-1, and it says so", async () => {
    const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    signedFor.length = 0;
    const result = await runCli(
      ["--endpoint", endpoint, "--outputs", outputs, "trace", "task_1"],
      profileEnv(config),
    );
    expect(result.stderr).toContain(
      `agentbus: region eu-west-1 (from the outputs file ${outputs})`,
    );
    expect(signedFor.length, result.stderr).toBeGreaterThan(0);
    expect(new Set(signedFor)).toEqual(new Set(["eu-west-1"]));
  });

  it("takes the outputs file from $AGENTBUS_OUTPUTS, so an alarm's command runs as written", async () => {
    const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    signedFor.length = 0;
    const result = await runCli(["--endpoint", endpoint, "trace", "task_1"], {
      ...profileEnv(config),
      AGENTBUS_OUTPUTS: outputs,
    });
    expect(result.stderr).toContain(
      `agentbus: region eu-west-1 (from the outputs file ${outputs})`,
    );
    expect(new Set(signedFor)).toEqual(new Set(["eu-west-1"]));
  });

  it("--region wins over the outputs file, and is not repeated back", async () => {
    const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    signedFor.length = 0;
    const result = await runCli(
      ["--endpoint", endpoint, "--region", "ap-south-1", "--outputs", outputs, "trace", "task_1"],
      profileEnv(config),
    );
    expect(result.stderr).not.toContain("agentbus: region");
    expect(new Set(signedFor)).toEqual(new Set(["ap-south-1"]));
  });

  it("without --endpoint the SDK would call eu-west-1's endpoint (read before sending, not sent)", async () => {
    const previous = { ...process.env };
    Object.assign(process.env, { AWS_PROFILE: "ops", AWS_CONFIG_FILE: config });
    delete process.env.AWS_REGION;
    delete process.env.AWS_DEFAULT_REGION;
    delete process.env.AWS_ENDPOINT_URL;
    try {
      const choice = await chooseRegion({ outputs });
      expect(choice).toEqual({ region: "eu-west-1", source: `the outputs file ${outputs}` });
      const t = target({ outputs, region: choice.region });
      const client = new DynamoDBClient({
        ...clientConfig(t),
        credentials: { accessKeyId: "a", secretAccessKey: "b" },
      });
      let host = "";
      client.middlewareStack.add(
        () => async (args) => {
          host = (args.request as { hostname: string }).hostname;
          throw new Error("not sent");
        },
        { step: "build" },
      );
      await expect(client.send(new ListTablesCommand({}))).rejects.toThrow("not sent");
      expect(host).toBe("dynamodb.eu-west-1.amazonaws.com");
    } finally {
      process.env = previous;
    }
  });

  it("falls back to the environment, then the profile, and refuses to guess against AWS", async () => {
    const previous = { ...process.env };
    delete process.env.AWS_ENDPOINT_URL;
    delete process.env.AWS_DEFAULT_REGION;
    try {
      process.env.AWS_REGION = "sa-east-1";
      expect(await chooseRegion({})).toEqual({ region: "sa-east-1", source: "$AWS_REGION" });
      delete process.env.AWS_REGION;
      Object.assign(process.env, { AWS_PROFILE: "ops", AWS_CONFIG_FILE: config });
      expect(await chooseRegion({})).toEqual({
        region: "us-west-2",
        source: "the AWS profile ops",
      });
      process.env.AWS_CONFIG_FILE = join(dir, "absent");
      await expect(chooseRegion({})).rejects.toThrow(/no AWS region: give --region/);
      expect(await chooseRegion({ endpoint: "http://127.0.0.1:1" })).toMatchObject({
        region: "us-east-1",
        source: expect.stringContaining("local emulator"),
      });
    } finally {
      process.env = previous;
    }
  });
});
