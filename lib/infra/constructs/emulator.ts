/**
 * Which AWS emulator a template is synthesized for, as pure data: the CDK context
 * `agentbus:emulator` names it, and the stack leaves out what that emulator cannot run.
 *
 * - absent: real AWS, everything.
 * - `localstack-free`: LocalStack's image without an auth token. It has no provider for
 *   EventBridge Pipes, archives, the schema registry or CloudWatch dashboards and would deploy
 *   them as placeholders, so they are left out; groups declared with `delivery: "pipe"` are
 *   delivered by the dispatch function instead (a synth-time warning says so).
 * - `localstack`: LocalStack with an auth token; everything as on AWS but EventBridge's new buses
 *   (`AWS::EventsV2`), which no emulator has.
 * Either way a group declared with `delivery: "subscriber"` is delivered by the dispatch
 * function instead, with a warning.
 *
 * The project's own local runtime (`npm start`, moto) does not use it: it deploys the full
 * template and emulates pipes and the new buses' subscribers itself.
 */

/** CDK context key naming the emulator (`-c agentbus:emulator=localstack-free`). */
export const EMULATOR_CONTEXT_KEY = "agentbus:emulator";

export const EMULATORS = ["localstack-free", "localstack"] as const;
export type Emulator = (typeof EMULATORS)[number];

/** What the target of a deployment can run. */
export interface TargetCapabilities {
  /** EventBridge Pipes (`delivery: "pipe"`). */
  readonly pipes: boolean;
  /** EventBridge's new buses and their subscribers (`delivery: "subscriber"`): no emulator has them. */
  readonly subscriberBuses: boolean;
  /** EventBridge archives. */
  readonly archives: boolean;
  /** EventBridge schema registries and schemas. */
  readonly schemaRegistry: boolean;
  /** CloudWatch dashboards. */
  readonly dashboard: boolean;
}

const EVERYTHING: TargetCapabilities = {
  pipes: true,
  subscriberBuses: true,
  archives: true,
  schemaRegistry: true,
  dashboard: true,
};

const CAPABILITIES: Readonly<Record<Emulator, TargetCapabilities>> = {
  "localstack-free": {
    pipes: false,
    subscriberBuses: false,
    archives: false,
    schemaRegistry: false,
    dashboard: false,
  },
  localstack: { ...EVERYTHING, subscriberBuses: false },
};

/** Why `value` is not a supported emulator, if it is not (`undefined` = real AWS is fine). */
export function emulatorProblem(value: unknown): string | undefined {
  if (value === undefined || (EMULATORS as readonly unknown[]).includes(value)) return undefined;
  return `${EMULATOR_CONTEXT_KEY} ${JSON.stringify(value)} is not supported (supported: ${EMULATORS.map((e) => JSON.stringify(e)).join(", ")}; leave it out for AWS)`;
}

/** `value` as an emulator (`undefined` for real AWS); throws naming the value if unsupported. */
export function parseEmulator(value: unknown): Emulator | undefined {
  const problem = emulatorProblem(value);
  if (problem) throw new Error(problem);
  return value as Emulator | undefined;
}

/** What a deployment to `emulator` (`undefined` = AWS) can run. */
export function capabilitiesOf(emulator: Emulator | undefined): TargetCapabilities {
  return emulator === undefined ? EVERYTHING : CAPABILITIES[emulator];
}
