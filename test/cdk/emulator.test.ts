import { Annotations, Match, Template } from "aws-cdk-lib/assertions";
import { describe, expect, it } from "vitest";
import { PIPE_FALLBACK_WARNING } from "../../lib/infra/agentbus-stack";
import {
  EMULATOR_CONTEXT_KEY,
  EMULATORS,
  emulatorProblem,
} from "../../lib/infra/constructs/emulator";
import { Topic } from "../../lib/infra/constructs/topic";
import {
  type CfnTemplate,
  checkTemplate,
  EMULATOR_CONTEXT_KEY as SUITE_CONTEXT_KEY,
} from "../localstack/localstack";
import {
  outputProblems,
  PIPED_GROUP,
  refersTo,
  resources,
  single,
  synthesizeStack,
  testStack,
  topologyWithPipe,
} from "./synth";

/**
 * The `agentbus:emulator` context: absent (AWS) and `localstack` deploy everything;
 * `localstack-free` leaves out what LocalStack's free image cannot run (Pipes, archives, schema
 * registry and schemas, the dashboard) and falls back to the dispatch function for pipe groups,
 * with a warning. Anything else fails the synth, naming the value.
 */

const LEFT_OUT = [
  "AWS::Pipes::Pipe",
  "AWS::Events::Archive",
  "AWS::EventSchemas::Registry",
  "AWS::EventSchemas::Schema",
  "AWS::CloudWatch::Dashboard",
];
/**
 * Identical in both: the event path's resources. (Functions, roles and alarms differ where the
 * pipe group's delivery does: a dispatch function instead of the pipe and its role.)
 */
const UNCHANGED = [
  "AWS::Events::EventBus",
  "AWS::Events::EventBusPolicy",
  "AWS::Events::Rule",
  "AWS::SQS::Queue",
  "AWS::SQS::QueuePolicy",
  "AWS::DynamoDB::Table",
];

const synth = (emulator?: string) =>
  synthesizeStack(
    { topology: topologyWithPipe() },
    "AgentBus-test",
    emulator === undefined ? {} : { [EMULATOR_CONTEXT_KEY]: emulator },
  );
const typesIn = (template: Template) =>
  Object.values(template.toJSON().Resources as Record<string, { Type: string }>).map((r) => r.Type);
/** The resource types a synth deploys: its template's and its nested event-schemas stack's. */
const types = ({ stack, template }: ReturnType<typeof synth>) => [
  ...typesIn(template),
  ...(stack.eventSchemas ? typesIn(Template.fromStack(stack.eventSchemas)) : []),
];
const pipeWarnings = (stack: ReturnType<typeof synth>["stack"]) =>
  Annotations.fromStack(stack).findWarning("*", Match.stringLikeRegexp(PIPE_FALLBACK_WARNING));

const aws = synth();

describe("emulator: none (AWS)", () => {
  it("deploys everything: pipe, archives, schema registries and schemas, dashboard", () => {
    const present = new Set(types(aws));
    for (const type of LEFT_OUT) expect(present.has(type), type).toBe(true);
    expect(aws.stack.emulator).toBeUndefined();
    expect(aws.stack.dashboard).toBeDefined();
  });

  it("warns about nothing", () => {
    expect(pipeWarnings(aws.stack)).toEqual([]);
  });

  it("the suite and the stack agree on the context key", () => {
    expect(SUITE_CONTEXT_KEY).toBe(EMULATOR_CONTEXT_KEY);
  });
});

describe("emulator: localstack (with an auth token)", () => {
  const pro = synth("localstack");

  it("deploys the same resources as for AWS", () => {
    expect(types(pro).sort()).toEqual(types(aws).sort());
    expect(pro.template.toJSON().Resources).toEqual(aws.template.toJSON().Resources);
    expect(pipeWarnings(pro.stack)).toEqual([]);
  });
});

