import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { App } from "aws-cdk-lib";
import { AgentBus, type AgentBusApp } from "../../infra/agentbus";
import { AgentBusStack, type AgentBusStackProps } from "../../infra/agentbus-stack";
import {
  FRONT_DOOR_AUDIENCE_CONTEXT,
  FRONT_DOOR_ISSUER_CONTEXT,
} from "../../infra/constructs/front-door";
import { PACKAGE_ROOT } from "../../infra/package-root";
import type { Topology } from "../../infra/topology";
import { LOCAL_AUDIENCE, LOCAL_ISSUER } from "./front-door";
import type { Template } from "./template";

export const ROOT = PACKAGE_ROOT;

/**
 * A stack to run locally: an application's roles and integrations (as `new AgentBus` takes them),
 * or a topology written out and the integrations (as `new AgentBusStack` takes them).
 */
export type LocalStack = AgentBusApp | Pick<AgentBusStackProps, "topology" | "integrations">;

/**
 * Synthesize the stack as `cdk synth` does (the same constructs, the package's cdk.json context),
 * for a stage, without bundling the functions (the local runtime runs their sources in-process).
 */
export function synthesize(
  stage: string,
  stack: LocalStack,
  /** More CDK context, as `cdk synth -c key=value` gives it. */
  context: Readonly<Record<string, unknown>> = {},
): { stackName: string; template: Template; topology: Topology } {
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
    const built =
      "topology" in stack
        ? new AgentBusStack(app, stackName, { ...stack, stage })
        : new AgentBus(app, stackName, { ...stack, stage });
    const template = app.synth().getStackByName(stackName).template as Template;
    return { stackName, template, topology: built.topology };
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}
