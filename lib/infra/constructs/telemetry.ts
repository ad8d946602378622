import { Aws, Validations } from "aws-cdk-lib";
import { type IRole, PolicyStatement } from "aws-cdk-lib/aws-iam";
import { type Function as LambdaFunction, LayerVersion } from "aws-cdk-lib/aws-lambda";
import type { Construct } from "constructs";
import {
  FUNCTION_BUNDLING,
  FUNCTION_BUNDLING_WITH_OTLP_SDK,
  type FunctionBundling,
} from "./bundling";

/**
 * Where a function's OpenTelemetry spans go (functions/handlers/telemetry.ts reads what this
 * sets). By default nowhere: X-Ray active tracing and its subsegments of AWS calls
 * (functions/handlers/xray.ts) are the trace. Two ways on, both per stack, through the context:
 *
 * - `agentbus:otelLayer=<layer ARN>`: the AWS Distro for OpenTelemetry Lambda layer AWS
 *   recommends for Lambda (`AWSOpenTelemetryDistroJs`, the layer of CloudWatch Application
 *   Signals, in the function's Region), started by `AWS_LAMBDA_EXEC_WRAPPER=/opt/otel-instrument`.
 *   Its tracer provider exports the spans to X-Ray (active tracing stays on, and its
 *   `xray:PutTraceSegments` with it); the function may also write to the log group Application
 *   Signals reads, `/aws/application-signals/data`, as the managed policy
 *   `CloudWatchLambdaApplicationSignalsExecutionRolePolicy` allows (granted here, not attached).
 * - `agentbus:otlpEndpoint=<URL>`: the functions' own OpenTelemetry SDK exports over OTLP/HTTP to
 *   that collector (`OTEL_EXPORTER_OTLP_ENDPOINT`; e.g. `http://localhost:4318` for a collector
 *   extension layer, given with `agentbus:otelLayer`).
 *
 * `OTEL_SERVICE_NAME` is the function's service name when either is set.
 */

export const OTEL_LAYER_CONTEXT = "agentbus:otelLayer";
export const OTLP_ENDPOINT_CONTEXT = "agentbus:otlpEndpoint";

/** The log group CloudWatch Application Signals reads the layer's data from. */
export const APPLICATION_SIGNALS_LOG_GROUP = "/aws/application-signals/data";

export interface TelemetrySettings {
  readonly layerArn?: string;
  readonly otlpEndpoint?: string;
}

const LAYER_ARN = /^arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:layer:[A-Za-z0-9_-]+:\d+$/;

/** Every problem of the settings, each naming its context key and value. */
export function telemetryProblems(settings: TelemetrySettings): string[] {
  const problems: string[] = [];
  const { layerArn, otlpEndpoint } = settings;
  if (layerArn !== undefined && !LAYER_ARN.test(layerArn))
    problems.push(
      `${OTEL_LAYER_CONTEXT} must be a Lambda layer version ARN (arn:aws:lambda:<region>:<account>:layer:<name>:<version>), got ${JSON.stringify(layerArn)}`,
    );
  if (otlpEndpoint !== undefined && !/^https?:\/\/[^\s/]+/.test(otlpEndpoint))
    problems.push(
      `${OTLP_ENDPOINT_CONTEXT} must be an http:// or https:// URL, got ${JSON.stringify(otlpEndpoint)}`,
    );
  return problems;
}

/** The stack's settings from its context, refused when malformed. */
export function telemetrySettingsOf(scope: Construct): TelemetrySettings {
  const text = (key: string) => {
    const value: unknown = scope.node.tryGetContext(key);
    return value === undefined || value === "" ? undefined : String(value);
  };
  const settings = {
    layerArn: text(OTEL_LAYER_CONTEXT),
    otlpEndpoint: text(OTLP_ENDPOINT_CONTEXT),
  };
  const problems = telemetryProblems(settings);
  if (problems.length > 0) throw new Error(problems.join("; "));
  return settings;
}

/**
 * How a function is bundled: with the OpenTelemetry SDK only when it exports with its own (an
 * OTLP endpoint and no layer, whose provider would win); ./bundling.ts.
 */
export function bundlingFor(settings: TelemetrySettings): FunctionBundling {
  const ownSdk = settings.otlpEndpoint !== undefined && settings.layerArn === undefined;
  return ownSdk ? FUNCTION_BUNDLING_WITH_OTLP_SDK : FUNCTION_BUNDLING;
}

/** Sets a function's telemetry as its stack's context says (nothing when neither is set). */
export function applyTelemetry(fn: LambdaFunction, role: IRole, service: string): void {
  const { layerArn, otlpEndpoint } = telemetrySettingsOf(fn);
  if (layerArn === undefined && otlpEndpoint === undefined) return;
  fn.addEnvironment("OTEL_SERVICE_NAME", service);
  if (otlpEndpoint !== undefined) fn.addEnvironment("OTEL_EXPORTER_OTLP_ENDPOINT", otlpEndpoint);
  if (layerArn === undefined) return;
  fn.addLayers(LayerVersion.fromLayerVersionArn(fn, "OpenTelemetryLayer", layerArn));
  fn.addEnvironment("AWS_LAMBDA_EXEC_WRAPPER", "/opt/otel-instrument");
  const logGroup = `arn:${Aws.PARTITION}:logs:${Aws.REGION}:${Aws.ACCOUNT_ID}:log-group:${APPLICATION_SIGNALS_LOG_GROUP}`;
  role.addToPrincipalPolicy(
    new PolicyStatement({
      actions: ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
      resources: [logGroup, `${logGroup}:*`],
    }),
  );
  Validations.of(role.node.findChild("DefaultPolicy")).acknowledge({
    id: `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:${APPLICATION_SIGNALS_LOG_GROUP}:*]`,
    reason:
      "the log streams of Application Signals' own log group, which the OpenTelemetry layer names itself (the statement of CloudWatchLambdaApplicationSignalsExecutionRolePolicy)",
  });
}
