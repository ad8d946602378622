import { Duration, Stack, Validations } from "aws-cdk-lib";
import { AccessLogFormat } from "aws-cdk-lib/aws-apigateway";
import {
  type CfnRoute,
  HttpApi,
  HttpMethod,
  HttpNoneAuthorizer,
  HttpRoute,
  HttpRouteKey,
  HttpStage,
  LogGroupLogDestination,
} from "aws-cdk-lib/aws-apigatewayv2";
import { HttpIamAuthorizer, HttpJwtAuthorizer } from "aws-cdk-lib/aws-apigatewayv2-authorizers";
import { HttpLambdaIntegration } from "aws-cdk-lib/aws-apigatewayv2-integrations";
import { Grant, type IGrantable, PolicyStatement } from "aws-cdk-lib/aws-iam";
import {
  type FunctionUrl,
  FunctionUrlAuthType,
  InvokeMode,
  HttpMethod as UrlMethod,
} from "aws-cdk-lib/aws-lambda";
import { LogGroup } from "aws-cdk-lib/aws-logs";
import type { IQueue } from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import { contentKey } from "../../../functions/adapters/dynamodb/content";
import { StateIndex } from "../../../functions/adapters/dynamodb/tables";
import { WORKFLOW_REGISTRY_KEYS } from "../../../functions/adapters/dynamodb/workflow-registry";
import { WORKFLOWS_ENV } from "../../../functions/core/stack-workflows";
import {
  STEP_ROLES_ENV,
  type StepRoleEntry,
  stepRolesEnvValue,
} from "../../../functions/core/steps";
import { A2A_AGENTS_ENV, offeredAgents } from "../../../functions/front-door/a2a/agents";
import { ASSIGNMENT_STREAMS } from "../../../functions/front-door/agui-run";
import { TURN_STREAMS } from "../../../functions/front-door/agui-stream";
import { DAG_RUN, methodsOf, ROUTES, SERVICE_PREFIX } from "../../../functions/front-door/api";
import { type BacklogSettings, DEFAULT_BACKLOG } from "../../../functions/front-door/backlog";
import {
  DEFAULT_TENANT_CAPS,
  RequestsPerMinute,
  RunsInFlightCap,
  TenantLimitOverrides,
} from "../../../functions/front-door/limits";
import { CONVERSATION_AGGREGATE } from "../../../functions/roles/customer-support/conversation/conversation";
import { ALL_FEATURES, type Feature, featuresValue } from "../../../functions/roles/features";
import { erasedStateTypes } from "../../../functions/roles/personal-state";
import { TENANT_ID_PATTERN } from "../../../schemas/ids";
import * as z from "../../../schemas/zod";
import { HUB_HANDLERS } from "../hub-handlers";
import { logRetentionAt } from "../retention";
import { A2aPushDelivery } from "./a2a-push";
import { CUSTOMER_KEYS_ENV, type CustomerKeys } from "./customer-keys";
import { AgentBusFunction } from "./function";
import type { AgentBusTables } from "./tables";
import type { Topic } from "./topic";

/** Who may call the front door: the tokens of one OIDC issuer, for one or more audiences. */
export interface FrontDoorIssuer {
  /** The issuer URL, exactly as the tokens' `iss` claim has it. */
  readonly issuer: string;
  /** The `aud` (or `client_id`) values accepted. */
  readonly audience: readonly string[];
  /** The claim that names the tenant. @default "tenant_id" */
  readonly tenantClaim?: string;
  /**
   * The scope (in the token's `scope`) that makes a token a service's, which may name the
   * customer a message is from (each such message is logged). @default none: no token's
   */
  readonly serviceScope?: string;
}

/**
 * How much the front door lets in (functions/front-door/README.md#limits): each tenant's requests
 * per minute and runs in flight, a tenant's own, and the backlog over which new work is refused.
 */
