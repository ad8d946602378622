import { readFileSync } from "node:fs";
import { join } from "node:path";
import { context, propagation, trace } from "@opentelemetry/api";
import * as semconv from "@opentelemetry/semantic-conventions/incubating";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AwsClient } from "../../functions/adapters/aws/client";
import { BedrockModel } from "../../functions/adapters/bedrock/model";
import {
  type AgentJournal,
  agentModelSchemas,
  defineAgent,
  newJournal,
} from "../../functions/core/agent/agent";
import { InMemoryContentStore } from "../../functions/core/agent/content";
import { type AgentPorts, agentStep } from "../../functions/core/agent/loop";
import { defineTool } from "../../functions/core/agent/tool";
import { GENAI, GENAI_OPERATIONS, SEMCONV_VERSION } from "../../functions/core/genai-spans";
import { jsonSchemasOf } from "../../functions/core/model-schema-export";
import { InMemorySideEffects } from "../../functions/core/side-effects";
import { messageIdsOf } from "../../functions/handlers/consumer-record";
import {
  inMessageSpan,
  otlpTracesUrl,
  startTelemetry,
  type Telemetry,
  traceParentOf,
} from "../../functions/handlers/telemetry";
import { REPO_ROOT } from "../../lib/infra/constructs/function";
import * as z from "../../schemas/zod";
import { taskEvent } from "../support/factories";
import { type OtlpReceiver, SPAN_KIND, startOtlpReceiver } from "../support/otlp";

/**
 * The spans a consumer exports, received by an OTLP/HTTP receiver in this process (a node http
 * server on 127.0.0.1 decoding the JSON export): a delivered message's `process` span, the agent
 * step under it (`invoke_agent`), and under that a model call (`chat`, through the Bedrock
 * adapter on a fake client) or a tool call (`execute_tool`), with the GenAI conventions' names and
 * attributes and their parents; a message's `traceparent` is its span's parent. An export that
 * fails is logged, never thrown.
 */

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const SENDER_SPAN = "00f067aa0ba902b7";

let receiver: OtlpReceiver;
let endpoint: string;
let telemetry: Telemetry;
const warnings: string[] = [];

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  endpoint = receiver.endpoint;
  telemetry = startTelemetry("telemetry-test", (message) => warnings.push(message), {
    OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
  });
  await telemetry.ready;
});

afterAll(async () => {
  trace.disable();
  context.disable();
  propagation.disable();
  await receiver.close();
});

const received = () => receiver.received();

/** A Bedrock client whose Converse answers with a call of `lookup` and counts its tokens. */
const bedrock: AwsClient = {
  send: async () =>
    ({
      output: {
        message: {
          role: "assistant",
          content: [{ toolUse: { toolUseId: "tooluse_1", name: "lookup", input: { n: 42 } } }],
        },
      },
      stopReason: "tool_use",
      usage: { inputTokens: 321, outputTokens: 17 },
      metrics: { latencyMs: 40 },
      $metadata: {},
    }) as never,
};

const Verdict = z.object({ verdict: z.enum(["yes", "no"]) });
const lookup = defineTool({
  name: "lookup",
  description: "Look a number up.",
  effect: "read",
  input: z.object({ n: z.int() }),
  output: z.object({ n: z.int() }),
  run: async ({ n }) => ({ n }),
});
const agent = defineAgent({
  name: "checker",
  instructions: "Look the number up, then answer.",
  tools: [lookup],
  output: Verdict,
  schemas: jsonSchemasOf(agentModelSchemas({ lookup: lookup.input }, Verdict)),
  maxTurns: 4,
});

async function firstJournal(ports: AgentPorts): Promise<AgentJournal> {
  const first = await ports.content.put(JSON.stringify({ role: "user", text: "Check 42." }));
  return newJournal({
    runId: "run_checker_1",
    taskId: "task_checker_1",
    agent: "checker",
    subject: {},
    startedBy: { event_type: "checker.requested", payload: {} },
    correlationId: "corr_checker",
    decisionType: "checker.decision.requested",
    firstMessage: first,
    now: new Date("2026-01-01T00:00:00Z"),
  });
}

