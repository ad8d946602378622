import { Duration } from "aws-cdk-lib";
import { type IRuleTarget, Rule, Schedule } from "aws-cdk-lib/aws-events";
import { LambdaFunction } from "aws-cdk-lib/aws-events-targets";
import { Construct } from "constructs";
import { AgentBusFunction } from "./function";
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
}

/**
 * The lease sweeper: a function (`agentbus:kind` sweeper) run by an EventBridge schedule rule on
 * the default bus. It reads the state table's by-due index, loads the due DAG runs and puts
 * `node.lease.expired` / `workflow.release.requested` on their topics' buses. It may Query that
 * one index, GetItem / BatchGetItem state items and PutEvents on the given buses; nothing else.
 */
export class LeaseSweeper extends Construct {
  readonly function: AgentBusFunction;
  readonly schedule: Rule;

  constructor(scope: Construct, id: string, props: LeaseSweeperProps) {
    super(scope, id);
    if (props.topics.length === 0) throw new Error("sweeper: topics must not be empty");
    const rate = props.rate ?? Duration.minutes(1);
    // The handler counts a report's attempt in sweeps: it needs the schedule's period.
    const environment: Record<string, string> = {
      STATE_TABLE: props.tables.state.tableName,
      SWEEP_RATE_SECONDS: String(rate.toSeconds()),
    };
    for (const topic of props.topics)
      environment[`BUS_${topic.topicName.toUpperCase()}`] = topic.busName;
    this.function = new AgentBusFunction(this, "Resource", {
      kind: "sweeper",
      entry: "functions/handlers/sweeper.ts",
      serviceName: "lease-sweeper",
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
  }
}
