import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { type App, Validations } from "aws-cdk-lib";
import { AwsSolutionsChecks } from "cdk-nag";
import { testApp } from "./synth";

/**
 * cdk-nag's AWS Solutions checks, run the way `cdk synth` runs them for bin/agentbus.ts: as a
 * validation plugin (cdk-nag 3 is a `Validations` plugin, not the v2 aspect, and reports into
 * the assembly's validation report instead of annotations), verbose, over the stack as deployed.
 * Every finding left, error or warning, fails the test and is printed with its rule id, its
 * resource path and its message.
 */

export interface Finding {
  readonly rule: string;
  readonly severity: string;
  readonly path: string;
  readonly message: string;
}

interface Violating {
  readonly constructPath?: string;
  readonly resourceLogicalId?: string;
}

interface Report {
  readonly pluginReports?: readonly {
    readonly pluginName: string;
    readonly violations?: readonly {
      readonly ruleName: string;
      readonly description: string;
      readonly severity?: string;
      readonly violatingConstructs?: readonly Violating[];
      readonly violatingResources?: readonly Violating[];
    }[];
  }[];
}

/** Synthesize what `build` adds to an app with the checks on; every AwsSolutions finding left. */
export function nagFindings(build: (app: App) => void, context: Record<string, unknown> = {}) {
  // Collect findings from the report instead of failing the synth, so they can all be printed.
  const app = testApp({
    context: { "@aws-cdk/core:failSynthOnValidationErrors": false, ...context },
  });
  build(app);
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app, { verbose: true }));
  const assembly = app.synth();
  const reportFile = join(assembly.directory, "validation-report.json");
  if (!existsSync(reportFile)) throw new Error(`no validation report at ${reportFile}`);
  const report = JSON.parse(readFileSync(reportFile, "utf8")) as Report;
  const findings: Finding[] = (report.pluginReports ?? [])
    .filter((plugin) => plugin.pluginName === "AwsSolutions")
    .flatMap((plugin) => plugin.violations ?? [])
    .flatMap((v) =>
      [...(v.violatingConstructs ?? []), ...(v.violatingResources ?? [])].map((r) => ({
        rule: v.ruleName,
        severity: v.severity ?? "error",
        path: r.constructPath ?? r.resourceLogicalId ?? "?",
        message: v.description,
      })),
    );
  return { app, findings };
}

/** The findings as lines: severity, rule, where, and what. */
export const printed = (findings: readonly Finding[]) =>
  findings.map((f) => `[${f.severity}] ${f.rule} at ${f.path}: ${f.message}`);
