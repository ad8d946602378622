import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { App } from "aws-cdk-lib";
import { AgentBusStack } from "../../infra/agentbus-stack";
import {
  FRONT_DOOR_AUDIENCE_CONTEXT,
  FRONT_DOOR_ISSUER_CONTEXT,
} from "../../infra/constructs/front-door";
import { PACKAGE_ROOT } from "../../infra/package-root";
import { PROJECT_STACK } from "../../infra/project";
import type { Topology } from "../../infra/topology";
import { LOCAL_AUDIENCE, LOCAL_ISSUER } from "./front-door";
import type { Template } from "./template";

export const ROOT = PACKAGE_ROOT;

/**
 * Synthesize the same stack `cdk synth` does (same app code, same cdk.json context), for a
 * stage, without bundling the functions (the local runtime runs their sources in-process).
 */
export function synthesize(
  stage: string,
  topology?: Topology,
  /** More CDK context, as `cdk synth -c key=value` gives it. */
  context: Readonly<Record<string, unknown>> = {},
): { stackName: string; template: Template } {
  const cdkJson = JSON.parse(readFileSync(join(ROOT, "cdk.json"), "utf8")) as {
    context?: Record<string, unknown>;
  };
  const outdir = mkdtempSync(join(tmpdir(), "agentbus-synth-"));
  try {
    const app = new App({
      outdir,
      // Template validation and bundling do not change the template; `cdk synth` does both. The
      // built-in CloudFormation validation alone costs seconds (a WebAssembly rule engine).
      builtinCloudFormationValidation: false,
      context: {
        ...cdkJson.context,
        stage,
        "aws:cdk:bundling-stacks": [],
        "@aws-cdk/core:validateAgainstDefaultRules": false,
        // The front door's tokens come from the local issuer (./front-door.ts).
        [FRONT_DOOR_ISSUER_CONTEXT]: LOCAL_ISSUER,
        [FRONT_DOOR_AUDIENCE_CONTEXT]: LOCAL_AUDIENCE,
        ...context,
      },
    });
    const stackName = `AgentBus-${stage}`;
    new AgentBusStack(app, stackName, {
      ...PROJECT_STACK,
      stage,
      ...(topology ? { topology } : {}),
    });
    const template = app.synth().getStackByName(stackName).template as Template;
    return { stackName, template };
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}