export interface FrontDoorLimits {
  /** Each tenant's requests per minute that put something on the bus (429 beyond). @default 600 */
  readonly tenantRequestsPerMinute?: number;
  /** Each tenant's workflow runs in flight started through the front door (429 beyond). @default 20 */
  readonly tenantRunsInFlight?: number;
  /**
   * Tenants' own limits, by tenant id: `{ acme: { requestsPerMinute: 6000, runsInFlight: 100 } }`
   * (either or both; the other is the stack's). Kept in the function's environment
   * (`TENANT_LIMITS`), so it holds at most `MAX_TENANT_LIMITS_BYTES` of JSON.
   * @default none: every tenant has the two above
   */
  readonly tenantLimits?: TenantLimitOverrides;
  /**
   * The backlog over which a message or a run's start is refused (429 `backlog`): a group's
   * messages (waiting and in flight) over `threshold`, `Retry-After` the excess at
   * `drainPerSecond`, each queue read at most once per `cacheSeconds`; `false`: no backlog is read.
   * @default threshold 300, drainPerSecond 5, cacheSeconds 5
   */
  readonly backlog?: Partial<BacklogSettings> | false;
}

/** The most JSON `tenantLimits` may take of the function's environment (Lambda's is 4 KB in all). */
export const MAX_TENANT_LIMITS_BYTES = 2048;

/** A consumer group new work enters, as the front door sees it: the queues it reads the depth of. */
export interface EntryGroup {
  readonly groupName: string;
  readonly queue: IQueue;
  /** The buffer in front of a FIFO group's queue. */
  readonly bufferQueue?: IQueue;
}

export interface FrontDoorProps extends FrontDoorLimits {
  readonly stage: string;
  readonly tables: AgentBusTables;
  /**
   * The buses accepted messages go to (events; commands when there is one), and the audit
   * topic's, where an erasure is recorded (the events bus when there is none).
   */
  readonly topics: readonly Topic[];
  readonly issuer: FrontDoorIssuer;
  /** The customers' data keys: with them, services may erase customers (the erasure route). */
  readonly customerKeys?: CustomerKeys;
  /**
   * The stack's features (functions/roles/features.ts: `featuresOf` its roles): the routes of
   * another answer 404 `not_served`, and the OpenAPI document served leaves them out. Both
   * functions get them as `FEATURES`.
   * @default every feature
   */
  readonly features?: readonly Feature[];
  /**
   * The stack's step roles by group (functions/core/steps.ts), given to the function as
   * `STEP_ROLES`: a workflow a tenant registers may name these roles only.
   * @default none: a registered workflow can name no role
   */
  readonly stepRoles?: Readonly<Record<string, StepRoleEntry>>;
  /**
   * The stack's workflows, the JSON the orchestrator is given (functions/core/stack-workflows.ts),
   * given to the function as `WORKFLOWS`: it lists, shows and starts them, and refuses a put of
   * their names. @default none
   */
  readonly workflows?: string;
  /**
   * The consumer groups each feature's new work enters (the stack's: the groups whose roles take
   * the feature's starting event type, not the audit group): their queues' depth is the backlog.
   * @default none: no backlog is read
   */
  readonly entryGroups?: Partial<Record<Feature, readonly EntryGroup[]>>;
  /**
   * Requests per second across the API, and the burst above it: API Gateway answers 429 beyond.
   * @default 100 per second, a burst of 200
   */
  readonly throttle?: { readonly rateLimit: number; readonly burstLimit: number };
  /**
   * The origins a browser may open the stream from (the stream URL's CORS).
   * @default ["*"] (the stream takes a bearer token, never a cookie)
   */
  readonly streamOrigins?: readonly string[];
}

export const FRONT_DOOR_ISSUER_CONTEXT = "agentbus:jwtIssuer";
export const FRONT_DOOR_AUDIENCE_CONTEXT = "agentbus:jwtAudience";
export const FRONT_DOOR_TENANT_CLAIM_CONTEXT = "agentbus:tenantClaim";
export const FRONT_DOOR_SERVICE_SCOPE_CONTEXT = "agentbus:serviceScope";

/** How long one stream lasts before the client reconnects (and resumes). */
const STREAM_SECONDS = 300;