describe("OpenTelemetry spans exported over OTLP/HTTP", () => {
  it("a message's span, its agent step, the model call and the tool call, linked parent to child", async () => {
    const ports: AgentPorts = {
      model: new BedrockModel({ client: bedrock, modelId: "anthropic.claude-test" }),
      content: new InMemoryContentStore(),
      sideEffects: new InMemorySideEffects(),
    };
    const journal = await firstJournal(ports);
    const step = { now: new Date("2026-01-01T00:00:01Z"), receiveCount: 1 };
    const first = { ...taskEvent(1), traceparent: `00-${TRACE_ID}-${SENDER_SPAN}-01` };
    const afterTurn = await inMessageSpan(
      { ids: messageIdsOf(first, 2), traceparent: traceParentOf(first) },
      { group: "checker", messageId: "sqs-message-1" },
      () => agentStep(agent, journal, ports, step),
    );
    const second = taskEvent(2);
    await inMessageSpan(
      { ids: messageIdsOf(second, 1), traceparent: traceParentOf(second) },
      { group: "checker", messageId: "sqs-message-2" },
      () => agentStep(agent, afterTurn.journal, ports, step),
    );
    await telemetry.flush();

    const spans = received();
    const named = (name: string) => spans.filter((s) => s.name === name);
    const [process1, process2] = named(`process ${first.event_type}`).concat(
      named(`process ${second.event_type}`),
    );
    const [agent1, agent2] = named("invoke_agent checker");
    const [chat] = named("chat anthropic.claude-test");
    const [tool] = named("execute_tool lookup");
    for (const span of [process1, process2, agent1, agent2, chat, tool]) expect(span).toBeDefined();
    if (!process1 || !process2 || !agent1 || !agent2 || !chat || !tool) return;

    // The first message continues the sender's trace; the second, without a traceparent, starts one.
    expect(process1).toMatchObject({ traceId: TRACE_ID, parentSpanId: SENDER_SPAN });
    expect(process1.kind).toBe(SPAN_KIND.consumer);
    expect(process2.parentSpanId ?? "").toBe("");
    expect(agent1.parentSpanId).toBe(process1.spanId);
    expect(chat.parentSpanId).toBe(agent1.spanId);
    expect(agent2.parentSpanId).toBe(process2.spanId);
    expect(tool.parentSpanId).toBe(agent2.spanId);
    expect(new Set([process1, agent1, chat].map((s) => s.traceId))).toEqual(new Set([TRACE_ID]));
    expect(tool.traceId).toBe(process2.traceId);

    expect(process1.attrs).toMatchObject({
      "messaging.system": "aws_sqs",
      "messaging.operation.type": "process",
      "messaging.destination.name": "checker",
      "messaging.message.id": "sqs-message-1",
      "messaging.message.conversation_id": first.correlation_id,
      "agentbus.event_id": first.event_id,
      "agentbus.event_type": first.event_type,
      "agentbus.task_id": first.task_id,
      "agentbus.aggregate_id": first.aggregate.id,
      "agentbus.aggregate_version": 1,
      "agentbus.attempt": 2,
    });
    expect(chat.kind).toBe(SPAN_KIND.client);
    expect(chat.attrs).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "aws.bedrock",
      "gen_ai.request.model": "anthropic.claude-test",
      "gen_ai.response.model": "anthropic.claude-test",
      "gen_ai.usage.input_tokens": 321,
      "gen_ai.usage.output_tokens": 17,
      "gen_ai.response.finish_reasons": ["tool_use"],
      "agentbus.model_run_id": "run_checker_1:turn:1",
    });
    expect(agent1.attrs).toMatchObject({
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.agent.name": "checker",
      "gen_ai.conversation.id": "run_checker_1",
    });
    expect(tool.attrs).toMatchObject({
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": "lookup",
      "gen_ai.tool.call.id": "tooluse_1",
      "gen_ai.tool.type": "function",
      "agentbus.tool.outcome": "succeeded",
    });
    expect(chat.service).toBe("telemetry-test");
    expect(chat.schemaUrl).toBe(`https://opentelemetry.io/schemas/${SEMCONV_VERSION}`);
    // No span carries what the model was told or answered.
    expect(JSON.stringify(spans)).not.toContain("Check 42.");
  });

  it("an export that fails is logged and the flush still resolves", async () => {
    const before = warnings.length;
    receiver.server.closeAllConnections();
    await receiver.close();
    await inMessageSpan(
      { ids: messageIdsOf(taskEvent(1), 1) },
      { group: "checker", messageId: "sqs-message-3" },
      async () => undefined,
    );
    await expect(telemetry.flush()).resolves.toBeUndefined();
    expect(warnings.slice(before).join("\n")).toContain("span export failed");
    await new Promise<void>((resolve) => receiver.server.listen(0, "127.0.0.1", resolve));
  });
});

