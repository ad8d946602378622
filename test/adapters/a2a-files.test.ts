import { afterEach, describe, expect, it } from "vitest";
import { defineAgent } from "../../functions/core/agent/agent";
import { InMemoryContentStore } from "../../functions/core/agent/content";
import { agentStep } from "../../functions/core/agent/loop";
import { conversationTexts } from "../../functions/core/agent/messages";
import type { ModelPort, ModelRequest, ModelResponse } from "../../functions/core/model";
import { InMemorySideEffects } from "../../functions/core/side-effects";
import type { StepContext } from "../../functions/core/step-role";
import {
  type A2aFile,
  type A2aToolDeclaration,
  a2aStep,
  a2aTool,
  InMemoryA2aAgent,
  MAX_A2A_FILE_BYTES,
  readA2aFile,
} from "../../functions/integrations/a2a/index";
import { SdkA2aAgent } from "../../functions/integrations/a2a/sdk-agent";
import * as z from "../../schemas/zod";
import {
  A2A_TOKEN,
  INVOICE_PDF,
  startTestA2aAgent,
  TERMS_URI,
  type TestA2aAgent,
} from "../support/a2a-agent";
import { firstJournal } from "../support/agent-journal";

/**
 * Files in another system's A2A agent's answer (functions/integrations/a2a/files.ts): bytes kept
 * in the content store and named by their reference, a URI kept as it is, a file over the limit
 * refused naming the agent. On the twin, as an agent's tool and as a workflow step; and through
 * the official SDK's client, from the SDK's server on 127.0.0.1, a `raw` and a `url` part.
 */

const TASK = "task_01KB0Q3V9X7T2M4N6P8R0S1W3Y";
const RUN = "run_files_1";
const T0 = new Date("2026-03-01T09:00:00.000Z");
/** The key of the first turn's call `call_1` (`<task>:<run>:<turn>:<call>`). */
const KEY = `${TASK}:${RUN}:1:call_1`;
const PDF = new Uint8Array(Buffer.from("%PDF-1.7 twelve euros"));
const INVOICE: A2aFile = { name: "invoice.pdf", mediaType: "application/pdf", bytes: PDF };
const TERMS: A2aFile = { name: "terms", uri: "https://partner.example/terms.pdf" };

/** Asks the tool once, then answers. */
class AskOnce implements ModelPort {
  readonly name = "ask-once";
  async converse(request: ModelRequest): Promise<ModelResponse> {
    const asked = request.messages.some((m) => m.toolResults?.length);
    const base = { usage: { inputTokens: 1, outputTokens: 1 }, modelId: this.name, latencyMs: 1 };
    if (asked) return { ...base, text: '{"invoice":"INV-1"}', stopReason: "end_turn" };
    const input = { message: "Open an invoice, attach it" };
    return {
      ...base,
      text: "",
      toolCalls: [{ id: "call_1", name: "open_invoice", input }],
      stopReason: "tool_use",
    };
  }
}

/** One tool call of an agent whose tool is `declare(content)`: what was recorded, and the ports. */
async function callTool(
  declare: (content: InMemoryContentStore) => A2aToolDeclaration,
  port: InMemoryA2aAgent | SdkA2aAgent,
) {
  const ports = {
    model: new AskOnce(),
    content: new InMemoryContentStore(),
    sideEffects: new InMemorySideEffects(),
  };
  const agent = defineAgent({
    name: "billing-clerk",
    instructions: "Open an invoice.",
    tools: [a2aTool(port, declare(ports.content))],
    output: z.object({ invoice: z.string() }),
    schemas: { answer: { type: "object", properties: { invoice: { type: "string" } } } },
    maxTurns: 3,
  });
  const journal = await firstJournal(ports.content, {
    runId: RUN,
    taskId: TASK,
    agent: "billing-clerk",
    stem: "billing",
    subject: {},
    text: "Invoice c-7.",
    now: T0,
  });
  const turn = await agentStep(agent, journal, ports, { now: T0, receiveCount: 1 });
  const committed = JSON.parse(JSON.stringify(turn.journal)) as typeof journal;
  const called = await agentStep(agent, committed, ports, { now: T0, receiveCount: 1 });
  return { ports, called };
}

const billing =
  (extra: Partial<A2aToolDeclaration> = {}) =>
  (content: InMemoryContentStore) => ({
    name: "open_invoice",
    agent: "partner-billing",
    files: content,
    ...extra,
  });

const answering = (...files: A2aFile[]) =>
  new InMemoryA2aAgent(() => ({ state: "completed", text: "opened INV-1", files }));