/** What the access log keeps of each request: one JSON line. */
const ACCESS_LOG_FIELDS = {
  requestId: "$context.requestId",
  ip: "$context.identity.sourceIp",
  requestTime: "$context.requestTime",
  method: "$context.httpMethod",
  path: "$context.path",
  status: "$context.status",
  latency: "$context.responseLatency",
  sub: "$context.authorizer.claims.sub",
  authorizerError: "$context.authorizer.error",
  integrationError: "$context.integrationErrorMessage",
};

/**
 * The front door (functions/front-door): an HTTP API (API Gateway v2) in front of one function
 * (`agentbus:kind` front-door), its routes read from the route table the function serves, so the
 * two cannot drift. Every route but `/v1/openapi.json` takes a JWT that the API's JWT authorizer
 * verifies (signature by the issuer's JWKS, `iss`, `aud`, `exp`) before the function runs; the
 * function reads the tenant and user from the verified claims. The `$default` stage is throttled
 * and writes an access log (JSON, one line per request, with the caller's `sub` and the status)
 * to a log group kept a month.
 *
 * The function may read the state items it answers from (conversation views, workflow runs,
 * accepted requests, client sequences), the conversations' states (whose customer a conversation
 * is) and the runs' states (BatchGetItem, for the runs in
 * flight), write accepted requests, the conversations' client sequences and the tenants' request
 * and run counts only, and read a task's steps from the events
 * table (Query of its trace indexes, and of the streams whose runs they point at, as of a run whose
 * start was refused: its stream says why), and list a
 * tenant's runs (Query of the state table's by-tenant-status index, that index only): GetItem,
 * BatchGetItem, PutItem and UpdateItem on the state table,
 * limited by `dynamodb:LeadingKeys` to those keys; GetItem and PutItem of the workflow registry's
 * items (a tenant reads and registers its workflows); PutEvents on its buses; GetQueueAttributes
 * on the queues of the groups a message or a run's start enters (its backlog, `entryGroups`).
 */
export class FrontDoor extends Construct {
  readonly function: AgentBusFunction;
  /** The stream function (server-sent events), behind its own URL: HTTP APIs cannot stream. */
  readonly streamFunction: AgentBusFunction;
  readonly streamUrl: FunctionUrl;
  readonly api: HttpApi;
  readonly stage: HttpStage;
  readonly accessLog: LogGroup;
  private push?: A2aPushDelivery;

  constructor(scope: Construct, id: string, props: FrontDoorProps) {
    super(scope, id);
    if (props.issuer.audience.length === 0)
      throw new Error("front door: the audience must not be empty");
    this.function = new AgentBusFunction(this, "Function", {
      kind: "front-door",
      entry: HUB_HANDLERS["front-door"],
      serviceName: "front-door",
      description: "AgentBus front door: the HTTP API's requests -> bus, projections -> answers",
      timeout: Duration.seconds(10),
      environment: this.environmentOf(props),
    });
    this.grantFunction(props);
    this.api = new HttpApi(this, "Api", {
      apiName: `agentbus-${props.stage}`,
      description: "AgentBus front door",
      createDefaultStage: false,
    });
    this.accessLog = new LogGroup(this, "AccessLog", {
      retention: logRetentionAt(this, "accessLog"),
    });
    this.stage = this.createStage(props);
    this.addRoutes(props.issuer);
    this.streamFunction = this.createStream(props);
    this.streamUrl = this.addStreamUrl(props);
  }

  /** The function's environment: tables, buses, the issuer's claims, limits, features, workflows. */
  private environmentOf(props: FrontDoorProps): Record<string, string> {
    const { issuer } = props;
    const environment: Record<string, string> = {
      STATE_TABLE: props.tables.state.tableName,
      EVENTS_TABLE: props.tables.events.tableName,
      TENANT_CLAIM: issuer.tenantClaim ?? "tenant_id",
      ...limitsEnvironment(props),
      ...(issuer.serviceScope ? { SERVICE_SCOPE: issuer.serviceScope } : {}),
      FEATURES: this.featuresValue(props),
      [STEP_ROLES_ENV]: stepRolesEnvValue(props.stepRoles ?? {}),
      ...(props.workflows === undefined ? {} : { [WORKFLOWS_ENV]: props.workflows }),
    };
    for (const topic of props.topics)
      environment[`BUS_${topic.topicName.toUpperCase()}`] = topic.busName;
    return environment;
  }