describe("where spans go", () => {
  it("nowhere without an OTLP endpoint or with the SDK disabled; the traces endpoint wins", () => {
    expect(otlpTracesUrl({})).toBeUndefined();
    expect(
      otlpTracesUrl({ OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_SDK_DISABLED: "true" }),
    ).toBeUndefined();
    expect(otlpTracesUrl({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318/" })).toBe(
      "http://127.0.0.1:4318/v1/traces",
    );
    expect(
      otlpTracesUrl({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://127.0.0.1:9999/traces",
      }),
    ).toBe("http://127.0.0.1:9999/traces");
  });

  it("a message's traceparent is read from its envelope, and only a string", () => {
    expect(traceParentOf({ traceparent: `00-${TRACE_ID}-${SENDER_SPAN}-01` })).toBe(
      `00-${TRACE_ID}-${SENDER_SPAN}-01`,
    );
    expect(traceParentOf({ traceparent: 7 })).toBeUndefined();
    expect(traceParentOf(null)).toBeUndefined();
  });
});

describe("the names, as the semantic conventions spell them", () => {
  it("match @opentelemetry/semantic-conventions' GenAI attributes and operations", () => {
    expect(GENAI).toMatchObject({
      operationName: semconv.ATTR_GEN_AI_OPERATION_NAME,
      providerName: semconv.ATTR_GEN_AI_PROVIDER_NAME,
      requestModel: semconv.ATTR_GEN_AI_REQUEST_MODEL,
      requestMaxTokens: semconv.ATTR_GEN_AI_REQUEST_MAX_TOKENS,
      requestTemperature: semconv.ATTR_GEN_AI_REQUEST_TEMPERATURE,
      responseModel: semconv.ATTR_GEN_AI_RESPONSE_MODEL,
      finishReasons: semconv.ATTR_GEN_AI_RESPONSE_FINISH_REASONS,
      inputTokens: semconv.ATTR_GEN_AI_USAGE_INPUT_TOKENS,
      outputTokens: semconv.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
      agentName: semconv.ATTR_GEN_AI_AGENT_NAME,
      conversationId: semconv.ATTR_GEN_AI_CONVERSATION_ID,
      toolName: semconv.ATTR_GEN_AI_TOOL_NAME,
      toolCallId: semconv.ATTR_GEN_AI_TOOL_CALL_ID,
      toolType: semconv.ATTR_GEN_AI_TOOL_TYPE,
      errorType: semconv.ATTR_ERROR_TYPE,
    });
    expect(GENAI_OPERATIONS).toEqual({
      chat: semconv.GEN_AI_OPERATION_NAME_VALUE_CHAT,
      invokeAgent: semconv.GEN_AI_OPERATION_NAME_VALUE_INVOKE_AGENT,
      executeTool: semconv.GEN_AI_OPERATION_NAME_VALUE_EXECUTE_TOOL,
    });
    expect(semconv.GEN_AI_PROVIDER_NAME_VALUE_AWS_BEDROCK).toBe("aws.bedrock");
  });

  it("of the version pinned, which is the installed package's", () => {
    const installed = JSON.parse(
      readFileSync(
        join(REPO_ROOT, "node_modules/@opentelemetry/semantic-conventions/package.json"),
        "utf8",
      ),
    ) as { version: string };
    expect(installed.version).toBe(SEMCONV_VERSION);
  });
});
