import { describe, expect, it } from "vitest";
import { AgentBus } from "../../lib/infra/agentbus";
import {
  FUNCTION_BUNDLING,
  FUNCTION_BUNDLING_WITH_OTLP_SDK,
} from "../../lib/infra/constructs/bundling";
import {
  RATE_ALARM_WINDOWS,
  RATE_THRESHOLDS,
} from "../../lib/infra/constructs/consumer-group-monitoring";
import {
  APPLICATION_SIGNALS_LOG_GROUP,
  bundlingFor,
  OTEL_LAYER_CONTEXT,
  OTLP_ENDPOINT_CONTEXT,
  telemetryProblems,
} from "../../lib/infra/constructs/telemetry";
import { PROJECT_STACK } from "../../lib/infra/project";
import { nagFindings, printed } from "./nag";
import { type Resource, resources, synthesizeStack } from "./synth";

/**
 * Where the functions' OpenTelemetry spans go (lib/infra/constructs/telemetry.ts): nowhere by
 * default, the AWS Distro for OpenTelemetry layer or an OTLP endpoint when the context says so,
 * cdk-nag clean either way; and the retry and expiry rates each consumer group is alarmed on.
 */

const LAYER = "arn:aws:lambda:eu-west-1:615299751070:layer:AWSOpenTelemetryDistroJs:6";
const ENDPOINT = "http://localhost:4318";
const OTEL_CONTEXT = { [OTEL_LAYER_CONTEXT]: LAYER, [OTLP_ENDPOINT_CONTEXT]: ENDPOINT };

type Env = Record<string, unknown>;
const envOf = (fn: Resource) =>
  ((fn.Properties.Environment as { Variables?: Env } | undefined)?.Variables ?? {}) as Env;

describe("OpenTelemetry export of the functions", () => {
  it("is off by default: no layer, no OTEL_ variable, X-Ray active tracing as before", () => {
    const { template } = synthesizeStack();
    const functions = resources(template, "AWS::Lambda::Function");
    expect(functions.length).toBeGreaterThan(3);
    for (const fn of functions) {
      expect(fn.Properties.Layers, fn.id).toBeUndefined();
      expect(
        Object.keys(envOf(fn)).filter((k) => k.startsWith("OTEL_")),
        fn.id,
      ).toEqual([]);
      expect(fn.Properties.TracingConfig).toEqual({ Mode: "Active" });
    }
  });

  it("with the layer and an endpoint: every function runs the layer's wrapper and exports to the endpoint", () => {
    const { template } = synthesizeStack({}, "AgentBus-otel", OTEL_CONTEXT);
    const functions = resources(template, "AWS::Lambda::Function");
    for (const fn of functions) {
      const env = envOf(fn);
      expect(fn.Properties.Layers, fn.id).toEqual([LAYER]);
      expect(env, fn.id).toMatchObject({
        AWS_LAMBDA_EXEC_WRAPPER: "/opt/otel-instrument",
        OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT,
        OTEL_SERVICE_NAME: env.POWERTOOLS_SERVICE_NAME,
      });
      expect(fn.Properties.TracingConfig).toEqual({ Mode: "Active" });
    }
    // Each function's role may write to Application Signals' log group, and only to it.
    const grants = JSON.stringify(resources(template, "AWS::IAM::Policy"));
    const logGroup = `log-group:${APPLICATION_SIGNALS_LOG_GROUP}`;
    expect(grants.split(`${logGroup}:*`).length - 1).toBe(functions.length);
  });

  it("an endpoint alone sets the SDK's variables and adds no layer", () => {
    const { template } = synthesizeStack({}, "AgentBus-otlp", {
      [OTLP_ENDPOINT_CONTEXT]: ENDPOINT,
    });
    for (const fn of resources(template, "AWS::Lambda::Function")) {
      expect(fn.Properties.Layers).toBeUndefined();
      expect(envOf(fn).OTEL_EXPORTER_OTLP_ENDPOINT).toBe(ENDPOINT);
      expect(envOf(fn)).not.toHaveProperty("AWS_LAMBDA_EXEC_WRAPPER");
    }
  });

  it("bundles the OpenTelemetry SDK only into functions that export with it", () => {
    expect(bundlingFor({})).toBe(FUNCTION_BUNDLING);
    expect(bundlingFor({ layerArn: LAYER })).toBe(FUNCTION_BUNDLING);
    expect(bundlingFor({ layerArn: LAYER, otlpEndpoint: ENDPOINT })).toBe(FUNCTION_BUNDLING);
    expect(bundlingFor({ otlpEndpoint: ENDPOINT })).toBe(FUNCTION_BUNDLING_WITH_OTLP_SDK);
  });

  it("is cdk-nag clean with the layer", () => {
    const { findings } = nagFindings(
      (app) => new AgentBus(app, "AgentBus-nag-otel", PROJECT_STACK),
      OTEL_CONTEXT,
    );
    expect(printed(findings)).toEqual([]);
  });

  it("refuses a malformed setting, naming its key and value", () => {
    expect(
      telemetryProblems({ layerArn: "AWSOpenTelemetryDistroJs", otlpEndpoint: "4318" }),
    ).toEqual([
      expect.stringContaining(`${OTEL_LAYER_CONTEXT} must be a Lambda layer version ARN`),
      expect.stringContaining(
        `${OTLP_ENDPOINT_CONTEXT} must be an http:// or https:// URL, got "4318"`,
      ),
    ]);
    expect(telemetryProblems({ layerArn: LAYER, otlpEndpoint: ENDPOINT })).toEqual([]);
    expect(() => synthesizeStack({}, "AgentBus-bad", { [OTEL_LAYER_CONTEXT]: "layer" })).toThrow(
      /agentbus:otelLayer must be a Lambda layer version ARN/,
    );
  });
});

