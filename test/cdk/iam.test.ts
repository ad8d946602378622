import type { Template } from "aws-cdk-lib/assertions";
import { describe, expect, it } from "vitest";
import { EMULATOR_CONTEXT_KEY } from "../../lib/infra/constructs/emulator";
import { topology } from "../../lib/infra/project";
import {
  functionsOfKind,
  getAtt,
  type Resource,
  refersTo,
  resources,
  synthesizeStack,
  topologyWithPipe,
} from "./synth";

/**
 * Least privilege over every policy document of the synthesized template: identity policies
 * (role inline and attached policies, managed policies) and resource policies (queues, buses).
 *
 * - No wildcard in any allowed action, no NotAction / NotResource.
 * - `Resource: "*"` only for the actions below, which have no resource-level permissions.
 * - No wildcard inside a resource ARN either (no `index/*`, no `table/*`).
 * - No AWS managed policy on any role: each function may write to its own log group only.
 * - Deny statements only as the SSL guard of a queue (`sqs:*` when `aws:SecureTransport` is
 *   false, what `enforceSSL` renders).
 * - A service principal in a resource policy only with the `aws:SourceArn` of its rule.
 */

/** Actions allowed on `Resource: "*"`, why, and which functions (`agentbus:kind`) may have them. */
const ALLOWED_ON_ANY_RESOURCE: Record<string, { kinds: readonly string[]; why: string }> = {
  "xray:PutTraceSegments": {
    kinds: ["relay", "dispatch", "consumer", "sweeper"],
    why: "X-Ray has no resource-level permissions; every function traces actively",
  },
  "xray:PutTelemetryRecords": {
    kinds: ["relay", "dispatch", "consumer", "sweeper"],
    why: "X-Ray has no resource-level permissions; every function traces actively",
  },
  "dynamodb:ListStreams": {
    kinds: ["relay", "consumer"],
    why: "the DynamoDB stream event source of the relay and of a stream group's consumer lists streams, which is not scoped to a stream",
  },
  "cloudwatch:GetMetricData": {
    kinds: ["operator"],
    why: "no resource-level permissions; the operator's status reads queue ages and the relay's iterator age",
  },
};

/** The operator's read policy (attached to no function's role): its statements count as "operator". */
const OPERATOR_POLICY = "AWS::IAM::ManagedPolicy OperatorRead";
/** The operator's repair policy. */
const REPAIR_POLICY = "AWS::IAM::ManagedPolicy OperatorReadRepairPolicy";

type Json = Record<string, unknown>;

interface Statement {
  readonly source: string;
  readonly Effect: string;
  readonly Action: string[];
  readonly Resource: unknown[];
  readonly Principal?: unknown;
  readonly Condition?: Json;
  readonly NotAction?: unknown;
  readonly NotResource?: unknown;
}

const list = (value: unknown): unknown[] =>
  value === undefined ? [] : ([] as unknown[]).concat(value);

function statementsOfDocument(source: string, document: unknown): Statement[] {
  return list((document as { Statement?: unknown } | undefined)?.Statement).map((raw) => {
    const s = raw as Json;
    return {
      ...s,
      source,
      Effect: s.Effect as string,
      Action: list(s.Action) as string[],
      Resource: list(s.Resource),
    } as Statement;
  });
}

/** Every statement of every policy document in the template, labelled with where it is. */
function everyStatement(template: Template): Statement[] {
  const of = (type: string, documents: (r: Resource) => unknown[]) =>
    resources(template, type).flatMap((r) =>
      documents(r).flatMap((d) => statementsOfDocument(`${type} ${r.id}`, d)),
    );
  return [
    ...of("AWS::IAM::Policy", (r) => [r.Properties.PolicyDocument]),
    ...of("AWS::IAM::ManagedPolicy", (r) => [r.Properties.PolicyDocument]),
    ...of("AWS::IAM::Role", (r) =>
      list(r.Properties.Policies).map((p) => (p as Json).PolicyDocument),
    ),
    ...of("AWS::SQS::QueuePolicy", (r) => [r.Properties.PolicyDocument]),
    ...resources(template, "AWS::Events::EventBusPolicy").flatMap((r) =>
      statementsOfDocument(`AWS::Events::EventBusPolicy ${r.id}`, {
        Statement: [r.Properties.Statement],
      }),
    ),
  ];
}

/** The logical ids of the roles a function's identity policies attach to. */
function roleOf(fn: Resource): string | undefined {
  return refersTo(fn.Properties.Role);
}

/**
 * The one wildcard ARN allowed: `events:DescribeReplay` in the operator's repair policy on the
 * replays named `agentbus-<stage>-*` (agentbus replay names them from the window at run time).
 */
const isStageReplays = (s: Statement, resource: unknown) =>
  s.source.startsWith(REPAIR_POLICY) &&
  JSON.stringify(s.Action) === JSON.stringify(["events:DescribeReplay"]) &&
  /:replay\/agentbus-[a-z0-9-]+-\*"\]\]\}$/.test(JSON.stringify(resource));

const isSslGuard = (s: Statement) =>
  s.Effect === "Deny" &&
  JSON.stringify(s.Action) === JSON.stringify(["sqs:*"]) &&
  JSON.stringify(s.Condition) === JSON.stringify({ Bool: { "aws:SecureTransport": "false" } });

const CASES: [string, () => Template][] = [
  ["the default stack", () => synthesizeStack().template],
  [
    "a stack with a pipe-delivered group",
    () => synthesizeStack({ topology: topologyWithPipe() }).template,
  ],
  [
    "the localstack-free template",
    () =>
      synthesizeStack({ topology: topologyWithPipe() }, "AgentBus-test", {
        [EMULATOR_CONTEXT_KEY]: "localstack-free",
      }).template,
  ],
];