  /** What the function may touch: the state it answers from, the buses, the keys, the queues. */
  private grantFunction(props: FrontDoorProps): void {
    this.grantState(props.tables);
    this.grantAdmission(
      this.function,
      props,
      ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"],
      ALL_FEATURES,
    );
    if (props.customerKeys) {
      this.grantErasure(props.customerKeys, props.tables);
      // A customer's message goes on the bus sealed under their key (made on their first).
      props.customerKeys.wire(this.function, ["seal"]);
    }
    for (const topic of props.topics) topic.grantPutEvents(this.function);
  }

  /**
   * The backlog `fn` reads (functions/front-door/backlog.ts): the URLs of the queues of the groups
   * `features`' work enters as `BACKLOG_QUEUES` (feature -> group -> URLs) and GetQueueAttributes
   * on exactly those queues; nothing when `backlog` is `false` or no group is named.
   */
  private grantBacklog(fn: AgentBusFunction, props: FrontDoorProps, features: readonly Feature[]) {
    if (props.backlog === false) return;
    const byFeature = Object.entries(props.entryGroups ?? {}).filter(
      ([feature, g]) => g.length > 0 && features.includes(feature as Feature),
    );
    if (byFeature.length === 0) return;
    const queuesOf = (group: EntryGroup) => [
      group.queue,
      ...(group.bufferQueue ? [group.bufferQueue] : []),
    ];
    const urls = Object.fromEntries(
      byFeature.map(([feature, groups]) => [
        feature,
        Object.fromEntries(groups.map((g) => [g.groupName, queuesOf(g).map((q) => q.queueUrl)])),
      ]),
    );
    fn.addEnvironment("BACKLOG_QUEUES", Stack.of(this).toJsonString(urls));
    const granted = new Set<IQueue>(byFeature.flatMap(([, groups]) => groups.flatMap(queuesOf)));
    for (const queue of granted) queue.grant(fn, "sqs:GetQueueAttributes");
  }

  /** The `$default` stage: throttled, and an access log of one JSON line per request. */
  private createStage(props: FrontDoorProps): HttpStage {
    return new HttpStage(this, "Stage", {
      httpApi: this.api,
      stageName: "$default",
      autoDeploy: true,
      throttle: props.throttle ?? { rateLimit: 100, burstLimit: 200 },
      accessLogSettings: {
        destination: new LogGroupLogDestination(this.accessLog),
        format: AccessLogFormat.custom(JSON.stringify(ACCESS_LOG_FIELDS)),
      },
    });
  }

  /** The stream function's URL: open (the function verifies the token), streamed, GET from `streamOrigins`. */
  private addStreamUrl(props: FrontDoorProps): FunctionUrl {
    return this.streamFunction.addFunctionUrl({
      authType: FunctionUrlAuthType.NONE,
      invokeMode: InvokeMode.RESPONSE_STREAM,
      cors: {
        allowedOrigins: [...(props.streamOrigins ?? ["*"])],
        // POST: the A2A routes' JSON-RPC calls (functions/front-door/a2a).
        allowedMethods: [UrlMethod.GET, UrlMethod.POST],
        allowedHeaders: ["authorization", "last-event-id", "content-type", "a2a-version"],
        maxAge: Duration.hours(1),
      },
    });
  }

