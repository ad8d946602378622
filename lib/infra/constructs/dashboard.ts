import { Duration } from "aws-cdk-lib";
import {
  Dashboard as CloudWatchDashboard,
  GraphWidget,
  type IMetric,
  type IWidget,
  type Metric,
  type MetricOptions,
  TextWidget,
} from "aws-cdk-lib/aws-cloudwatch";
import { Construct } from "constructs";
import type { ConsumerGroup } from "./consumer-group";
import { DISCARD_REASONS } from "./consumer-group-monitoring";
import { stageProblem } from "./consumer-group-rules";
import type { Relay } from "./relay";

export interface DashboardProps {
  /** The consumer groups to show, one row each. */
  readonly groups: readonly ConsumerGroup[];

  /** The outbox relay, shown in the first row. */
  readonly relay: Relay;

  /**
   * Deployment stage; part of the dashboard name.
   * @default "dev"
   */
  readonly stage?: string;

  /**
   * Name of the CloudWatch dashboard.
   * @default "agentbus-<stage>"
   */
  readonly dashboardName?: string;

  /**
   * Period of the counted (Sum) metrics.
   * @default Duration.minutes(5)
   */
  readonly period?: Duration;
}

const WIDGET_HEIGHT = 6;
/** Six widgets of width 4 fill a row of the dashboard's 24 columns. */
const GROUP_WIDGET_WIDTH = 4;
const RELAY_WIDGET_WIDTH = 6;

/**
 * One CloudWatch dashboard for AgentBus: the relay (stream iterator age with its alarm threshold,
 * events relayed, PutEvents calls, entries retried, failure queue), then per consumer group a row
 * with its throughput (applied, rejected, dead-lettered, retried), duplicates, discards by reason,
 * version gaps repaired, dead-letter queue depths and the age of the oldest waiting message, and
 * a row with its queue depth, consumer lag, processing time, what it emitted that a person must
 * act on (unknown side-effect outcomes, held replies, failed runs, NEEDS_HUMAN agent runs; for
 * the groups watched for them) and, for the groups that call a model, model latency and tokens.
 *
 * The consumer metrics are the handlers' Powertools EMF metrics in namespace `AgentBus`
 * (dimensions `service` and `consumer_group`, plus `reason` on `DiscardedByReason`); the queue
 * metrics are SQS's, the iterator age Lambda's.
 */
export class Dashboard extends Construct {
  readonly dashboard: CloudWatchDashboard;

  constructor(scope: Construct, id: string, props: DashboardProps) {
    super(scope, id);
    const stage = props.stage ?? "dev";
    const problem = stageProblem(stage, "dashboard: stage");
    if (problem) throw new Error(problem);
    const dashboardName = props.dashboardName ?? `agentbus-${stage}`;
    if (!/^[A-Za-z0-9_-]{1,255}$/.test(dashboardName)) {
      throw new Error(
        `dashboard: dashboardName ${JSON.stringify(dashboardName)} must be 1-255 characters of A-Z, a-z, 0-9, - and _`,
      );
    }
    const period = props.period ?? Duration.minutes(5);
    const counted = (metric: Metric, label: string): IMetric => metric.with({ period, label });

    this.dashboard = new CloudWatchDashboard(this, "Resource", { dashboardName });
    this.dashboard.addWidgets(heading(`AgentBus ${stage}: outbox relay`));
    this.dashboard.addWidgets(...relayWidgets(props.relay, counted));
    for (const group of props.groups) {
      this.dashboard.addWidgets(
        heading(
          `Consumer group ${group.groupName} (${group.ordering === "fifo" ? `FIFO, ${group.delivery}` : "unordered"})`,
        ),
      );
      this.dashboard.addWidgets(...groupWidgets(group, counted));
      this.dashboard.addWidgets(...groupTimingWidgets(group, counted));
    }
  }
}

type Counted = (metric: Metric, label: string) => IMetric;

function heading(text: string): TextWidget {
  return new TextWidget({ markdown: `### ${text}`, width: 24, height: 1 });
}

