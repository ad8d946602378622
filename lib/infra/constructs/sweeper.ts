import { Duration } from "aws-cdk-lib";
import { Alarm, ComparisonOperator, Metric, TreatMissingData } from "aws-cdk-lib/aws-cloudwatch";
import { type IRuleTarget, Rule, Schedule } from "aws-cdk-lib/aws-events";
import { LambdaFunction } from "aws-cdk-lib/aws-events-targets";
import { Construct } from "constructs";
import { APPROVAL_DEADLINE_NEAR_METRIC, SWEEPER_PRODUCER } from "../../../functions/core/sweeper";
import { HUB_HANDLERS } from "../hub-handlers";
import { ALARM_ACTIONS } from "./alarm-commands";
import { AgentBusFunction, METRICS_NAMESPACE } from "./function";
import type { AgentBusTables } from "./tables";
import type { Topic } from "./topic";

export interface LeaseSweeperProps {
  readonly tables: AgentBusTables;
  /** The buses the sweeper reports on: commands (release nudges) and events (lease expiries). */
  readonly topics: readonly Topic[];
  /**
   * How often the sweeper runs.
   * @default Duration.minutes(1)
   */
  readonly rate?: Duration;
  /**
   * @default Duration.seconds(60)
   */
  readonly functionTimeout?: Duration;
  /**
   * How long before its deadline an approval or confirmation still waiting alarms (whole
   * seconds; 0 turns the warning off).
   * @default Duration.minutes(10)
   */
  readonly approvalWarning?: Duration;
}

/** The `service` dimension of the sweeper's metrics (its Powertools service name). */
export const SWEEPER_SERVICE = SWEEPER_PRODUCER;
/** Minutes in a row with a failed sweep before the failure alarm fires. */
const FAILING_MINUTES = 5;

/**
 * The lease sweeper: a function (`agentbus:kind` sweeper) run by an EventBridge schedule rule on
 * the default bus. It reads the state table's by-due index, loads the due DAG runs and puts
 * `node.lease.expired` / `workflow.release.requested` on their topics' buses. It may Query that
 * one index, GetItem / BatchGetItem state items and PutEvents on the given buses; nothing else.
 */
export class LeaseSweeper extends Construct {
  readonly function: AgentBusFunction;
  readonly schedule: Rule;
  /** Sweeps have failed every minute for FAILING_MINUTES minutes. */
  readonly failureAlarm: Alarm;
  /** An approval or confirmation is still waiting within `approvalWarning` of its deadline. */
  readonly deadlineNearAlarm: Alarm;
  /** Every alarm of the sweeper. */
  readonly alarms: readonly Alarm[];

  constructor(scope: Construct, id: string, props: LeaseSweeperProps) {
    super(scope, id);
    if (props.topics.length === 0) throw new Error("sweeper: topics must not be empty");
    const rate = props.rate ?? Duration.minutes(1);
    const warning = props.approvalWarning ?? Duration.minutes(10);
    // The handler counts a report's attempt in sweeps: it needs the schedule's period.
    const environment: Record<string, string> = {
      STATE_TABLE: props.tables.state.tableName,
      SWEEP_RATE_SECONDS: String(rate.toSeconds()),
      APPROVAL_WARNING_SECONDS: String(warning.toSeconds()),
    };
    for (const topic of props.topics)
      environment[`BUS_${topic.topicName.toUpperCase()}`] = topic.busName;
    this.function = new AgentBusFunction(this, "Resource", {
      kind: "sweeper",
      entry: HUB_HANDLERS.sweeper,
      serviceName: SWEEPER_SERVICE,
      description: "AgentBus lease sweeper: expired node leases and held runs -> bus",
      timeout: props.functionTimeout ?? Duration.seconds(60),
      environment,
    });
    props.tables.grantSweeper(this.function);
    for (const topic of props.topics) topic.grantPutEvents(this.function);

    const target: IRuleTarget = new LambdaFunction(this.function, { retryAttempts: 2 });
    this.schedule = new Rule(this, "Schedule", {
      description: "AgentBus: run the lease sweeper",
      schedule: Schedule.rate(rate),
      targets: [target],
    });
    this.failureAlarm = this.createFailureAlarm();
    this.deadlineNearAlarm = this.createDeadlineNearAlarm(warning);
    this.alarms = [this.failureAlarm, this.deadlineNearAlarm];
  }

  /** Errors in every one-minute period for FAILING_MINUTES minutes: the sweeper keeps failing. */
  private createFailureAlarm(): Alarm {
    return new Alarm(this, "FailureAlarm", {
      metric: this.function.metricErrors({ statistic: "Sum", period: Duration.minutes(1) }),
      threshold: 0,
      comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: FAILING_MINUTES,
      datapointsToAlarm: FAILING_MINUTES,
      treatMissingData: TreatMissingData.NOT_BREACHING,
      alarmDescription: `lease sweeper: every sweep failed for ${FAILING_MINUTES} minutes (leases and deadlines go unreported). ${ALARM_ACTIONS.sweeperFailures}.`,
    });
  }

  /** The sweeper counted a wait for a person near its deadline in its last sweeps. */
  private createDeadlineNearAlarm(warning: Duration): Alarm {
    return new Alarm(this, "DeadlineNearAlarm", {
      metric: new Metric({
        namespace: METRICS_NAMESPACE,
        metricName: APPROVAL_DEADLINE_NEAR_METRIC,
        dimensionsMap: { service: SWEEPER_SERVICE },
        statistic: "Maximum",
        period: Duration.minutes(1),
      }),
      threshold: 0,
      comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: TreatMissingData.NOT_BREACHING,
      alarmDescription: `BLOCKED runs less than ${warning.toHumanString()} from their approval's deadline (then the call is refused or the node fails). ${ALARM_ACTIONS.awaitingApproval}.`,
    });
  }
}
