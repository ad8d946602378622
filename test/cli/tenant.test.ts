import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli } from "../support/cli";

/**
 * `--tenant` on the operator CLI: a value that is not a tenant id is refused before anything is
 * read or sent (exit 2, the reason on stderr). The CLI points at a recorder on 127.0.0.1 that
 * counts what reaches it: nothing should.
 */

let server: Server;
let endpoint: string;
let requests = 0;

beforeAll(async () => {
  server = createServer((request, response) => {
    requests++;
    request.resume();
    response.writeHead(500).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const RUN = "run_01KB0Q3V9X7T2M4N6P8R0S1W3Y";
const TASK = "task_01KB0Q3V9X7T2M4N6P8R0S1W3Y";

const cli = (...args: string[]) =>
  runCli(["--endpoint", endpoint, "--region", "us-east-1", "--stage", "local", ...args]);

describe("--tenant", () => {
  it.each([
    ["status"],
    ["approvals"],
    ["dlq", "list"],
    ["workflow", "start", "--kind", "quick-news", "--topic", "tides"],
    ["workflow", "cancel", RUN],
    ["workflow", "confirm", RUN, "--node", "review"],
    ["approve", RUN, "--step", "review"],
    ["reject", "rrun_01KB0Q3V9X7T2M4N6P8R0S1W3Y", "--step", "call_2_1"],
    ["resolve", "rrun_01KB0Q3V9X7T2M4N6P8R0S1W3Y", "--step", "call_2_1", "--as", "not_applied"],
    ["reply", "approve", TASK],
    ["reply", "cancel", TASK],
    ["send", "resolve", `${TASK}:reply:1`, "--as", "abandon"],
  ])(
    "%s refuses a tenant that is not a tenant id: exit 2, nothing read or sent",
    async (...command) => {
      const result = await cli(...command, "--tenant", "Acme Corp");
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(
        'agentbus: --tenant "Acme Corp": must be 1-63 of a-z 0-9 - starting with a letter or digit',
      );
      expect(result.stdout).toBe("");
      expect(requests).toBe(0);
    },
  );

  it("is in the listing commands' help", async () => {
    const result = await cli("status", "--help");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("--tenant <id>");
  });

  it.each([
    ["approve"],
    ["reject"],
    ["resolve"],
    ["workflow", "rerun"],
    ["workflow", "reset"],
    ["workflow", "resolve"],
    ["workflow", "cancel"],
    ["workflow", "confirm"],
    ["reply", "approve"],
    ["reply", "reject"],
    ["reply", "cancel"],
    ["send", "resolve"],
  ])("%s checks what it acts on against it", async (...command) => {
    const result = await cli(...command, "--help");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("--tenant <id>");
    expect(result.stdout).toContain("refuse unless what it acts on is this tenant's");
  });
});