  /**
   * The stream function (functions/handlers/front-door-stream.ts): its URL takes any request, so it
   * verifies the token itself, with the issuer and audience the API's authorizer has. It reads
   * the conversation views and runs, and for the AG-UI routes the streams they map. A stream lasts at most five minutes (the
   * client reconnects and resumes), so the function's timeout is a little longer.
   */
  private createStream(props: FrontDoorProps): AgentBusFunction {
    const fn = new AgentBusFunction(this, "StreamFunction", {
      kind: "front-door-stream",
      entry: HUB_HANDLERS["front-door-stream"],
      serviceName: "front-door-stream",
      description: "AgentBus front door: conversations and runs as server-sent events",
      timeout: Duration.seconds(STREAM_SECONDS + 30),
      environment: {
        STATE_TABLE: props.tables.state.tableName,
        JWT_ISSUER: props.issuer.issuer,
        JWT_AUDIENCE: props.issuer.audience.join(","),
        TENANT_CLAIM: props.issuer.tenantClaim ?? "tenant_id",
        STREAM_MAX_SECONDS: String(STREAM_SECONDS),
        FEATURES: this.featuresValue(props),
      },
    });
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ["dynamodb:GetItem"],
        resources: [props.tables.state.tableArn],
        conditions: {
          "ForAllValues:StringLike": {
            // A conversation's state says whose it is (a user reads only their customer's).
            "dynamodb:LeadingKeys": ["conversation#*", "conversation_view#*", "dag_run#*"],
          },
        },
      }),
    );
    // The AG-UI routes read the streams they map (functions/front-door/agui-stream.ts) and open
    // their personal fields as the conversation view does.
    fn.addEnvironment("EVENTS_TABLE", props.tables.events.tableName);
    const streams = [CONVERSATION_AGGREGATE, ...TURN_STREAMS, DAG_RUN, ...ASSIGNMENT_STREAMS];
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ["dynamodb:Query"],
        resources: [props.tables.events.tableArn],
        conditions: {
          "ForAllValues:StringLike": { "dynamodb:LeadingKeys": streams.map((s) => `${s}#*`) },
        },
      }),
    );
    // The AG-UI streams read the agents' model turns and tools' answers for their tool calls'
    // inputs and outputs (functions/front-door/agui-tool-args.ts), in the content store on the
    // state table: one BatchGetItem of `content#` keys per poll that reads a call.
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ["dynamodb:BatchGetItem"],
        resources: [props.tables.state.tableArn],
        conditions: { "ForAllValues:StringLike": { "dynamodb:LeadingKeys": [contentKey("*")] } },
      }),
    );
    props.customerKeys?.wire(fn, ["open"]);
    this.offerA2a(fn, props);
    return fn;
  }

  /**
   * The step roles offered over A2A (functions/front-door/a2a): the stream function serves their
   * cards and JSON-RPC endpoints (`A2A_AGENTS`), and may put on the commands bus, where a message
   * starts, answers or cancels a run, and on the audit topic, where a caller's answer is recorded.
   * A start is admitted as the front door admits one: the same
   * limits and workflows, the tenants' counts, the backlog of the groups a run enters. None
   * offered: none of these.
   */
  private offerA2a(fn: AgentBusFunction, props: FrontDoorProps): void {
    const agents = offeredAgents(props.stepRoles ?? {});
    if (Object.keys(agents).length === 0) return;
    const commands = props.topics.find((topic) => topic.topicName === "commands");
    if (!commands)
      throw new Error(
        `front door: ${Object.keys(agents).join(", ")} offered over A2A, but the stack has no commands topic to start their runs on`,
      );
    fn.addEnvironment(A2A_AGENTS_ENV, JSON.stringify(agents));
    fn.addEnvironment("BUS_COMMANDS", commands.busName);
    commands.grantPutEvents(fn);
    // A caller's answer is recorded on the audit topic (the events bus of a stack without one).
    const audit =
      props.topics.find((topic) => topic.topicName === "audit") ??
      props.topics.find((topic) => topic.topicName === "events");
    if (audit) {
      fn.addEnvironment("BUS_AUDIT", audit.busName);
      audit.grantPutEvents(fn);
    }
    for (const [name, value] of Object.entries(limitsEnvironment(props)))
      fn.addEnvironment(name, value);
    if (props.workflows !== undefined) fn.addEnvironment(WORKFLOWS_ENV, props.workflows);
    this.grantAdmission(fn, props, ["dynamodb:GetItem"], ["runs"]);
    // `ListTasks` lists as `GET /v1/runs` does (the runs' states: BatchGetItem, the admission's).
    grantRunList(fn, props.tables);
    this.offerA2aPush(fn, props);
  }

  /**
   * The A2A tasks' push notifications, where agents are offered over A2A: the stream function
   * keeps their configs on the state table (`a2a_push#<run id>` items: GetItem, PutItem), and a
   * function on a queue the relay feeds delivers them (./a2a-push.ts; the stack hands it to the
   * relay).
   */
  get a2aPush(): A2aPushDelivery | undefined {
    return this.push;
  }

  private offerA2aPush(fn: AgentBusFunction, props: FrontDoorProps): void {
    this.push = new A2aPushDelivery(this, "A2aPush", { tables: props.tables, stage: props.stage });
    fn.addEnvironment("A2A_PUSH", "on");
    fn.addToRolePolicy(
      new PolicyStatement({
        actions: ["dynamodb:GetItem", "dynamodb:PutItem"],
        resources: [props.tables.state.tableArn],
        conditions: { "ForAllValues:StringLike": { "dynamodb:LeadingKeys": ["a2a_push#*"] } },
      }),
    );
  }

  /**
   * Every route of the function's route table, each with its authorization: the JWT authorizer
   * (clients), IAM (services: `/v1/tenants/{tenant_id}/...`) or none; a GET route takes HEAD too.
   * The `$default` route sends every other request to the function, without authorization, so that
   * an unknown path is its 404 and a method a path does not take its 405 (problem details): an
   * HTTP API's own answers cannot be customized. API Gateway still answers a refused token (401)
   * or signature (403) itself, `{"message": ...}` (functions/front-door/README.md#errors).
   */
  private addRoutes(issuer: FrontDoorIssuer): void {
    const authorizers = {
      jwt: new HttpJwtAuthorizer("Jwt", issuer.issuer, { jwtAudience: [...issuer.audience] }),
      iam: new HttpIamAuthorizer(),
      none: new HttpNoneAuthorizer(),
    };
    const integration = new HttpLambdaIntegration("Function", this.function);
    const open = (route: HttpRoute, reason: string) =>
      Validations.of(route.node.defaultChild as CfnRoute).acknowledge({
        id: "AwsSolutions-APIG4",
        reason,
      });
    for (const route of ROUTES) {
      const added = this.api.addRoutes({
        path: route.path,
        methods: methodsOf(route).map((method) => HttpMethod[method as keyof typeof HttpMethod]),
        integration,
        authorizer: authorizers[route.auth],
      });
      if (route.auth !== "none") continue;
      for (const each of added)
        open(
          each,
          `${route.method} ${route.path} is public by design (${route.summary}); every other route takes the JWT authorizer`,
        );
    }
    const fallback = new HttpRoute(this, "DefaultRoute", {
      httpApi: this.api,
      routeKey: HttpRouteKey.DEFAULT,
      integration,
      authorizer: authorizers.none,
    });
    open(
      fallback,
      "$default takes only what no route takes: the function answers it 404 or 405 and reads nothing",
    );
  }

  /**
   * Let `grantee` (a service's role) call the service routes for `tenants` only: `execute-api:Invoke`
   * on `/v1/tenants/<tenant>/*` of the API. The request must be signed (SigV4, service
   * `execute-api`); the tenant is the path's.
   */
  grantServiceCalls(grantee: IGrantable, tenants: readonly string[]): Grant {
    const bad = tenants.filter((t) => !TENANT_ID_PATTERN.test(t));
    if (tenants.length === 0 || bad.length > 0)
      throw new Error(
        `front door: service calls need tenants of a-z 0-9 - (got ${JSON.stringify(bad)})`,
      );
    const prefix = SERVICE_PREFIX.replace("/{tenant_id}", "");
    return Grant.addToPrincipal({
      grantee,
      actions: ["execute-api:Invoke"],
      resourceArns: tenants.map((tenant) =>
        this.api.arnForExecuteApi("*", `${prefix}/${tenant}/*`, "$default"),
      ),
    });
  }

  private featuresValue(props: FrontDoorProps): string {
    return featuresValue(props.features ?? ALL_FEATURES);
  }

  /** The front door's base URL (`https://<api>.execute-api.<region>.amazonaws.com/v1`). */
  get url(): string {
    return `${this.api.apiEndpoint}/v1`;
  }

  /**
   * What erasing a customer takes (functions/handlers/customer-erasure.ts): the customer's key
   * (GetItem, UpdateItem on the customer-keys table, no KMS: erasing never unwraps), the
   * conversations' streams (Query of `conversation#` keys of the events table), and the states
   * and stored texts that keep the customer's words (BatchGetItem and UpdateItem of the erased
   * state types' keys, PutItem of `content#` ones): functions/roles/personal-state.ts.
   */
  private grantErasure(keys: CustomerKeys, tables: AgentBusTables): void {
    this.function.addEnvironment(CUSTOMER_KEYS_ENV.table, keys.table.tableName);
    for (const statement of keys.operatorStatements("erase"))
      this.function.addToRolePolicy(statement);
    const leading = (prefixes: readonly string[]) => ({
      "ForAllValues:StringLike": { "dynamodb:LeadingKeys": prefixes.map((p) => `${p}#*`) },
    });
    const states = erasedStateTypes();
    this.function.addToRolePolicy(
      new PolicyStatement({
        actions: ["dynamodb:Query"],
        resources: [tables.events.tableArn],
        conditions: leading([CONVERSATION_AGGREGATE]),
      }),
    );
    this.function.addToRolePolicy(
      new PolicyStatement({
        actions: ["dynamodb:BatchGetItem", "dynamodb:UpdateItem"],
        resources: [tables.state.tableArn],
        conditions: leading(states),
      }),
    );
    this.function.addToRolePolicy(
      new PolicyStatement({
        actions: ["dynamodb:BatchGetItem", "dynamodb:PutItem"],
        resources: [tables.state.tableArn],
        conditions: leading(["content"]),
      }),
    );
  }

  private grantState(tables: AgentBusTables): void {
    const leading = (prefixes: string[]) => ({
      "ForAllValues:StringLike": { "dynamodb:LeadingKeys": prefixes },
    });
    this.function.addToRolePolicy(
      new PolicyStatement({
        actions: ["dynamodb:GetItem"],
        resources: [tables.state.tableArn],
        conditions: leading([
          "conversation#*",
          "conversation_view#*",
          "dag_run#*",
          "http_request#*",
          "client_seq#*",
        ]),
      }),
    );
    this.function.addToRolePolicy(
      new PolicyStatement({
        actions: ["dynamodb:PutItem"],
        resources: [tables.state.tableArn],
        conditions: leading(["http_request#*", "client_seq#*"]),
      }),
    );
    // A task's events: its roots' correlations, their runs' first events, the runs (Query); and a
    // run's stream, where the orchestrator's refusal of its start says why (`GET /v1/runs/{id}`).
    this.function.addToRolePolicy(
      new PolicyStatement({
        actions: ["dynamodb:Query"],
        resources: [...tables.eventsTraceIndexArns(), tables.events.tableArn],
      }),
    );
    grantRunList(this.function, tables);
  }

  /**
   * What admits a run's start (functions/handlers/front-door-admission.ts), for `fn`: the tenants'
   * counts (UpdateItem), the runs' states when a tenant is at its cap and the operator's stops
   * and each tenant's model calls today (BatchGetItem), the registered workflows (`registry`: the
   * front door also registers a tenant's), and the backlog of the groups `features`' work enters.
   */
  private grantAdmission(
    fn: AgentBusFunction,
    props: FrontDoorProps,
    registry: readonly string[],
    features: readonly Feature[],
  ): void {
    const state = props.tables.state.tableArn;
    const leading = (prefixes: string[]) => ({
      "ForAllValues:StringLike": { "dynamodb:LeadingKeys": prefixes },
    });
    const statements: [string[], string[]][] = [
      [["dynamodb:UpdateItem"], ["tenant_rate#*", "tenant_runs#*"]],
      [["dynamodb:BatchGetItem"], ["dag_run#*"]],
      [["dynamodb:BatchGetItem"], ["operator_stop#*", "model_spend#*"]],
      // The registered workflows: read (a tenant's own and the shared ones), and the front door's
      // put of a tenant's (its scope added to the scopes item, then a transaction of two PutItems:
      // the version and the scope's list). Which scope is the function's check: a tenant's id is
      // never the shared `*`.
      [[...registry], [...WORKFLOW_REGISTRY_KEYS]],
    ];
    for (const [actions, keys] of statements)
      fn.addToRolePolicy(
        new PolicyStatement({ actions, resources: [state], conditions: leading(keys) }),
      );
    this.grantBacklog(fn, props, features);
  }
}