describe("retry and expiry rates", () => {
  const { template } = synthesizeStack();
  const alarms = resources(template, "AWS::CloudWatch::Alarm");
  type Query = {
    Id: string;
    Expression?: string;
    MetricStat?: { Metric: { MetricName: string; Dimensions: { Name: string; Value: string }[] } };
  };
  /** The rate alarms, by the group their `Received` metric names. */
  const rateAlarms = new Map(
    alarms.flatMap((alarm) => {
      const metrics = (alarm.Properties.Metrics ?? []) as Query[];
      const metric = (id: string) => metrics.find((m) => m.Id === id)?.MetricStat?.Metric;
      const received = metric("received");
      if (received?.MetricName !== "Received") return [];
      const group = received.Dimensions.find((d) => d.Name === "consumer_group")?.Value;
      const expression = (id: string) => metrics.find((m) => m.Id === id)?.Expression;
      return [[String(group), { alarm, metric, expression }] as const];
    }),
  );
  const groups = new Set(
    resources(template, "AWS::Lambda::Function")
      .filter((fn) => fn.Metadata["agentbus:kind"] === "consumer")
      .map((fn) => String(fn.Metadata["agentbus:group"])),
  );

  it("every consumer group has one alarm on its rates: retried or expired over Received, in percent", () => {
    expect(new Set(rateAlarms.keys())).toEqual(groups);
    for (const { alarm, metric, expression } of rateAlarms.values()) {
      expect(expression("retry")).toBe("IF(received > 0, 100 * retried / received, 0)");
      expect(expression("expiry")).toBe("IF(received > 0, 100 * expired / received, 0)");
      expect(metric("retried")?.MetricName).toBe("Retried");
      expect(metric("expired")?.MetricName).toBe("DiscardedByReason");
      expect(metric("expired")?.Dimensions).toContainEqual({ Name: "reason", Value: "expired" });
      const fired = (alarm.Properties.Metrics as Query[]).find((m) => m.Id.startsWith("expr"));
      expect(fired?.Expression).toBe(
        `IF(retry > ${RATE_THRESHOLDS.retry} OR expiry > ${RATE_THRESHOLDS.expiry}, 1, 0)`,
      );
      expect(alarm.Properties).toMatchObject({
        Threshold: 0,
        EvaluationPeriods: RATE_ALARM_WINDOWS,
        ComparisonOperator: "GreaterThanThreshold",
        TreatMissingData: "notBreaching",
      });
      expect(String(alarm.Properties.AlarmDescription)).toMatch(/retried.*expired/);
    }
  });

  it("the stack stays within CloudFormation's 500 resources", () => {
    expect(Object.keys(template.toJSON().Resources).length).toBeLessThanOrEqual(500);
  });

  it("the template stays under CloudFormation's 1 MB with them", () => {
    expect(JSON.stringify(template.toJSON()).length).toBeLessThan(1_000_000);
  });
});
