/**
 * The operator commands the alarms' descriptions name, in one place: each alarm says what
 * happened and the command a person runs, as it is typed (`npx agentbus ...`;
 * lib/operator/README.md is their reference). Against a deployed stack they run as written once
 * `AGENTBUS_OUTPUTS` names its outputs file (the CLI's `--outputs` from the environment): the
 * descriptions stay short, each repeated per group in a template near CloudFormation's 1 MB.
 */

/** How the operator CLI is typed. */
export const OPERATOR_CLI = "npx agentbus";

/** `command` as typed, in backquotes: `` `npx agentbus status` ``. */
export function run(command: string): string {
  return `\`${OPERATOR_CLI} ${command}\``;
}

/**
 * What to run for each case that alarms (the sentence that ends an alarm's description). Kept
 * short: every description is repeated per group in a template near CloudFormation's 1 MB.
 */
export const ALARM_ACTIONS = {
  deadLetters: `Run ${run("dlq list")} and ${run("trace <event id>")}; after the fix, ${run("dlq redrive <group>")}`,
  backlog: `Run ${run("status")} for every queue's depth and age`,
  unknownSideEffects: `Run ${run("send list")}; check with the channel, then ${run("send resolve <key> --as delivered|resend|abandon")}, never a new send`,
  heldReplies: `Run ${run("reply list")}, then ${run("reply approve <task id>")} or ${run("reply reject <task id>")}`,
  failedRuns: `Run ${run("status")}, then ${run("workflow show <run id>")}; after the fix, ${run("workflow reset <run id> --node <node>")}`,
  needsHuman: `Run ${run("status")}, then ${run("workflow show <run id>")} or ${run("approvals")}; answer with ${run("workflow resolve")} or ${run("resolve")}`,
  awaitingApproval: `Run ${run("approvals")}, then ${run("approve <id> --step <step>")} or ${run("reject <id> --step <step>")}`,
  handedOff: `Run ${run("status")}, then ${run("trace <conversation id>")}; a person answers the customer`,
  relayFailures: `Run ${run("status")}, then ${run("republish --failures")}`,
  relayBehind: `Run ${run("status")} for the relay's iterator age`,
  sweeperFailures: `Run ${run("status")}; the sweeper's log has the error`,
} as const;
