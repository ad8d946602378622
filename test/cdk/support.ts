import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { App, Stack } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import { AgentBusStack, type AgentBusStackProps } from "../../lib/agentbus-stack";
import { REPO_ROOT } from "../../lib/constructs/function";

type Json = Record<string, unknown>;

/**
 * An app with the CLI's context (feature flags from cdk.json) and bundling skipped, so tests
 * synthesize without esbuild. CloudFormation's built-in template validation (seconds per synth)
 * runs only where asked for.
 */
export function testApp(options: { validate?: boolean } = {}): App {
  const cdkJson = JSON.parse(readFileSync(join(REPO_ROOT, "cdk.json"), "utf8")) as {
    context?: Json;
  };
  return new App({
    context: { ...cdkJson.context, "aws:cdk:bundling-stacks": [] },
    builtinCloudFormationValidation: options.validate ?? false,
  });
}

/** An empty stack in a test app, for constructs tested on their own. */
export function testStack(): Stack {
  return new Stack(testApp(), "Test");
}

export interface Synthesized {
  readonly template: Template;
  /** Violations found by CloudFormation's built-in validation, as `plugin: description`. */
  readonly violations: readonly string[];
}

let synthesized: Synthesized | undefined;

/** The AgentBus stack with default props, synthesized (and validated) once per test file. */
export function agentBusStack(): Synthesized {
  if (!synthesized) {
    const app = testApp({ validate: true });
    const stack = new AgentBusStack(app, "AgentBus-test");
    const assembly = app.synth();
    const template = Template.fromJSON(assembly.getStackByName(stack.stackName).template);
    const reportFile = join(assembly.directory, "validation-report.json");
    const report = existsSync(reportFile)
      ? (JSON.parse(readFileSync(reportFile, "utf8")) as {
          pluginReports?: { pluginName?: string; violations?: { description?: string }[] }[];
        })
      : {};
    const violations = (report.pluginReports ?? []).flatMap((plugin) =>
      (plugin.violations ?? []).map((v) => `${plugin.pluginName}: ${v.description}`),
    );
    synthesized = { template, violations };
  }
  return synthesized;
}

/**
 * An AgentBus stack synthesized without CloudFormation's built-in validation (the one file that
 * validates is stack.test.ts): call once per test file and share the template.
 */
export function synthesizeStack(props: AgentBusStackProps = {}, stackName = "AgentBus-test") {
  const app = testApp();
  const stack = new AgentBusStack(app, stackName, props);
  return { stack, template: Template.fromStack(stack) };
}

export interface Resource {
  readonly id: string;
  readonly Type: string;
  readonly Properties: Json;
  readonly Metadata: Json;
}

/** Resources of a type, optionally filtered by a predicate on their properties. */
export function resources(
  template: Template,
  type: string,
  where: (resource: Resource) => boolean = () => true,
): Resource[] {
  return Object.entries(template.findResources(type))
    .map(([id, body]) => ({
      id,
      Type: type,
      Properties: (body.Properties ?? {}) as Json,
      Metadata: (body.Metadata ?? {}) as Json,
    }))
    .filter(where);
}

/** Exactly one resource of a type matching the predicate. */
export function single(
  template: Template,
  type: string,
  where: (resource: Resource) => boolean,
): Resource {
  const found = resources(template, type, where);
  if (found.length !== 1) {
    throw new Error(`expected one ${type} matching, found ${found.length}`);
  }
  return found[0] as Resource;
}

/** The logical ID an intrinsic (`Ref` or `Fn::GetAtt`) points at, if it is one. */
export function refersTo(value: unknown): string | undefined {
  if (value && typeof value === "object") {
    const intrinsic = value as { Ref?: unknown; "Fn::GetAtt"?: unknown };
    if (typeof intrinsic.Ref === "string") return intrinsic.Ref;
    const getAtt = intrinsic["Fn::GetAtt"];
    if (Array.isArray(getAtt) && typeof getAtt[0] === "string") return getAtt[0];
  }
  return undefined;
}

/** `{"Fn::GetAtt": [id, attribute]}`. */
export function getAtt(id: string, attribute: string): Json {
  return { "Fn::GetAtt": [id, attribute] };
}

export interface Statement {
  readonly Effect: string;
  readonly Action: string[];
  readonly Resource: unknown[];
}

/** Every statement of the inline policies attached to the role of a function. */
export function statementsOf(template: Template, fn: Resource): Statement[] {
  const roleId = refersTo(fn.Properties.Role);
  return resources(template, "AWS::IAM::Policy", (policy) =>
    ((policy.Properties.Roles ?? []) as unknown[]).some((role) => refersTo(role) === roleId),
  ).flatMap((policy) =>
    ((policy.Properties.PolicyDocument as { Statement: Json[] }).Statement ?? []).map(
      (statement) => ({
        Effect: statement.Effect as string,
        Action: ([] as string[]).concat(statement.Action as string | string[]),
        Resource: ([] as unknown[]).concat(statement.Resource),
      }),
    ),
  );
}

/** Actions allowed on a resource (compared structurally: an ARN intrinsic or a literal). */
export function allowedOn(statements: readonly Statement[], resource: unknown): Set<string> {
  const key = JSON.stringify(resource);
  return new Set(
    statements
      .filter((s) => s.Effect === "Allow" && s.Resource.some((r) => JSON.stringify(r) === key))
      .flatMap((s) => s.Action),
  );
}

/** Resources of a type that belong to a consumer group (`agentbus:group` metadata). */
export function ofGroup(template: Template, type: string, group: string): Resource[] {
  return resources(template, type, (r) => r.Metadata["agentbus:group"] === group);
}

/** Functions of one kind (`agentbus:kind` metadata). */
export function functionsOfKind(template: Template, kind: string): Resource[] {
  return resources(
    template,
    "AWS::Lambda::Function",
    (fn) => fn.Metadata["agentbus:kind"] === kind,
  );
}
