import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { eventItem } from "../../functions/adapters/dynamodb/items";
import { describe as describeError, PermanentError } from "../../functions/core/errors";
import { invokeStructured, type ModelPort } from "../../functions/core/model";
import {
  CONTENT_KEYS,
  loggableMessage,
  REDACTED,
  redactedKeys,
} from "../../functions/handlers/log-redaction";
import { observability } from "../../functions/handlers/observe";
import { customerMessage } from "../../lib/dev/local/scenario/customer-support";
import { registry } from "../../schemas";
import * as z from "../../schemas/zod";
import {
  dynamoStreamEvent,
  dynamoStreamRecord,
  eventBridgeEnvelope,
  sqsEvent,
  sqsRecord,
} from "../support/lambda-events";
import { captureOutput, type LogCapture } from "../support/log-capture";

process.env.POWERTOOLS_LOG_LEVEL = "DEBUG";
process.env.POWERTOOLS_METRICS_DISABLED = "true";

const MARKER = "MARKER-7d1c";
const TEXT = `Hello, my card ${MARKER} was charged twice`;

/** The personal field names the registry declares, each once. */
const PERSONAL = [
  ...new Set(registry.definitions().flatMap((definition) => definition.personal ?? [])),
];

let capture: LogCapture;
beforeEach(() => {
  capture = captureOutput();
});
afterEach(() => capture.stop());

/** The one log line written by `write`, as printed and parsed. */
function oneLine(write: (logger: ReturnType<typeof observability>["logger"]) => void) {
  const { logger } = observability("redaction-test", "redaction-group");
  const before = capture.logLines().length;
  write(logger);
  const lines = capture.logLines().slice(before);
  expect(lines).toHaveLength(1);
  const printed = capture.lines().filter((line) => line.includes('"redaction-test"'));
  return { line: lines[0] as Record<string, unknown>, printed: printed.join("\n") };
}

