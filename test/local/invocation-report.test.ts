import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LocalFunction } from "../../lib/dev/local/deploy";
import type { RuntimeEvent } from "../../lib/dev/local/runtime";
import { loadHandler } from "../../lib/dev/local/runtime/handlers";

/** The runtime reports each invocation with the memory and architecture Lambda bills it at. */

let root: string;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "agentbus-invoked-"));
  await writeFile(
    join(root, "handler.mjs"),
    "export const create = () => async (event) => { if (event.fail) throw new Error('boom'); return 'ok'; };\n",
  );
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const fn: LocalFunction = {
  logicalId: "Worker",
  name: "worker-fn",
  entry: "handler.mjs",
  kind: "consumer",
  group: "worker",
  environment: {},
  timeoutSeconds: 30,
  memoryMb: 512,
  architecture: "arm64",
};

const clients = { dynamodb: {}, sqs: {}, eventbridge: {} } as never;

describe("loadHandler's invocation report", () => {
  it("reports every invocation, failed ones too, with the function's memory and architecture", async () => {
    const events: RuntimeEvent[] = [];
    const invoke = await loadHandler(fn, {
      functionClients: clients,
      root,
      onEvent: (e) => events.push(e),
    });
    expect(await invoke({})).toBe("ok");
    await expect(invoke({ fail: true })).rejects.toThrow("boom");
    const invoked = events.filter((e) => e.kind === "invoked");
    expect(invoked).toHaveLength(2);
    expect(invoked[0]).toMatchObject({
      function: "worker-fn",
      functionKind: "consumer",
      group: "worker",
      memoryMb: 512,
      architecture: "arm64",
    });
    for (const e of invoked) expect(e.kind === "invoked" && e.ms >= 0).toBe(true);
  });

  it("reports how many records each invocation's batch carried, and 0 for an event without any", async () => {
    const events: RuntimeEvent[] = [];
    const invoke = await loadHandler(fn, {
      functionClients: clients,
      root,
      onEvent: (e) => events.push(e),
    });
    await invoke({ Records: [{ messageId: "a" }, { messageId: "b" }, { messageId: "c" }] });
    await invoke({ Records: [] });
    await invoke({ detail: {} });
    const records = events.flatMap((e) => (e.kind === "invoked" ? [e.records] : []));
    expect(records).toEqual([3, 0, 0]);
  });
});
