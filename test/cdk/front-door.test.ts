import { App, type CfnElement, Stack } from "aws-cdk-lib";
import { Annotations, Match, Template } from "aws-cdk-lib/assertions";
import { AccountRootPrincipal, Role } from "aws-cdk-lib/aws-iam";
import { describe, expect, it } from "vitest";
import { DIRECT_GROUPS_ENV } from "../../functions/core/direct-delivery";
import { packedJsonText } from "../../functions/core/packed-json";
import { StepRolesJson } from "../../functions/core/steps";
import { PUSH_EVENT_RULES } from "../../functions/front-door/a2a/push-events";
import { methodsOf, ROUTES } from "../../functions/front-door/api";
import { DEFAULT_BACKLOG } from "../../functions/front-door/backlog";
import { TenantLimitOverrides } from "../../functions/front-door/limits";
import { AgentBus } from "../../lib/infra/agentbus";
import { AgentBusStack } from "../../lib/infra/agentbus-stack";
import {
  FrontDoor,
  type FrontDoorLimits,
  limitsEnvironment,
} from "../../lib/infra/constructs/front-door";
import { AgentBusTables } from "../../lib/infra/constructs/tables";
import { PROJECT_INTEGRATIONS, topology } from "../../lib/infra/project";
import * as z from "../../schemas/zod";
import { BOOKKEEPING } from "../fixtures/bookkeeping/stack";
import { nagFindings, printed } from "./nag";
import {
  FRONT_DOOR_CONTEXT,
  functionsOfKind,
  type Resource,
  refersTo,
  resources,
  statementsOf,
  synthesizeStack,
  testApp,
} from "./synth";

/**
 * The front door as synthesized (lib/infra/constructs/front-door.ts): an HTTP API whose routes are
 * the function's route table, a JWT authorizer with the deployment's issuer and audience, a
 * throttled `$default` stage with an access log, and a function that may touch only what it
 * answers from.
 */

const { stack, template } = synthesizeStack({}, "AgentBus-test", FRONT_DOOR_CONTEXT);
const resourcesOf = (type: string) => Object.entries(template.findResources(type));