function relayWidgets(relay: Relay, counted: Counted): IWidget[] {
  const graph = (title: string, left: IMetric[]) =>
    new GraphWidget({ title, left, width: RELAY_WIDGET_WIDTH, height: WIDGET_HEIGHT });
  return [
    new GraphWidget({
      title: "relay: stream iterator age (ms)",
      left: [relay.metricIteratorAge({ label: "IteratorAge" })],
      leftAnnotations: [relay.iteratorAgeAlarm.toAnnotation()],
      width: RELAY_WIDGET_WIDTH,
      height: WIDGET_HEIGHT,
    }),
    graph("relay: events relayed and PutEvents calls", [
      counted(relay.metricRelayed(), "Relayed"),
      counted(relay.metricPutEventsCalls(), "PutEventsCalls"),
    ]),
    graph("relay: entries retried", [counted(relay.metricRetriedEntries(), "RelayRetriedEntries")]),
    graph("relay: failed batches (failure queue)", [
      relay.metricFailureDepth({ label: "failure queue depth" }),
    ]),
  ];
}

/** A graph of one group's row, its title prefixed with the group's name. */
function groupGraph(name: string) {
  return (title: string, left: IMetric[]) =>
    new GraphWidget({
      title: `${name}: ${title}`,
      left,
      width: GROUP_WIDGET_WIDTH,
      height: WIDGET_HEIGHT,
    });
}

function groupWidgets(group: ConsumerGroup, counted: Counted): IWidget[] {
  const graph = groupGraph(group.groupName);
  const bufferDepth = group.metricBufferDeadLetterDepth({ label: "buffer DLQ" });
  const bufferAge = group.metricBufferApproximateAgeOfOldestMessage({ label: "buffer" });
  return [
    graph("throughput", [
      counted(group.metricApplied(), "Applied"),
      counted(group.metricRejected(), "Rejected"),
      counted(group.metricDeadLettered(), "DeadLettered"),
      counted(group.metricRetried(), "Retried"),
    ]),
    graph("duplicates", [counted(group.metricDuplicates(), "Duplicate")]),
    graph(
      "discards by reason",
      DISCARD_REASONS.map((reason) => counted(group.metricDiscarded(reason), reason)),
    ),
    graph("version gaps repaired", [counted(group.metricGapsRepaired(), "GapRepaired")]),
    graph("dead-letter queue depth", [
      group.metricDeadLetterDepth({ label: "DLQ" }),
      ...(bufferDepth ? [bufferDepth] : []),
    ]),
    graph("oldest message age (s)", [
      group.metricApproximateAgeOfOldestMessage({ label: "queue" }),
      ...(bufferAge ? [bufferAge] : []),
    ]),
  ];
}

/** Statistics of the timing graphs. */
const PERCENTILES = ["p50", "p99", "Maximum"] as const;

/**
 * The second row of a group: queue depth, consumer lag and processing time (p50, p99, maximum),
 * what the consumer emitted that a person must act on, and the model's latency and tokens.
 */
function groupTimingWidgets(group: ConsumerGroup, counted: Counted): IWidget[] {
  const graph = groupGraph(group.groupName);
  const timing = (metric: (options: MetricOptions) => Metric) =>
    PERCENTILES.map((statistic) => metric({ statistic, label: statistic }));
  const bufferDepth = group.metricBufferQueueDepth({ label: "buffer" });
  const widgets = [
    graph("queue depth (messages waiting)", [
      group.metricQueueDepth({ label: "queue" }),
      ...(bufferDepth ? [bufferDepth] : []),
    ]),
    graph(
      "consumer lag (ms)",
      timing((o) => group.metricConsumerLag(o)),
    ),
    graph(
      "processing time (ms)",
      timing((o) => group.metricProcessingTime(o)),
    ),
  ];
  if (group.attention.length > 0) {
    widgets.push(
      graph(
        "needs a person",
        group.attention.map((signal) => counted(group.metricAttention(signal), signal.name)),
      ),
    );
  }
  if (group.model) {
    widgets.push(
      graph(
        "model latency (ms)",
        timing((o) => group.metricModelLatency(o)),
      ),
      graph("model tokens", [
        counted(group.metricModelTokens("input"), "input"),
        counted(group.metricModelTokens("output"), "output"),
      ]),
    );
  }
  return widgets;
}