describe("the functions' log lines", () => {
  it("read the personal fields from the registry, which declares some", () => {
    expect(PERSONAL.length).toBeGreaterThan(0);
    const keys = redactedKeys(registry);
    for (const field of [...PERSONAL, ...CONTENT_KEYS]) expect(keys.has(field)).toBe(true);
    expect(keys.has("event_id")).toBe(false);
  });

  it("show [redacted] for every personal field and message content, at any depth", () => {
    const fields = Object.fromEntries([...PERSONAL, ...CONTENT_KEYS].map((k) => [k, TEXT]));
    const { line, printed } = oneLine((logger) =>
      logger.info("handled", {
        event_id: "evt_01",
        ...fields,
        nested: { deeper: [{ ...fields, order_id: "ord_123" }] },
      }),
    );
    expect(printed).not.toContain(MARKER);
    expect(line).toMatchObject({
      level: "INFO",
      message: "handled",
      service: "redaction-test",
      consumer_group: "redaction-group",
      event_id: "evt_01",
      nested: { deeper: [{ order_id: "ord_123" }] },
    });
    for (const key of Object.keys(fields)) {
      expect(line[key]).toBe(REDACTED);
      expect((line.nested as { deeper: Record<string, unknown>[] }).deeper[0]?.[key]).toBe(
        REDACTED,
      );
    }
  });

  it("show no message of a whole Lambda event: SQS, EventBridge, the event store's stream", () => {
    const envelope = customerMessage("conv_01", "cust_01", TEXT);
    const events = {
      sqs: sqsEvent([sqsRecord({ body: JSON.stringify(eventBridgeEnvelope(envelope)) })]),
      eventbridge: eventBridgeEnvelope(envelope),
      stream: dynamoStreamEvent([
        // The envelope as JSON text (a longer one is stored deflated, `envelope_z`).
        dynamoStreamRecord({
          ...eventItem(envelope),
          envelope_z: undefined,
          envelope: JSON.stringify(envelope),
        }),
      ]),
    };
    // Without the redaction each would carry the customer's words.
    for (const event of Object.values(events)) expect(JSON.stringify(event)).toContain(MARKER);
    for (const [name, event] of Object.entries(events)) {
      const { line, printed } = oneLine((logger) =>
        logger.info("Lambda invocation event", { event }),
      );
      expect(printed, name).not.toContain(MARKER);
      expect(JSON.stringify(line.event), name).toContain(REDACTED);
    }
  });

  it("redact the keys appended to every line too", () => {
    const { logger } = observability("redaction-test");
    logger.appendKeys({ event_id: "evt_02", envelope: { payload: { text: TEXT } } });
    logger.warn("with keys");
    logger.resetKeys();
    const [line] = capture.logLines();
    expect(line).toMatchObject({ event_id: "evt_02", envelope: REDACTED });
    expect(capture.lines().join("\n")).not.toContain(MARKER);
  });

  it("cut an error's message where it quotes its input, keeping its name, code and frames", () => {
    let parseError: unknown;
    try {
      JSON.parse(TEXT);
    } catch (e) {
      parseError = e;
    }
    // The parse error quotes what it failed on: the customer's words.
    expect(String(parseError)).toContain("Hello");
    const wrapped = new PermanentError("envelope.not_json", `body is not JSON: "${TEXT}"`, {
      cause: parseError,
      details: { raw_text: TEXT, body: TEXT },
    });
    const { line, printed } = oneLine((logger) =>
      logger.error("failed", { error: wrapped, receive_count: 2 }),
    );
    expect(printed).not.toContain(MARKER);
    expect(printed).not.toContain("Hello");
    const error = line.error as Record<string, unknown>;
    expect(error).toMatchObject({
      name: "PermanentError",
      code: "envelope.not_json",
      errorClass: "permanent",
      message: `body is not JSON: ${REDACTED}`,
      cause: { name: "SyntaxError" },
    });
    expect(error.stack).toMatch(/^\s+at /);
    expect(error).not.toHaveProperty("details");
    expect(line.receive_count).toBe(2);
  });

  it("cut the message of an error described for the logs (ErrorInfo) the same way", () => {
    const info = describeError(new Error(`provider refused 'Message': ${TEXT}`));
    const { line, printed } = oneLine((logger) => logger.warn("will retry", { error: info }));
    expect(printed).not.toContain(MARKER);
    expect(line.error).toEqual({
      code: "unexpected",
      errorClass: "transient",
      message: `Error: provider refused ${REDACTED}`,
    });
  });

  it("leave out what a model answered in invalid JSON that quotes the customer", async () => {
    const model: ModelPort = {
      name: "quoting-model",
      converse: async () => ({
        text: `Sure: ${MARKER}`,
        stopReason: "end_turn",
        usage: { inputTokens: 1, outputTokens: 1 },
        modelId: "quoting-model",
        latencyMs: 1,
      }),
    };
    const failure = await invokeStructured(
      model,
      { messages: [{ role: "user", text: TEXT }] },
      z.object({ reply: z.string() }),
      { maxAttempts: 1 },
    ).catch((e: unknown) => e);
    // JSON.parse's message, and so the error's, quotes the reply.
    expect((failure as PermanentError).message).toContain(MARKER);
    expect(JSON.stringify((failure as PermanentError).details)).toContain(MARKER);
    const { line, printed } = oneLine((logger) =>
      logger.error("dead-lettering a message that can never succeed", { error: failure }),
    );
    expect(printed).not.toContain(MARKER);
    expect(line.error).toMatchObject({ code: "model.invalid_output" });
  });

  it("keep an error message that quotes nothing whole, and a line with a cycle printable", () => {
    expect(loggableMessage("consumer group audit does not subscribe to task.created")).toBe(
      "consumer group audit does not subscribe to task.created",
    );
    expect(loggableMessage('"quoted from the start"')).toBe(REDACTED);
    const cyclic: Record<string, unknown> = { id: "x" };
    cyclic.self = cyclic;
    const { line } = oneLine((logger) => logger.info("cyclic", { cyclic }));
    expect(line.cyclic).toEqual({ id: "x", self: REDACTED });
  });
});