describe.each(CASES)("least privilege: %s", (_name, synthesize) => {
  const template = synthesize();
  const statements = everyStatement(template);
  const allowed = statements.filter((s) => s.Effect === "Allow");
  const functions = resources(template, "AWS::Lambda::Function");
  const functionOfRole = new Map(functions.map((fn) => [roleOf(fn), fn]));
  const policyRoles = (source: string) => {
    const id = source.split(" ")[1];
    const policy = resources(template, "AWS::IAM::Policy", (p) => p.id === id)[0];
    return list(policy?.Properties.Roles).map(refersTo);
  };

  it("has policies to check", () => {
    expect(allowed.length).toBeGreaterThan(10);
    expect(functions.length).toBeGreaterThan(0);
  });

  it("no statement uses NotAction or NotResource", () => {
    const inverted = statements.filter(
      (s) => s.NotAction !== undefined || s.NotResource !== undefined,
    );
    expect(inverted.map((s) => s.source)).toEqual([]);
  });

  it("no allowed action has a wildcard", () => {
    const wildcards = allowed.flatMap((s) =>
      s.Action.filter((a) => a.includes("*")).map((a) => `${s.source}: ${a}`),
    );
    expect(wildcards).toEqual([]);
  });

  it('Resource "*" only for the allow-listed actions, each only for the functions that need it', () => {
    const problems: string[] = [];
    for (const s of allowed.filter((x) => x.Resource.includes("*"))) {
      const kinds = s.source.startsWith(OPERATOR_POLICY)
        ? ["operator"]
        : policyRoles(s.source).map(
            (role) => functionOfRole.get(role)?.Metadata["agentbus:kind"] as string | undefined,
          );
      for (const action of s.Action) {
        const entry = ALLOWED_ON_ANY_RESOURCE[action];
        if (!entry) problems.push(`${s.source}: ${action} on "*" is not allow-listed`);
        else if (
          kinds.length === 0 ||
          !kinds.every((kind) => kind !== undefined && entry.kinds.includes(kind))
        ) {
          problems.push(`${s.source}: ${action} on "*" for ${kinds.join(", ")} (${entry.why})`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it("no resource ARN has a wildcard in it (no index/*, no table/*), but the stage's replays", () => {
    const wildcards = allowed.flatMap((s) =>
      s.Resource.filter(
        (r) => r !== "*" && JSON.stringify(r).includes("*") && !isStageReplays(s, r),
      ).map((r) => `${s.source}: ${JSON.stringify(r)}`),
    );
    expect(wildcards).toEqual([]);
  });

  it("no role has an AWS managed policy", () => {
    const managed = resources(template, "AWS::IAM::Role").filter(
      (r) => list(r.Properties.ManagedPolicyArns).length > 0,
    );
    expect(managed.map((r) => r.id)).toEqual([]);
  });

  it("every function has a role of its own and may write logs to its own log group only", () => {
    expect(new Set(functions.map(roleOf)).size).toBe(functions.length);
    for (const fn of functions) {
      const logGroup = refersTo((fn.Properties.LoggingConfig as { LogGroup: unknown }).LogGroup);
      const logStatements = allowed.filter(
        (s) =>
          s.Action.some((a) => a.startsWith("logs:")) && policyRoles(s.source).includes(roleOf(fn)),
      );
      expect(logStatements.flatMap((s) => s.Action).sort(), fn.id).toEqual([
        "logs:CreateLogStream",
        "logs:PutLogEvents",
      ]);
      expect(
        logStatements.flatMap((s) => s.Resource),
        fn.id,
      ).toEqual([getAtt(logGroup as string, "Arn")]);
    }
  });

  it("denies only as the SSL guard of a queue, and every queue has it", () => {
    const denied = statements.filter((s) => s.Effect === "Deny");
    expect(denied.filter((s) => !isSslGuard(s)).map((s) => s.source)).toEqual([]);
    const guarded = new Set(
      resources(template, "AWS::SQS::QueuePolicy")
        .filter((p) =>
          statementsOfDocument(p.id, p.Properties.PolicyDocument).some((s) => isSslGuard(s)),
        )
        .flatMap((p) => list(p.Properties.Queues).map(refersTo)),
    );
    for (const queue of resources(template, "AWS::SQS::Queue")) {
      expect(guarded.has(queue.id), queue.id).toBe(true);
    }
  });

  it("resource policies allow no anonymous principal, and services only from their source", () => {
    const problems: string[] = [];
    for (const s of allowed.filter((x) => x.Principal !== undefined)) {
      const principal = JSON.stringify(s.Principal);
      if (principal === '"*"' || principal.includes('"AWS":"*"')) {
        problems.push(`${s.source}: anonymous principal`);
      }
      if ((s.Principal as Json).Service !== undefined) {
        const condition = JSON.stringify(s.Condition ?? {});
        if (!condition.includes('"aws:SourceArn"')) {
          problems.push(`${s.source}: service principal without aws:SourceArn`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it("the relay and the consumers of stream groups are the only functions that read the stream", () => {
    const streamGroups = new Set(
      topology.groups.filter((g) => g.delivery === "stream").map((g) => g.name),
    );
    expect(streamGroups.size).toBeGreaterThan(0);
    const readers = [
      ...functionsOfKind(template, "relay"),
      ...functionsOfKind(template, "consumer").filter((f) =>
        streamGroups.has(f.Metadata["agentbus:group"] as string),
      ),
    ].map(roleOf);
    const streamReaders = allowed
      .filter((s) => s.Action.includes("dynamodb:GetRecords"))
      .flatMap((s) => policyRoles(s.source));
    expect([...new Set(streamReaders)].sort()).toEqual(readers.sort());
  });
});