describe("emulator: localstack-free", () => {
  const free = synth("localstack-free");
  const present = new Set(types(free));

  it("leaves out pipes, archives, schema registries and schemas, and the dashboard", () => {
    for (const type of LEFT_OUT) expect(present.has(type), type).toBe(false);
    expect(free.stack.dashboard).toBeUndefined();
    for (const topic of free.stack.topics.values()) {
      expect(topic.archive, topic.topicName).toBeUndefined();
      expect(topic.schemaRegistry, topic.topicName).toBeUndefined();
      expect(topic.schemas.size, topic.topicName).toBe(0);
    }
  });

  it("leaves out nothing else: buses, bus policies, rules, queues and tables are the same", () => {
    for (const type of UNCHANGED) {
      expect(free.template.findResources(type), type).toEqual(aws.template.findResources(type));
    }
  });

  it("is fully deployable on the free image: nothing the suite would deploy as a placeholder", () => {
    expect(checkTemplate(free.template.toJSON() as CfnTemplate, false)).toEqual({
      blocking: [],
      placeholders: [],
    });
  });

  it("delivers the pipe group through a dispatch function from its buffer to its FIFO queue", () => {
    const dispatcher = single(
      free.template,
      "AWS::Lambda::Function",
      (f) =>
        f.Metadata["agentbus:kind"] === "dispatch" && f.Metadata["agentbus:group"] === PIPED_GROUP,
    );
    const mapping = single(
      free.template,
      "AWS::Lambda::EventSourceMapping",
      (m) => refersTo(m.Properties.FunctionName) === dispatcher.id,
    );
    const rule = single(
      free.template,
      "AWS::Events::Rule",
      (r) => r.Metadata["agentbus:group"] === PIPED_GROUP,
    );
    const ruleTarget = (rule.Properties.Targets as { Arn: unknown }[])[0];
    expect(refersTo(mapping.Properties.EventSourceArn)).toBe(refersTo(ruleTarget?.Arn));
    const fifo = refersTo(
      (dispatcher.Properties.Environment as { Variables: Record<string, unknown> }).Variables
        .TARGET_QUEUE_URL,
    );
    const queue = single(free.template, "AWS::SQS::Queue", (q) => q.id === fifo);
    expect(queue.Properties.FifoQueue).toBe(true);
  });

  it("warns at synth time, on the group, that its pipe became a dispatch function", () => {
    const warnings = pipeWarnings(free.stack);
    expect(warnings.map((w) => w.id)).toEqual([`/AgentBus-test/PipedProjection`]);
    const message = String(warnings[0]?.entry.data);
    expect(message).toContain(`"${PIPED_GROUP}" declares delivery "pipe"`);
    expect(message).toContain(`${EMULATOR_CONTEXT_KEY}=localstack-free`);
    expect(message).toContain("dispatch function");
  });

  it("still outputs every bus, every queue of every group and every table", () => {
    expect(outputProblems(free.template)).toEqual([]);
  });
});

describe("emulator: unknown values", () => {
  it.each(["localstak", "LocalStack", "aws", ""])(
    "%j fails the synth, naming the value and the supported ones",
    (value) => {
      expect(() => synth(value)).toThrow(
        `${EMULATOR_CONTEXT_KEY} ${JSON.stringify(value)} is not supported (supported: "localstack-free", "localstack"`,
      );
    },
  );

  it("a non-string value fails too", () => {
    expect(emulatorProblem(true)).toMatch(/agentbus:emulator true is not supported/);
    expect(EMULATORS.map((e) => emulatorProblem(e))).toEqual([undefined, undefined]);
  });

  it("the emulator prop wins over the context", () => {
    const { stack } = synthesizeStack({ emulator: "localstack-free" }, "AgentBus-test", {
      [EMULATOR_CONTEXT_KEY]: "localstack",
    });
    expect(stack.emulator).toBe("localstack-free");
  });
});

describe("Topic without archive and schema registry", () => {
  it("keeps the bus and its policy", () => {
    const stack = testStack();
    const topic = new Topic(stack, "Events", {
      topicName: "events",
      archive: false,
      schemaRegistry: false,
    });
    const template = Template.fromStack(stack);
    expect(resources(template, "AWS::Events::EventBus")).toHaveLength(1);
    expect(resources(template, "AWS::Events::EventBusPolicy")).toHaveLength(1);
    expect(resources(template, "AWS::Events::Archive")).toEqual([]);
    expect(resources(template, "AWS::EventSchemas::Registry")).toEqual([]);
    expect(topic.schemas.size).toBe(0);
  });
});
