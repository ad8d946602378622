#!/usr/bin/env node
import { App } from "aws-cdk-lib";
import { AgentBusStack } from "../lib/agentbus-stack";
import { assertKebabCase } from "../lib/constructs/function";

const app = new App();
const stage: unknown = app.node.tryGetContext("stage") ?? "dev";
if (typeof stage !== "string") {
  throw new Error(`context "stage" must be a string, got ${JSON.stringify(stage)}`);
}
assertKebabCase('context "stage"', stage, 16);
const account = process.env.CDK_DEFAULT_ACCOUNT;
const region = process.env.CDK_DEFAULT_REGION;

new AgentBusStack(app, `AgentBus-${stage}`, {
  stage,
  env: account || region ? { account, region } : undefined,
  description: `AgentBus (${stage}): event-driven orchestration hub for multi-agent systems`,
});
