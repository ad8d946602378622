import { PutParameterCommand, SSMClient } from "@aws-sdk/client-ssm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fromSdk } from "../../functions/adapters/aws/sdk-client";
import { TransientError } from "../../functions/core/errors";
import { mcpAdapter } from "../../functions/integrations/mcp/aws";
import { emulator } from "../support/aws";
import { MCP_TOKEN, startTestMcpServer, type TestMcpServer } from "../support/mcp-server";

/**
 * The MCP adapter's token, read from a SecureString parameter on the emulator (moto) when the
 * client connects, and read again after the server answered 401 (a rotated token).
 */

const PARAMETER = "/crm/mcp-token";

let server: TestMcpServer;
let ssm: SSMClient;
beforeAll(async () => {
  server = await startTestMcpServer();
  const { endpoint, region, credentials } = emulator();
  ssm = new SSMClient({ endpoint, region, credentials });
});
afterAll(async () => {
  await server.close();
  ssm.destroy();
});

const token = (value: string) =>
  ssm.send(
    new PutParameterCommand({
      Name: PARAMETER,
      Value: value,
      Type: "SecureString",
      Overwrite: true,
    }),
  );

describe("the MCP adapter's token", () => {
  it("is read from its parameter, and read again after a 401", async () => {
    const port = mcpAdapter.build(
      { group: "desk", env: {}, client: () => fromSdk(ssm), warn: () => {} },
      { url: server.url, credentials: { parameter: PARAMETER } },
    );
    await token("an-old-token");
    await expect(port.listTools()).rejects.toBeInstanceOf(TransientError);
    await token(MCP_TOKEN);
    const names = (await port.listTools()).map((tool) => tool.name);
    expect(names).toEqual(["lookup_customer", "create_ticket", "find_ticket", "export_history"]);
  });
});
