import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { App, Stack } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import { audit } from "../../functions/roles/audit/audit";
import { taskProjectionModule } from "../../functions/roles/task-projection/index";
import { AgentBus } from "../../lib/infra/agentbus";
import { AgentBusStack, type AgentBusStackProps } from "../../lib/infra/agentbus-stack";
import { REPO_ROOT } from "../../lib/infra/constructs/function";
import { PROJECT_INTEGRATIONS, PROJECT_STACK, topology } from "../../lib/infra/project";
import { type Delivery, defineTopology, groupOf, type Topology } from "../../lib/infra/topology";

type Json = Record<string, unknown>;

/**
 * An app with the CLI's context (feature flags from cdk.json) and bundling skipped, so tests
 * synthesize without esbuild. CloudFormation's built-in template validation (seconds per synth)
 * runs only where asked for.
 */
export function testApp(options: { validate?: boolean; context?: Json } = {}): App {
  return new App({
    context: { ...cdkJsonContext(), "aws:cdk:bundling-stacks": [], ...options.context },
    builtinCloudFormationValidation: options.validate ?? false,
  });
}

/** The context of cdk.json (feature flags and the default stage), as the CLI passes it. */
export function cdkJsonContext(): Json {
  const cdkJson = JSON.parse(readFileSync(join(REPO_ROOT, "cdk.json"), "utf8")) as {
    context?: Json;
  };
  return cdkJson.context ?? {};
}

/** An empty stack in a test app, for constructs tested on their own. */
export function testStack(): Stack {
  return new Stack(testApp(), "Test");
}

/** Name of the pipe-delivered group of `topologyWithPipe()`. */
export const PIPED_GROUP = "piped-projection";

/**
 * The project's topics and groups plus a FIFO group delivered by an EventBridge Pipe, so that
 * every kind of group (dispatch function, pipe, unordered) is in one stack.
 */
export function topologyWithPipe(): Topology {
  return topologyWithGroupDelivered(PIPED_GROUP, "pipe");
}

/** Name of the subscriber-delivered group of `topologyWithSubscriber()`. */
export const SUBSCRIBED_GROUP = "subscribed-projection";

/**
 * The project's topics and groups plus a FIFO group delivered by a FIFO subscriber of the events
 * topic's new EventBridge bus (`delivery: "subscriber"`).
 */
export function topologyWithSubscriber(): Topology {
  return topologyWithGroupDelivered(SUBSCRIBED_GROUP, "subscriber");
}

/** The task projection and the audit group, and a FIFO group `name` delivered `delivery`. */
function topologyWithGroupDelivered(name: string, delivery: Delivery): Topology {
  return defineTopology({
    topics: ["commands", "events", "audit"],
    groups: [
      groupOf(taskProjectionModule),
      {
        name,
        role: { group: name, subscriptions: ["task.accepted", "plan.created"] },
        handler: "functions/roles/task-projection/handler.ts",
        delivery,
      },
      { name: "audit", role: audit, handler: "functions/roles/audit/handler.ts", ordering: "none" },
    ],
  });
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
    const stack = new AgentBus(app, "AgentBus-test", PROJECT_STACK);
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
 * validates is stack.test.ts): the reference stack's topology and integrations unless `props`
 * say otherwise. Call once per test file and share the template.
 */
export function synthesizeStack(
  props: Partial<AgentBusStackProps> = {},
  stackName = "AgentBus-test",
  context: Json = {},
) {
  const app = testApp({ context });
  const stack = new AgentBusStack(app, stackName, {
    topology,
    integrations: PROJECT_INTEGRATIONS,
    ...props,
  });
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
  readonly Condition?: unknown;
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
        ...(statement.Condition === undefined ? {} : { Condition: statement.Condition }),
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

/**
 * What a template's outputs miss, as readable problems: every bus name and ARN (`Fn::GetAtt Name`,
 * `Arn`), every archive ARN, every consumer group's rule ARN, every queue URL (`Ref`: each group's
 * queue, buffer and dead-letter queues, the relay's failure queue) and every table name (`Ref`)
 * must be an output, and no output may be exported.
 */
export function outputProblems(template: Template): string[] {
  const outputs = Object.entries(template.findOutputs("*"));
  const values = new Set(outputs.map(([, o]) => JSON.stringify(o.Value)));
  const expected = [
    ...resources(template, "AWS::Events::EventBus").flatMap((b) => [
      { what: `bus ${b.id}`, value: getAtt(b.id, "Name") },
      { what: `bus ARN ${b.id}`, value: getAtt(b.id, "Arn") },
    ]),
    ...resources(template, "AWS::Events::Archive").map((a) => ({
      what: `archive ${a.id}`,
      value: getAtt(a.id, "Arn"),
    })),
    ...resources(template, "AWS::Events::Rule", (r) => r.Metadata["agentbus:group"] !== undefined)
      .filter((r) => r.Properties.EventPattern !== undefined)
      .map((r) => ({ what: `rule ${r.id}`, value: getAtt(r.id, "Arn") })),
    ...resources(template, "AWS::SQS::Queue").map((q) => ({
      what: `queue ${q.id}`,
      value: { Ref: q.id },
    })),
    ...resources(template, "AWS::DynamoDB::Table").map((t) => ({
      what: `table ${t.id}`,
      value: { Ref: t.id },
    })),
  ];
  return [
    ...expected
      .filter(({ value }) => !values.has(JSON.stringify(value)))
      .map(({ what }) => `${what} is not an output`),
    ...outputs.filter(([, o]) => o.Export !== undefined).map(([id]) => `output ${id} is exported`),
  ];
}

export interface DashboardWidget {
  readonly properties: {
    readonly title?: string;
    readonly markdown?: string;
    /** Metric lines: [namespace, name, dimension, value, ..., {options}]. */
    readonly metrics?: unknown[][];
    readonly annotations?: { readonly horizontal?: { readonly value: number }[] };
  };
}

/**
 * The body of the template's one dashboard, with CloudFormation intrinsics replaced by
 * `@Ref:id` / `@GetAtt:id.attr`.
 */
export function dashboardBody(template: Template): { widgets: DashboardWidget[] } {
  const dashboard = single(template, "AWS::CloudWatch::Dashboard", () => true);
  const body = dashboard.Properties.DashboardBody as string | { "Fn::Join": [string, unknown[]] };
  const parts = typeof body === "string" ? [body] : body["Fn::Join"][1];
  const text = parts
    .map((part) => {
      if (typeof part === "string") return part;
      const getAtt = (part as { "Fn::GetAtt"?: string[] })["Fn::GetAtt"];
      return getAtt ? `@GetAtt:${getAtt.join(".")}` : `@Ref:${refersTo(part)}`;
    })
    .join("");
  return JSON.parse(text);
}

/** A front door's issuer, as a deployment sets it (lib/infra/constructs/front-door.ts). */
export const FRONT_DOOR_CONTEXT = {
  "agentbus:jwtIssuer": "https://issuer.example.com/",
  "agentbus:jwtAudience": "agentbus-api,agentbus-console",
};
