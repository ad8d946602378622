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
 * of one event, one chain or one task by.
 */

let capture: LogCapture;
beforeEach(() => {
  capture = captureOutput();
});
afterEach(() => capture.stop());

describe("the ids on a consumer's log lines", () => {
  it("are the record's event id, type, correlation, causation and task, on every line", () => {
    const { logger } = observability("log-keys-test", "log-keys-group");
    const cause = newUlid();
    const event = taskEvent(2, { correlationId: newCorrelationId(), causationId: cause });
    appendLogKeys(logger, event);
    logger.info("first");
    logger.warn("second", { extra: 1 });
    logger.resetKeys();
    const lines = capture.logLines().filter((line) => line.service === "log-keys-test");
    expect(lines).toHaveLength(2);
    for (const line of lines)
      expect(line).toMatchObject({
        event_id: event.event_id,
        event_type: event.event_type,
        correlation_id: event.correlation_id,
        causation_id: cause,
        task_id: event.task_id,
      });
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
    appendLogKeys(logger, traced);
    logger.info("traced");
    logger.resetKeys();
    const untraced = taskEvent(1);
    appendLogKeys(logger, untraced);
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
    appendLogKeys(logger, { event_id: 7, event_type: "task.accepted", causation_id: null });
    logger.info("odd");
    logger.resetKeys();
    appendLogKeys(logger, "not an envelope");
    logger.info("plain");
    const [odd, plain] = capture.logLines().filter((line) => line.service === "log-keys-test");
    expect(odd).toMatchObject({ event_type: "task.accepted" });
    expect(odd).not.toHaveProperty("event_id");
    expect(odd).not.toHaveProperty("causation_id");
    expect(plain).not.toHaveProperty("event_type");
  });
});
