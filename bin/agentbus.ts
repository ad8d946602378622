#!/usr/bin/env node
import { App, Validations } from "aws-cdk-lib";
import { AwsSolutionsChecks } from "cdk-nag";
import { AgentBus } from "../lib/infra/agentbus";
import { deploymentSettings } from "../lib/infra/agentbus-stack";
import { PROJECT_STACK } from "../lib/infra/project";

/**
 * The CDK app: `npx cdk synth|deploy -c stage=<stage> [-c region=<region>] [-c account=<id>]`
 * (region and account default to the CLI's CDK_DEFAULT_REGION / CDK_DEFAULT_ACCOUNT), and
 * `-c agentbus:emulator=localstack-free|localstack` for an emulator (see lib/infra/constructs/emulator.ts).
 *
 * cdk-nag's AWS Solutions checks run on every synth as a validation plugin (cdk-nag 3 replaced
 * the v2 aspect with `Validations.of(app).addPlugins`): findings are printed with the synth
 * output and written to cdk.out/validation-report.json, and an unacknowledged error fails the
 * synth. Deliberate exceptions are acknowledged in the constructs, each with its reason, and the
 * acknowledgements are written into the template (`cdk_nag` metadata) as an audit trail.
 */
const app = new App();
const { stage, env } = deploymentSettings((key) => app.node.tryGetContext(key), {
  region: process.env.CDK_DEFAULT_REGION,
  account: process.env.CDK_DEFAULT_ACCOUNT,
});
Validations.of(app).addPlugins(
  new AwsSolutionsChecks(app, { verbose: true, writeSuppressionsToCloudFormation: true }),
);

new AgentBus(app, `AgentBus-${stage}`, {
  ...PROJECT_STACK,
  stage,
  env,
  description: `AgentBus (${stage}): event-driven orchestration hub for multi-agent systems`,
});
