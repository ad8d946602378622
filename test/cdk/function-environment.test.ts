import { App, Stack } from "aws-cdk-lib";
import { Queue } from "aws-cdk-lib/aws-sqs";
import { describe, expect, it } from "vitest";
import {
  AgentBusFunction,
  environmentProblems,
  MAX_ENVIRONMENT_BYTES,
} from "../../lib/infra/constructs/function";
import { HUB_HANDLERS } from "../../lib/infra/hub-handlers";

/**
 * Lambda refuses a function whose environment is over 4 KB, at deploy; each variable with a
 * budget of its own (workflows, tenants' limits) is checked alone, so the synth checks their sum.
 */
describe("a function's environment", () => {
  it("is counted by its names and values, a deployed value at 128 bytes, a join by its parts", () => {
    const small = { variables: { A: "x".repeat(100), B: { Ref: "Queue" } } };
    expect(environmentProblems(small)).toEqual([]);
    const joined = { "Fn::Join": ["", ["y".repeat(2000), { Ref: "Queue" }, "z".repeat(1000)]] };
    const [problem] = environmentProblems({
      variables: { BIG: "x".repeat(1000), JOINED: joined },
    });
    expect(problem).toContain(`over Lambda's ${MAX_ENVIRONMENT_BYTES}`);
    expect(problem).toContain("JOINED 3134");
    expect(environmentProblems(undefined)).toEqual([]);
  });

  it("over 4 KB fails the synth, naming its largest variables", () => {
    const app = new App();
    const stack = new Stack(app, "Env");
    const queue = new Queue(stack, "Queue");
    new AgentBusFunction(stack, "Door", {
      kind: "front-door",
      entry: HUB_HANDLERS["front-door"],
      environment: {
        WORKFLOWS: "w".repeat(2048),
        TENANT_LIMITS: "t".repeat(2000),
        QUEUE: queue.queueUrl,
      },
    });
    expect(() => app.synth()).toThrow(
      /environment takes about \d+ bytes, over Lambda's 4096 \(largest: WORKFLOWS 2057, TENANT_LIMITS 2013/,
    );
  });
});