describe("the front door", () => {
  it("is an HTTP API with a JWT authorizer of the configured issuer and audience", () => {
    template.resourceCountIs("AWS::ApiGatewayV2::Api", 1);
    template.hasResourceProperties("AWS::ApiGatewayV2::Api", { ProtocolType: "HTTP" });
    template.hasResourceProperties("AWS::ApiGatewayV2::Authorizer", {
      AuthorizerType: "JWT",
      IdentitySource: ["$request.header.Authorization"],
      JwtConfiguration: {
        Issuer: "https://issuer.example.com/",
        Audience: ["agentbus-api", "agentbus-console"],
      },
    });
  });

  it("serves exactly the routes of the function's route table, each with its authorization, and sends the rest to the function", () => {
    const authorizer = resourcesOf("AWS::ApiGatewayV2::Authorizer")[0]?.[0];
    const routes = resourcesOf("AWS::ApiGatewayV2::Route").map(([, route]) => {
      const type = route.Properties.AuthorizationType as string | undefined;
      const jwt = type === "JWT" && refersTo(route.Properties.AuthorizerId) === authorizer;
      return {
        key: route.Properties.RouteKey as string,
        auth: jwt ? "jwt" : type === "AWS_IAM" ? "iam" : (type ?? "NONE").toLowerCase(),
      };
    });
    // A GET route takes HEAD too; `$default` (no authorization) takes what no route takes, so
    // that the function answers an unknown path 404 and another method 405 (problem details).
    const served = [
      ...ROUTES.flatMap((r) => methodsOf(r).map((m) => ({ key: `${m} ${r.path}`, auth: r.auth }))),
      { key: "$default", auth: "none" },
    ];
    const byKey = (a: { key: string }, b: { key: string }) => a.key.localeCompare(b.key);
    expect(routes.sort(byKey)).toEqual(served.sort(byKey));
    const integrations = resourcesOf("AWS::ApiGatewayV2::Route").map(([, route]) =>
      JSON.stringify(route.Properties.Target),
    );
    expect(new Set(integrations).size).toBe(1);
    expect(ROUTES.filter((r) => r.auth === "none").map((r) => r.path)).toEqual([
      "/v1/openapi.json",
    ]);
    // Each client route has its service twin under the tenant, signed with AWS credentials.
    const client = ROUTES.filter((r) => r.auth === "jwt").map((r) => r.path.slice(3));
    const service = ROUTES.filter((r) => r.auth === "iam").map((r) =>
      r.path.replace("/v1/tenants/{tenant_id}", ""),
    );
    // ... and services alone may erase a customer.
    expect(service).toEqual([...client, "/customers/{customer_id}/erasure"]);
  });

  it("throttles its stage and logs every request as JSON to a log group kept a month", () => {
    template.hasResourceProperties("AWS::ApiGatewayV2::Stage", {
      StageName: "$default",
      AutoDeploy: true,
      DefaultRouteSettings: { ThrottlingRateLimit: 100, ThrottlingBurstLimit: 200 },
      AccessLogSettings: {
        DestinationArn: Match.anyValue(),
        Format: Match.stringLikeRegexp('"status":"\\$context.status"'),
      },
    });
    const stage = resourcesOf("AWS::ApiGatewayV2::Stage")[0]?.[1];
    const settings = stage?.Properties.AccessLogSettings as { DestinationArn: unknown };
    const logGroup = refersTo(settings.DestinationArn);
    expect(template.toJSON().Resources[logGroup ?? ""]?.Properties).toMatchObject({
      RetentionInDays: 30,
    });
  });

  it("its function reads conversation views, runs and accepted requests, writes accepted requests and counts, puts events", () => {
    const [fn] = functionsOfKind(template, "front-door") as Resource[];
    if (!fn) throw new Error("no front-door function");
    expect(fn.Properties.Environment).toMatchObject({
      Variables: {
        TENANT_CLAIM: "tenant_id",
        EVENTS_TABLE: expect.anything(),
        TENANT_REQUESTS_PER_MINUTE: "600",
        TENANT_RUNS_IN_FLIGHT: "20",
        BUS_EVENTS: expect.anything(),
        CUSTOMER_KEYS_TABLE: expect.anything(),
        CUSTOMER_KEYS_KMS_KEY: expect.anything(),
      },
    });
    // The stack's step roles, what a tenant's registered workflow may name.
    const variables = (fn.Properties.Environment as { Variables: Record<string, string> })
      .Variables;
    expect(Object.keys(z.parse(StepRolesJson, variables.STEP_ROLES ?? "{}")).sort()).toEqual(
      expect.arrayContaining([
        "fact-check",
        "refund-review",
        "review",
        "topic-selection",
        "writing",
      ]),
    );
    // No token is a service's unless the deployment names the scope (agentbus:serviceScope).
    expect((fn.Properties.Environment as { Variables: object }).Variables).not.toHaveProperty(
      "SERVICE_SCOPE",
    );
    const dynamodb = statementsOf(template, fn).filter((s) =>
      s.Action.some((a) => a.startsWith("dynamodb:")),
    );
    // A task's steps: Query of the events table's trace indexes and of the table (the runs).
    const taskSteps = dynamodb.find((s) => s.Action.join() === "dynamodb:Query" && !s.Condition);
    const eventsTable = { "Fn::GetAtt": [expect.stringMatching(/^TablesEvents/), "Arn"] };
    const index = (name: string) => ({ "Fn::Join": ["", [eventsTable, `/index/${name}`]] });
    // A tenant's runs (GET /v1/runs): the state table's by-tenant-status index, no other of it.
    const byTenantStatus = {
      "Fn::Join": [
        "",
        [
          { "Fn::GetAtt": [expect.stringMatching(/^TablesState/), "Arn"] },
          "/index/by-tenant-status",
        ],
      ],
    };
    expect(taskSteps?.Resource).toEqual(
      expect.arrayContaining([
        eventsTable,
        index("task-roots"),
        index("trace-by-correlation"),
        index("digest-task-roots"),
        index("trace-by-digest"),
        byTenantStatus,
      ]),
    );
    expect(taskSteps?.Resource).toHaveLength(6);
    expect(dynamodb.map((s) => ({ actions: s.Action, condition: s.Condition }))).toEqual([
      {
        actions: ["dynamodb:GetItem"],
        condition: {
          "ForAllValues:StringLike": {
            "dynamodb:LeadingKeys": [
              "conversation#*",
              "conversation_view#*",
              "dag_run#*",
              "http_request#*",
              "client_seq#*",
            ],
          },
        },
      },
      {
        actions: ["dynamodb:PutItem"],
        condition: {
          "ForAllValues:StringLike": {
            "dynamodb:LeadingKeys": ["http_request#*", "client_seq#*"],
          },
        },
      },
      // A task's steps: the events table's trace indexes, then the runs of events they point at;
      // a tenant's runs: the state table's by-tenant-status index.
      { actions: ["dynamodb:Query"], condition: undefined },
      {
        actions: ["dynamodb:UpdateItem"],
        condition: {
          "ForAllValues:StringLike": { "dynamodb:LeadingKeys": ["tenant_rate#*", "tenant_runs#*"] },
        },
      },
      {
        actions: ["dynamodb:BatchGetItem"],
        condition: {
          "ForAllValues:StringLike": { "dynamodb:LeadingKeys": ["dag_run#*"] },
        },
      },
      // The operator's stops and each tenant's model calls of the day (its admission).
      {
        actions: ["dynamodb:BatchGetItem"],
        condition: {
          "ForAllValues:StringLike": {
            "dynamodb:LeadingKeys": ["operator_stop#*", "model_spend#*"],
          },
        },
      },
      // The workflow registry: a tenant reads and registers its workflows (its scope added to
      // the scopes item, two PutItems in one transaction), nothing else of the state table.
      {
        actions: ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"],
        condition: {
          "ForAllValues:StringLike": {
            "dynamodb:LeadingKeys": [
              "workflow_definition#*",
              "workflow_registry#*",
              "workflow_scopes#*",
            ],
          },
        },
      },
      // Erasing a customer: the key (no KMS), the conversations' streams, the states that keep
      // the customer's words and the agents' stored messages, by their keys' prefixes; sealing a
      // customer's message: their key's item, read or made (PutItem; a function's `seal`).
      {
        actions: ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"],
        condition: undefined,
      },
      {
        actions: ["dynamodb:Query"],
        condition: {
          "ForAllValues:StringLike": { "dynamodb:LeadingKeys": ["conversation#*"] },
        },
      },
      {
        actions: ["dynamodb:BatchGetItem", "dynamodb:UpdateItem"],
        condition: {
          "ForAllValues:StringLike": {
            "dynamodb:LeadingKeys": [
              "agent_run#*",
              "conversation#*",
              "conversation_view#*",
              "delivery#*",
              "reply#*",
            ],
          },
        },
      },
      {
        actions: ["dynamodb:BatchGetItem", "dynamodb:PutItem"],
        condition: { "ForAllValues:StringLike": { "dynamodb:LeadingKeys": ["content#*"] } },
      },
    ]);
    const kms = statementsOf(template, fn).filter((s) =>
      s.Action.some((a) => a.startsWith("kms:")),
    );
    expect(kms.flatMap((s) => s.Action).sort()).toEqual(["kms:Decrypt", "kms:GenerateDataKey"]);
    expect(kms.every((s) => s.Condition !== undefined)).toBe(true);
    const events = statementsOf(template, fn).filter((s) =>
      s.Action.some((a) => a.startsWith("events:")),
    );
    // PutEvents on the events and commands buses and the audit topic's (erasures), nothing else.
    expect(events.flatMap((s) => s.Action)).toEqual(["events:PutEvents"]);
    const buses = events.flatMap((s) => s.Resource.map((r) => refersTo(r)?.replace(/Topic.*/, "")));
    expect(buses.sort()).toEqual(["Audit", "Commands", "Events"]);
  });

  it("reads the backlog of the groups a message or a run enters: GetQueueAttributes on their queues only", () => {
    const [fn] = functionsOfKind(template, "front-door") as Resource[];
    if (!fn) throw new Error("no front-door function");
    const variables = (fn.Properties.Environment as { Variables: Record<string, unknown> })
      .Variables;
    expect(variables).toMatchObject({
      BACKLOG_THRESHOLD: String(DEFAULT_BACKLOG.threshold),
      BACKLOG_DRAIN_PER_SECOND: String(DEFAULT_BACKLOG.drainPerSecond),
      BACKLOG_CACHE_SECONDS: String(DEFAULT_BACKLOG.cacheSeconds),
    });
    // feature -> group -> the URLs of its FIFO queue and buffer; not the audit group's queue.
    const queues = JSON.stringify(variables.BACKLOG_QUEUES);
    const named = (group: string) => new RegExp(`\\\\"${group}\\\\":\\[`);
    expect(queues).toMatch(/conversations.*runs/);
    expect(queues).toMatch(named("conversation"));
    expect(queues).toMatch(named("orchestrator"));
    expect(queues).not.toMatch(/audit/i);
    const sqs = statementsOf(template, fn).filter((st) =>
      st.Action.some((a) => a.startsWith("sqs:")),
    );
    expect(sqs.flatMap((st) => st.Action)).toEqual(sqs.map(() => "sqs:GetQueueAttributes"));
    const granted = sqs.flatMap((st) => st.Resource.map((r) => refersTo(r))).sort();
    const entered = stack.groups
      .filter((g) => ["conversation", "orchestrator"].includes(g.groupName))
      .flatMap((g) => [g.queue, g.bufferQueue])
      .map((q) => stack.getLogicalId(q?.node.defaultChild as CfnElement))
      .sort();
    expect(entered).toHaveLength(4);
    expect(granted).toEqual(entered);
  });

  it("takes the stack's limits: tenants' own, the backlog's settings, or no backlog at all", () => {
    const variablesOf = (frontDoorLimits: FrontDoorLimits) => {
      const { template: t } = synthesizeStack(
        { frontDoorLimits },
        "AgentBus-test",
        FRONT_DOOR_CONTEXT,
      );
      const [fn] = functionsOfKind(t, "front-door") as Resource[];
      if (!fn) throw new Error("no front-door function");
      const sqs = statementsOf(t, fn).filter((st) => st.Action.some((a) => a.startsWith("sqs:")));
      return {
        variables: (fn.Properties.Environment as { Variables: Record<string, unknown> }).Variables,
        sqs,
      };
    };
    const own = variablesOf({
      tenantRequestsPerMinute: 1200,
      tenantLimits: {
        acme: { requestsPerMinute: 6000, runsInFlight: 100 },
        globex: { runsInFlight: 2 },
      },
      backlog: { threshold: 50, drainPerSecond: 2 },
    });
    expect(own.variables).toMatchObject({
      TENANT_REQUESTS_PER_MINUTE: "1200",
      TENANT_RUNS_IN_FLIGHT: "20",
      BACKLOG_THRESHOLD: "50",
      BACKLOG_DRAIN_PER_SECOND: "2",
      BACKLOG_CACHE_SECONDS: "5",
    });
    expect(z.parse(TenantLimitOverrides, JSON.parse(String(own.variables.TENANT_LIMITS)))).toEqual({
      acme: { requestsPerMinute: 6000, runsInFlight: 100 },
      globex: { runsInFlight: 2 },
    });
    const off = variablesOf({ backlog: false });
    expect(Object.keys(off.variables).filter((k) => k.startsWith("BACKLOG_"))).toEqual([]);
    expect(off.variables).not.toHaveProperty("TENANT_LIMITS");
    expect(off.sqs).toEqual([]);
  });

  it("refuses bad limits at synth, naming every one", () => {
    expect(() =>
      limitsEnvironment({
        tenantRunsInFlight: 0,
        tenantLimits: { Acme_Corp: { requestsPerMinute: 10 }, globex: { runsInFlight: 2.5 } },
        backlog: { drainPerSecond: 0 },
      }),
    ).toThrow(
      /tenantRunsInFlight: .*; tenantLimits.Acme_Corp: .*; tenantLimits.globex.runsInFlight: .*; backlog.drainPerSecond: /,
    );
    const many = Object.fromEntries(
      Array.from({ length: 60 }, (_, i) => [`tenant-${i}`, { requestsPerMinute: 100_000 }]),
    );
    expect(() => limitsEnvironment({ tenantLimits: many })).toThrow(
      /tenantLimits: \d+ bytes of JSON, over 2048/,
    );
  });

  it("leaves cdk-nag nothing to find in it", () => {
    const { findings } = nagFindings((app) => {
      new AgentBusStack(app, "AgentBus-nag", { topology, integrations: PROJECT_INTEGRATIONS });
    }, FRONT_DOOR_CONTEXT);
    expect(printed(findings.filter((f) => f.path.includes("/FrontDoor/")))).toEqual([]);
  });

  it("gives its URL and its streams' URL as outputs", () => {
    template.hasOutput("FrontDoorUrl", {});
    template.hasOutput("FrontDoorStreamUrl", {
      Value: { "Fn::Join": ["", [{ "Fn::GetAtt": [Match.anyValue(), "FunctionUrl"] }, "v1"]] },
    });
  });

  it("streams from a function URL whose function verifies the issuer's tokens and reads only views, runs and their streams", () => {
    const [resource] = functionsOfKind(template, "front-door-stream");
    if (!resource) throw new Error("no front-door-stream function");
    const { id } = resource;
    template.hasResourceProperties("AWS::Lambda::Url", {
      TargetFunctionArn: { "Fn::GetAtt": [id, "Arn"] },
      AuthType: "NONE",
      InvokeMode: "RESPONSE_STREAM",
      Cors: {
        AllowOrigins: ["*"],
        AllowMethods: ["GET", "POST"],
        AllowHeaders: ["authorization", "last-event-id", "content-type", "a2a-version"],
      },
    });
    expect(resource.Properties.Environment).toMatchObject({
      Variables: {
        JWT_ISSUER: "https://issuer.example.com/",
        JWT_AUDIENCE: "agentbus-api,agentbus-console",
        TENANT_CLAIM: "tenant_id",
        STREAM_MAX_SECONDS: "300",
      },
    });
    // A public function URL needs both permissions (InvokeFunction only through the URL).
    template.hasResourceProperties("AWS::Lambda::Permission", {
      Action: "lambda:InvokeFunctionUrl",
      FunctionName: { "Fn::GetAtt": [id, "Arn"] },
      FunctionUrlAuthType: "NONE",
      Principal: "*",
    });
    template.hasResourceProperties("AWS::Lambda::Permission", {
      Action: "lambda:InvokeFunction",
      FunctionName: { "Fn::GetAtt": [id, "Arn"] },
      InvokedViaFunctionUrl: true,
      Principal: "*",
    });
    // Its timeout outlasts the longest stream.
    expect(resource.Properties.Timeout).toBeGreaterThan(300);
    const statements = statementsOf(template, resource).filter((s) =>
      s.Action.some((a) => !a.startsWith("logs:") && !a.startsWith("xray:")),
    );
    const dynamodb = statements.filter((s) => s.Action.some((a) => a.startsWith("dynamodb:")));
    expect(
      dynamodb.slice(0, 3).map((s) => ({ actions: s.Action, condition: s.Condition })),
    ).toEqual([
      {
        actions: ["dynamodb:GetItem"],
        condition: {
          "ForAllValues:StringLike": {
            "dynamodb:LeadingKeys": ["conversation#*", "conversation_view#*", "dag_run#*"],
          },
        },
      },
      // The AG-UI routes: the streams they map, by key, and nothing else of the events table.
      {
        actions: ["dynamodb:Query"],
        condition: {
          "ForAllValues:StringLike": {
            "dynamodb:LeadingKeys": [
              "conversation#*",
              "support_route#*",
              "order_lookup#*",
              "reply#*",
              "delivery#*",
              "dag_run#*",
              "step_run#*",
              "agent_run#*",
            ],
          },
        },
      },
      // Their tool calls' inputs and outputs: the agents' texts in the content store, and nothing else.
      {
        actions: ["dynamodb:BatchGetItem"],
        condition: { "ForAllValues:StringLike": { "dynamodb:LeadingKeys": ["content#*"] } },
      },
    ]);
    expect(resource.Properties.Environment).toMatchObject({
      Variables: { EVENTS_TABLE: expect.anything() },
    });
    // The rest opens personal fields (the customer keys' reads and Decrypt, never a seal), puts
    // the A2A agents' commands on the commands bus, admits their starts (the next test) and keeps
    // their tasks' push configs.
    const rest = statements.filter((s) => !dynamodb.slice(0, 3).includes(s));
    expect(rest.flatMap((s) => s.Action).sort()).toEqual([
      "dynamodb:BatchGetItem",
      "dynamodb:BatchGetItem",
      "dynamodb:BatchGetItem",
      "dynamodb:GetItem",
      "dynamodb:GetItem",
      "dynamodb:GetItem",
      "dynamodb:PutItem",
      "dynamodb:Query",
      "dynamodb:UpdateItem",
      "events:PutEvents",
      "kms:Decrypt",
      ...rest
        .filter((s) => s.Action.includes("sqs:GetQueueAttributes"))
        .map(() => "sqs:GetQueueAttributes"),
    ]);
    const writes = rest.filter((s) => s.Action.includes("dynamodb:PutItem"));
    expect(writes.map((s) => s.Condition)).toEqual([
      { "ForAllValues:StringLike": { "dynamodb:LeadingKeys": ["a2a_push#*"] } },
    ]);
    // ListTasks: a Query of the state table's by-tenant-status index, and of nothing else.
    const queries = rest.filter((s) => s.Action.includes("dynamodb:Query"));
    expect(queries.map((s) => ({ actions: s.Action, resources: s.Resource }))).toEqual([
      {
        actions: ["dynamodb:Query"],
        resources: [
          {
            "Fn::Join": [
              "",
              [
                { "Fn::GetAtt": [expect.stringMatching(/^TablesState/), "Arn"] },
                "/index/by-tenant-status",
              ],
            ],
          },
        ],
      },
    ]);
  });

  it("offers the step roles that declare `a2a` from its stream function, which may put on the commands and audit buses only", () => {
    const [resource] = functionsOfKind(template, "front-door-stream");
    if (!resource) throw new Error("no front-door-stream function");
    const variables = (resource.Properties.Environment as { Variables: Record<string, unknown> })
      .Variables;
    expect(Object.keys(JSON.parse(String(variables.A2A_AGENTS)))).toEqual(["review"]);
    expect(JSON.parse(String(variables.A2A_AGENTS)).review).toMatchObject({
      workflow: "long-form",
      textInput: "topic_hint",
    });
    expect(variables.BUS_COMMANDS).toEqual(expect.anything());
    const puts = statementsOf(template, resource).filter((s) =>
      s.Action.includes("events:PutEvents"),
    );
    // The commands bus, and the audit topic's, where a caller's answer is recorded.
    expect(variables.BUS_AUDIT).toEqual(expect.anything());
    const buses = puts.flatMap((s) => s.Resource.map((r) => refersTo(r)?.replace(/Topic.*/, "")));
    expect(buses.sort()).toEqual(["Audit", "Commands"]);
    // A start is admitted as the front door's: its limits and workflows, the tenants' counts,
    // the registry read (never written), the backlog of the groups a run enters only.
    expect(variables).toMatchObject({
      TENANT_REQUESTS_PER_MINUTE: expect.any(String),
      TENANT_RUNS_IN_FLIGHT: expect.any(String),
      BACKLOG_THRESHOLD: String(DEFAULT_BACKLOG.threshold),
    });
    const door = functionsOfKind(template, "front-door")[0] as Resource;
    const doorVariables = (door.Properties.Environment as { Variables: Record<string, unknown> })
      .Variables;
    expect(variables.WORKFLOWS).toEqual(doorVariables.WORKFLOWS);
    expect(JSON.stringify(variables.BACKLOG_QUEUES)).toMatch(/runs/);
    expect(JSON.stringify(variables.BACKLOG_QUEUES)).not.toMatch(/conversations/);
    const updates = statementsOf(template, resource).filter((s) =>
      s.Action.includes("dynamodb:UpdateItem"),
    );
    expect(updates.map((s) => s.Condition)).toEqual([
      { "ForAllValues:StringLike": { "dynamodb:LeadingKeys": ["tenant_rate#*", "tenant_runs#*"] } },
    ]);
    // It writes no item but its tasks' push configs (the test above).
    expect(
      statementsOf(template, resource)
        .filter((s) => s.Action.includes("dynamodb:PutItem"))
        .map((s) => s.Condition),
    ).toEqual([{ "ForAllValues:StringLike": { "dynamodb:LeadingKeys": ["a2a_push#*"] } }]);
    const sqs = statementsOf(template, resource).filter((s) =>
      s.Action.includes("sqs:GetQueueAttributes"),
    );
    const granted = sqs.flatMap((st) => st.Resource.map((r) => refersTo(r))).sort();
    const entered = stack.groups
      .filter((g) => g.groupName === "orchestrator")
      .flatMap((g) => [g.queue, g.bufferQueue])
      .map((q) => stack.getLogicalId(q?.node.defaultChild as CfnElement))
      .sort();
    expect(granted).toEqual(entered);
  });

  it("delivers the A2A tasks' push notifications from a FIFO queue the relay feeds, writing their push items only", () => {
    const [stream] = functionsOfKind(template, "front-door-stream");
    expect(stream?.Properties.Environment).toMatchObject({ Variables: { A2A_PUSH: "on" } });
    const [push] = functionsOfKind(template, "a2a-push");
    if (!push) throw new Error("no a2a-push function");
    // Never the local stack's allowance of loopback webhooks.
    const variables = (push.Properties.Environment as { Variables: Record<string, unknown> })
      .Variables;
    expect(variables.A2A_PUSH_ALLOW_LOOPBACK).toBeUndefined();
    const statements = statementsOf(template, push);
    const writes = statements.filter((s) => s.Action.some((a) => a === "dynamodb:PutItem"));
    expect(writes.map((s) => [s.Action, s.Condition])).toEqual([
      [
        ["dynamodb:PutItem"],
        { "ForAllValues:StringLike": { "dynamodb:LeadingKeys": ["a2a_push#*"] } },
      ],
    ]);
    // Not a reader of the events table's stream: one mapping, on its own FIFO queue.
    expect(statements.flatMap((s) => s.Action)).not.toContain("dynamodb:GetRecords");
    const mappings = template.findResources("AWS::Lambda::EventSourceMapping");
    const pushMappings = Object.values(mappings).filter((m) =>
      JSON.stringify(m.Properties.FunctionName).includes(push.id),
    );
    expect(pushMappings).toHaveLength(1);
    expect(pushMappings[0]?.Properties).toMatchObject({
      FunctionResponseTypes: ["ReportBatchItemFailures"],
    });
    const queueId = refersTo(pushMappings[0]?.Properties.EventSourceArn) ?? "";
    const queue = template.toJSON().Resources[queueId] as Resource;
    expect(queue.Properties).toMatchObject({
      FifoQueue: true,
      QueueName: "agentbus-dev-a2a-push.fifo",
      RedrivePolicy: { maxReceiveCount: expect.any(Number) },
    });
    const visibility = queue.Properties.VisibilityTimeout as number;
    expect(visibility).toBeGreaterThanOrEqual(6 * (push.Properties.Timeout as number));
    const dlqId = refersTo(
      (queue.Properties.RedrivePolicy as Record<string, unknown>).deadLetterTargetArn,
    );
    const dlq = template.toJSON().Resources[dlqId ?? ""] as Resource;
    expect(dlq.Properties).toMatchObject({ FifoQueue: true });
    // Its dead-letter queue alarms; both queues take TLS only.
    expect(
      resources(template, "AWS::CloudWatch::Alarm", (a) =>
        JSON.stringify(a.Properties.Dimensions ?? []).includes(dlqId ?? "-"),
      ),
    ).toHaveLength(1);
    const policies = resources(template, "AWS::SQS::QueuePolicy", (p) =>
      JSON.stringify(p.Properties.Queues).includes(queueId),
    );
    expect(JSON.stringify(policies[0]?.Properties.Queues)).toContain(dlqId);
    expect(JSON.stringify(policies[0]?.Properties.PolicyDocument)).toContain("aws:SecureTransport");

    // The relay sends it the stored events that move a task, and may send to that queue only so.
    const [relay] = functionsOfKind(template, "relay");
    if (!relay) throw new Error("no relay");
    const relayEnv = (relay.Properties.Environment as { Variables: Record<string, string> })
      .Variables;
    const direct = packedJsonText(
      z.array(z.object({ group: z.string(), queue: z.string(), rules: z.unknown() })),
      DIRECT_GROUPS_ENV,
    ).parse(relayEnv[DIRECT_GROUPS_ENV]);
    expect(direct.find((g) => g.group === "a2a-push")).toEqual({
      group: "a2a-push",
      queue: "agentbus-dev-a2a-push.fifo",
      rules: PUSH_EVENT_RULES,
    });
    const sends = statementsOf(template, relay).filter((s) => s.Action.includes("sqs:SendMessage"));
    expect(sends.flatMap((s) => s.Resource.map(refersTo))).toContain(queueId);
  });

  it("tells both its functions the stack's features: every one on the reference stack, none on an application's", () => {
    const features = (built: Template) =>
      ["front-door", "front-door-stream"].map(
        (kind) =>
          (functionsOfKind(built, kind)[0]?.Properties.Environment as { Variables: object })
            ?.Variables,
      );
    expect(features(template)).toEqual([
      expect.objectContaining({ FEATURES: "conversations,runs,tasks" }),
      expect.objectContaining({ FEATURES: "conversations,runs,tasks" }),
    ]);
    const app = new AgentBus(testApp({ context: FRONT_DOOR_CONTEXT }), "Bookkeeping", BOOKKEEPING);
    expect(features(Template.fromStack(app))).toEqual([
      expect.objectContaining({ FEATURES: "" }),
      expect.objectContaining({ FEATURES: "" }),
    ]);
  });

  it("lets a service's role call the service routes of its tenants only", () => {
    const stack = new Stack(new App(), "Grants");
    const door = new FrontDoor(stack, "FrontDoor", {
      stage: "test",
      tables: new AgentBusTables(stack, "Tables", {}),
      topics: [],
      issuer: { issuer: "https://issuer.example.com/", audience: ["api"] },
    });
    const role = new Role(stack, "Partner", { assumedBy: new AccountRootPrincipal() });
    door.grantServiceCalls(role, ["acme", "globex"]);
    const policy = Object.values(Template.fromStack(stack).findResources("AWS::IAM::Policy")).find(
      (p) => JSON.stringify(p).includes("execute-api:Invoke"),
    );
    const resources = JSON.stringify(policy?.Properties.PolicyDocument.Statement[0].Resource);
    expect(resources).toContain("/$default/*/v1/tenants/acme/*");
    expect(resources).toContain("/$default/*/v1/tenants/globex/*");
    expect(() => door.grantServiceCalls(role, ["Not A Tenant"])).toThrow(/tenants of a-z 0-9/);
    // Its synth bundles both functions: well over a minute on a busy machine.
  }, 300_000);

  it("left out, is named at synth: a warning on the stack says how to have it", () => {
    const absent = (stack: Stack) =>
      Annotations.fromStack(stack).findWarning("*", Match.stringLikeRegexp("no HTTP API"));
    const [warning, ...more] = absent(synthesizeStack().stack);
    expect(more).toEqual([]);
    expect(String(warning?.entry.data)).toMatch(
      /-c agentbus:jwtIssuer=<issuer URL> -c agentbus:jwtAudience=<client id>/,
    );
    expect(absent(synthesizeStack({}, "AgentBus-test", FRONT_DOOR_CONTEXT).stack)).toEqual([]);
  });

  it("is not there without an issuer, and an issuer without an audience is refused", () => {
    const plain = synthesizeStack().template;
    plain.resourceCountIs("AWS::ApiGatewayV2::Api", 0);
    expect(() =>
      synthesizeStack({}, "AgentBus-test", { "agentbus:jwtIssuer": "https://issuer.example.com/" }),
    ).toThrow(/set agentbus:jwtAudience too/);
  });
});
