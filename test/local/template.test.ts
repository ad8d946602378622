import { describe, expect, it } from "vitest";
import { matches } from "../../lib/dev/local/runtime/filters";
import { renderTemplate, valueAt } from "../../lib/dev/local/runtime/pipe-input";
import {
  deploymentOrder,
  type Physical,
  references,
  resolve,
  type Template,
} from "../../lib/dev/local/template";

const physical = new Map<string, Physical>([
  [
    "Queue",
    {
      ref: "https://sqs/q.fifo",
      attributes: { Arn: "arn:aws:sqs:us-east-1:1:q.fifo", QueueName: "q.fifo" },
    },
  ],
  [
    "Bus",
    { ref: "agentbus-local-events", attributes: { Arn: "arn:bus", Name: "agentbus-local-events" } },
  ],
]);
const ctx = { region: "us-east-1", accountId: "123456789012", stackName: "S", physical };

describe("template intrinsics", () => {
  it("resolves Ref, GetAtt, Join, Sub, Select, Split and pseudo parameters", () => {
    expect(resolve({ Ref: "Queue" }, ctx)).toBe("https://sqs/q.fifo");
    expect(resolve({ "Fn::GetAtt": ["Queue", "Arn"] }, ctx)).toBe("arn:aws:sqs:us-east-1:1:q.fifo");
    expect(
      resolve(
        { "Fn::Join": ["-", [{ Ref: "AWS::Region" }, { "Fn::GetAtt": ["Bus", "Name"] }]] },
        ctx,
      ),
    ).toBe("us-east-1-agentbus-local-events");
    expect(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: CloudFormation Fn::Sub syntax
      resolve({ "Fn::Sub": "arn:${AWS::Partition}:x:${AWS::AccountId}:${Bus.Name}/${Queue}" }, ctx),
    ).toBe("arn:aws:x:123456789012:agentbus-local-events/https://sqs/q.fifo");
    expect(resolve({ "Fn::Select": [1, { "Fn::Split": [":", "a:b:c"] }] }, ctx)).toBe("b");
  });

  it("names what cannot be resolved", () => {
    expect(() => resolve({ Ref: "Missing" }, ctx)).toThrow(/Missing/);
    expect(() => resolve({ "Fn::ImportValue": "x" }, ctx)).toThrow(/Fn::ImportValue/);
  });

  it("orders resources after what they refer to and finds references in Sub", () => {
    const template: Template = {
      Resources: {
        Rule: {
          Type: "AWS::Events::Rule",
          Properties: {
            EventBusName: { Ref: "Bus" },
            Targets: [{ Arn: { "Fn::GetAtt": ["Queue", "Arn"] } }],
          },
        },
        Queue: {
          Type: "AWS::SQS::Queue",
          // biome-ignore lint/suspicious/noTemplateCurlyInString: CloudFormation Fn::Sub syntax
          Properties: { RedrivePolicy: { deadLetterTargetArn: { "Fn::Sub": "${Dlq.Arn}" } } },
        },
        Dlq: { Type: "AWS::SQS::Queue" },
        Bus: { Type: "AWS::Events::EventBus" },
      },
    };
    expect([...references(template.Resources.Queue?.Properties)]).toEqual(["Dlq"]);
    const order = deploymentOrder(template, () => true);
    expect(order.indexOf("Dlq")).toBeLessThan(order.indexOf("Queue"));
    expect(order.indexOf("Queue")).toBeLessThan(order.indexOf("Rule"));
    expect(order.indexOf("Bus")).toBeLessThan(order.indexOf("Rule"));
  });

  it("refuses a reference cycle", () => {
    const template: Template = {
      Resources: {
        A: { Type: "T", Properties: { x: { Ref: "B" } } },
        B: { Type: "T", Properties: { x: { Ref: "A" } } },
      },
    };
    expect(() => deploymentOrder(template, () => true)).toThrow(/cycle/);
  });
});

describe("event source and pipe emulation helpers", () => {
  it("matches Lambda filter patterns", () => {
    expect(matches({ eventName: "INSERT" }, { eventName: ["INSERT"] })).toBe(true);
    expect(matches({ eventName: "MODIFY" }, { eventName: ["INSERT"] })).toBe(false);
    expect(
      matches(
        { dynamodb: { Keys: { pk: { S: "task#1" } } } },
        { dynamodb: { Keys: { pk: { S: [{ prefix: "task#" }] } } } },
      ),
    ).toBe(true);
  });

  it("reads Pipes JSON paths and renders input templates", () => {
    const event = { body: { detail: { order_key: "task_1", event_id: "01ABC" } } };
    expect(valueAt("$.body.detail.order_key", event)).toBe("task_1");
    expect(valueAt("static-group", event)).toBe("static-group");
    expect(() => valueAt("$.body.detail.missing", event)).toThrow(/missing/);
    expect(JSON.parse(renderTemplate("<$.body.detail>", event))).toEqual(event.body.detail);
    expect(renderTemplate('{"id": "<$.body.detail.event_id>", "d": <$.body.detail>}', event)).toBe(
      '{"id": "01ABC", "d": {"order_key":"task_1","event_id":"01ABC"}}',
    );
  });
});