/**
 * A tenant's runs, newest first (functions/front-door/run-list.ts): Query of the state table's
 * by-tenant-status index, that index only; the runs' states are read with the BatchGetItem of
 * `dag_run#*` keys the admission has.
 */
function grantRunList(fn: AgentBusFunction, tables: AgentBusTables): void {
  fn.addToRolePolicy(
    new PolicyStatement({
      actions: ["dynamodb:Query"],
      resources: [`${tables.state.tableArn}/index/${StateIndex.byTenantStatus}`],
    }),
  );
}

/**
 * The limits as the function's environment has them, checked first (every bad value named):
 * each tenant's requests per minute and runs in flight, tenants' own (`TENANT_LIMITS`, JSON), and
 * the backlog's threshold, drain rate and cache.
 */
export function limitsEnvironment(limits: FrontDoorLimits): Record<string, string> {
  const problems = limitProblems(limits);
  if (problems.length > 0) throw new Error(`front door: ${problems.join("; ")}`);
  const backlog = { ...DEFAULT_BACKLOG, ...(limits.backlog || {}) };
  const own = limits.tenantLimits ?? {};
  return {
    TENANT_REQUESTS_PER_MINUTE: String(
      limits.tenantRequestsPerMinute ?? DEFAULT_TENANT_CAPS.requestsPerMinute,
    ),
    TENANT_RUNS_IN_FLIGHT: String(limits.tenantRunsInFlight ?? DEFAULT_TENANT_CAPS.runsInFlight),
    ...(Object.keys(own).length > 0 ? { TENANT_LIMITS: JSON.stringify(own) } : {}),
    ...(limits.backlog === false
      ? {}
      : {
          BACKLOG_THRESHOLD: String(backlog.threshold),
          BACKLOG_DRAIN_PER_SECOND: String(backlog.drainPerSecond),
          BACKLOG_CACHE_SECONDS: String(backlog.cacheSeconds),
        }),
  };
}

const LimitsShape = z.object({
  tenantRequestsPerMinute: z.optional(RequestsPerMinute),
  tenantRunsInFlight: z.optional(RunsInFlightCap),
  tenantLimits: z.optional(TenantLimitOverrides),
  backlog: z.optional(
    z.union([
      z.literal(false),
      z.object({
        threshold: z.optional(z.number().check(z.int(), z.minimum(1))),
        drainPerSecond: z.optional(z.number().check(z.positive())),
        cacheSeconds: z.optional(z.number().check(z.minimum(0), z.maximum(300))),
      }),
    ]),
  ),
});

function limitProblems(limits: FrontDoorLimits): string[] {
  const parsed = z.safeParse(LimitsShape, limits);
  const problems = parsed.success ? [] : z.issueLines(parsed.error, "limits");
  const bytes = JSON.stringify(limits.tenantLimits ?? {}).length;
  if (bytes > MAX_TENANT_LIMITS_BYTES)
    problems.push(
      `tenantLimits: ${bytes} bytes of JSON, over ${MAX_TENANT_LIMITS_BYTES} (the function's environment is 4 KB in all)`,
    );
  return problems;
}