describe("files in an A2A agent's answer", () => {
  it("keeps a file's bytes in the content store, named by reference, and a URI as it is", async () => {
    const { ports, called } = await callTool(billing(), answering(INVOICE, TERMS));
    expect(called.recorded.outcome).toBe("succeeded (run)");
    const output = called.wrote?.output as { files: { ref?: string }[] };
    expect(output.files).toEqual([
      {
        name: "invoice.pdf",
        mediaType: "application/pdf",
        ref: expect.any(String),
        size: PDF.byteLength,
      },
      { name: "terms", uri: "https://partner.example/terms.pdf" },
    ]);
    expect(await readA2aFile(ports.content, { ref: output.files[0]?.ref ?? "" })).toEqual(
      Buffer.from(PDF),
    );
    // The ledger's record names the bytes; it does not carry them.
    const record = await ports.sideEffects.get(KEY);
    expect(JSON.stringify(record)).not.toContain(Buffer.from(PDF).toString("base64"));
    expect(record?.state).toBe("succeeded");
  });

  it("names a file over the limit as left at the agent: the write applied, so the call succeeded", async () => {
    const { ports, called } = await callTool(billing({ maxFileBytes: 10 }), answering(INVOICE));
    expect(called.recorded.outcome).toBe("succeeded (run)");
    expect(called.wrote?.output).toEqual({
      text: "opened INV-1",
      files: [
        {
          name: "invoice.pdf",
          mediaType: "application/pdf",
          omitted: "too_large",
          size: PDF.byteLength,
        },
      ],
    });
    expect((await ports.sideEffects.get(KEY))?.state).toBe("succeeded");
    const said = (await conversationTexts(called.journal, ports.content)).join("\n");
    expect(said).toContain('"omitted":"too_large"');
  });

  it("names bytes with no store to keep them in as left at the agent; a URI needs none", async () => {
    const unkept = await callTool(billing({ files: undefined }), answering(INVOICE));
    expect(unkept.called.recorded.outcome).toBe("succeeded (run)");
    expect(unkept.called.wrote?.output).toEqual({
      text: "opened INV-1",
      files: [
        {
          name: "invoice.pdf",
          mediaType: "application/pdf",
          omitted: "no_store",
          size: PDF.byteLength,
        },
      ],
    });
    const uriOnly = await callTool(billing({ files: undefined }), answering(TERMS));
    expect(uriOnly.called.wrote?.output).toEqual({
      text: "opened INV-1",
      files: [{ name: "terms", uri: TERMS.uri }],
    });
  });

  it("refuses a limit no file could be kept under where the tool is declared", () => {
    for (const maxFileBytes of [0, MAX_A2A_FILE_BYTES + 1])
      expect(() =>
        a2aTool(new InMemoryA2aAgent(), { name: "t", agent: "partner-billing", maxFileBytes }),
      ).toThrow(`the A2A agent partner-billing's maxFileBytes is ${maxFileBytes}`);
  });

  it("keeps the files of a step's answer, and of one learnt from its task after a timeout", async () => {
    const content = new InMemoryContentStore();
    const twin = answering(INVOICE);
    twin.failNext("timeout after acting");
    const step = a2aStep(twin, new InMemorySideEffects(), {
      agent: "partner-billing",
      files: content,
    });
    const context: StepContext = {
      runId: RUN,
      nodeId: "bill",
      generation: 1,
      attempt: 1,
      role: "billing",
      taskId: TASK,
      now: T0,
      receiveCount: 1,
    };
    const output = await step({ message: "Open an invoice" }, context);
    expect(twin.received).toHaveLength(1);
    const [file] = output.files ?? [];
    expect(file).toMatchObject({ name: "invoice.pdf", size: PDF.byteLength });
    expect(await readA2aFile(content, file as { ref: string })).toEqual(Buffer.from(PDF));
  });
});

describe("files from an A2A agent of the official SDK", () => {
  let agent: TestA2aAgent | undefined;
  afterEach(async () => {
    await agent?.close();
    agent = undefined;
  });

  it("keeps a raw part's bytes and a url part's URI", async () => {
    agent = await startTestA2aAgent();
    const port = new SdkA2aAgent({ url: agent.cardUrl, token: async () => A2A_TOKEN });
    const { ports, called } = await callTool(billing(), port);
    const output = called.wrote?.output as { files: { ref?: string }[] };
    expect(output.files).toEqual([
      {
        name: "INV-1.pdf",
        mediaType: "application/pdf",
        ref: expect.any(String),
        size: INVOICE_PDF.byteLength,
      },
      { uri: TERMS_URI },
    ]);
    expect(await readA2aFile(ports.content, { ref: output.files[0]?.ref ?? "" })).toEqual(
      INVOICE_PDF,
    );
    expect(agent.received).toHaveLength(1);
  });
});
