import { AWAITING_APPROVAL, operatorCommand as run } from "../../../functions/core/attention";

/**
 * The operator commands the alarms' descriptions name (`operatorCommand` types them; the
 * attention signals' own are in their declarations): each alarm says what
 * happened and the command a person runs, as it is typed (`npx agentbus ...`;
 * lib/operator/README.md is their reference). Against a deployed stack they run as written once
 * `AGENTBUS_OUTPUTS` names its outputs file (the CLI's `--outputs` from the environment): the
 * descriptions stay short, each repeated per group in a template near CloudFormation's 1 MB.
 */

/**
 * What to run for each case that alarms (the sentence that ends an alarm's description), besides
 * the attention signals, whose declarations carry their own (functions/core/attention.ts). Kept
 * short: every description is repeated per group in a template near CloudFormation's 1 MB.
 */
export const ALARM_ACTIONS = {
  deadLetters: `Run ${run("dlq list")} and ${run("trace <event id>")}; after the fix, ${run("dlq redrive <group>")}`,
  backlog: `Run ${run("status")} for every queue's depth and age`,
  retries: `Run ${run("status")}; the group's log lines "will retry" carry the error_class`,
  awaitingApproval: AWAITING_APPROVAL.alarm.act,
  relayFailures: `Run ${run("status")}, then ${run("republish --failures")}`,
  relayBehind: `Run ${run("status")} for the relay's iterator age`,
  sweeperFailures: `Run ${run("status")}; the sweeper's log has the error`,
} as const;
