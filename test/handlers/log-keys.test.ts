import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ulidHex } from "../../functions/core/trace-context";
import { appendLogKeys } from "../../functions/handlers/consumer-record";
import { observability } from "../../functions/handlers/observe";
import { newCorrelationId, newUlid, taskEvent } from "../support/factories";
import { captureOutput, type LogCapture } from "../support/log-capture";

process.env.POWERTOOLS_LOG_LEVEL = "DEBUG";

/**
 * The ids a consumer puts on every log line while it handles a record (`appendLogKeys`, called by
 * the consumer handler for each record before the pipeline): what an operator searches the logs
 * of one event, one chain or one task by (seed 000 §15: event, type, group, task, correlation,
 * causation, aggregate and its version, attempt; a tool call's id where the message names one).
 */

let capture: LogCapture;
beforeEach(() => {
  capture = captureOutput();
});
afterEach(() => capture.stop());

describe("the ids on a consumer's log lines", () => {
  it("are the record's ids, its aggregate and the attempt, on every line until reset", () => {
    const { logger } = observability("log-keys-test", "log-keys-group");
    const cause = newUlid();
    const event = taskEvent(2, { correlationId: newCorrelationId(), causationId: cause });
    const ids = appendLogKeys(logger, event, 3);
    logger.info("first");
    logger.warn("second", { extra: 1 });
    logger.resetKeys();
    logger.info("after");
    const lines = capture.logLines().filter((line) => line.service === "log-keys-test");
    expect(lines).toHaveLength(3);
    const expected = {
      event_id: event.event_id,
      event_type: event.event_type,
      consumer_group: "log-keys-group",
      correlation_id: event.correlation_id,
      causation_id: cause,
      task_id: event.task_id,
      aggregate_id: event.aggregate.id,
      aggregate_version: 2,
      attempt: 3,
    };
    for (const line of lines.slice(0, 2)) expect(line).toMatchObject(expected);
    expect(lines[2]).not.toHaveProperty("event_id");
    expect(lines[2]).not.toHaveProperty("attempt");
    expect(ids).toEqual({ ...expected, consumer_group: undefined });
  });

  it("carry the tool call a command is about", () => {
    const { logger } = observability("log-keys-test", "log-keys-group");
    const command = { ...taskEvent(1), payload: { run_id: "run_1", tool_call_id: "tooluse_7" } };
    appendLogKeys(logger, command, 1);
    logger.info("decision");
    logger.resetKeys();
    const [line] = capture.logLines().filter((l) => l.service === "log-keys-test");
    expect(line).toMatchObject({ tool_call_id: "tooluse_7", attempt: 1 });
  });

  it("carry the lineage and the trace id: the traceparent's, else the one the event id starts", () => {
    const { logger } = observability("log-keys-test", "log-keys-group");
    const traced = {
      ...taskEvent(1),
      user_id: "user_alice",
      run_id: "agrun_abc",
      parent_run_id: "run_parent",
      traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    };
    appendLogKeys(logger, traced, 1);
    logger.info("traced");
    logger.resetKeys();
    const untraced = taskEvent(1);
    appendLogKeys(logger, untraced, 1);
    logger.info("untraced");
    const [one, two] = capture.logLines().filter((line) => line.service === "log-keys-test");
    expect(one).toMatchObject({
      user_id: "user_alice",
      run_id: "agrun_abc",
      parent_run_id: "run_parent",
      trace_id: "4bf92f3577b34da6a3ce929d0e0e4736",
    });
    expect(two).toMatchObject({ trace_id: ulidHex(untraced.event_id) });
  });

  it("leave out what is not a string, and a body that is not an object adds none", () => {
    const { logger } = observability("log-keys-test", "log-keys-group");
    appendLogKeys(
      logger,
      {
        event_id: 7,
        event_type: "task.accepted",
        causation_id: null,
        aggregate: { id: 5, version: "2" },
      },
      1,
    );
    logger.info("odd");
    logger.resetKeys();
    appendLogKeys(logger, "not an envelope", 2);
    logger.info("plain");
    const [odd, plain] = capture.logLines().filter((line) => line.service === "log-keys-test");
    expect(odd).toMatchObject({ event_type: "task.accepted" });
    expect(odd).not.toHaveProperty("event_id");
    expect(odd).not.toHaveProperty("causation_id");
    expect(odd).not.toHaveProperty("aggregate_id");
    expect(odd).not.toHaveProperty("aggregate_version");
    expect(plain).not.toHaveProperty("event_type");
    expect(plain).toMatchObject({ attempt: 2 });
  });
});
