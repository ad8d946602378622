import { GetMetricDataCommand } from "@aws-sdk/client-cloudwatch";
import { GetQueueAttributesCommand, type SQSClient } from "@aws-sdk/client-sqs";
import { LEASE_EXPIRED_METRIC, SWEEPER_PRODUCER } from "../../functions/core/sweeper";
import { featuresOf } from "../../functions/roles/stack-features";
import { rolesOfGroups } from "./groups";
import { summaries, unknownSideEffects } from "./lists";
import type { OpsStack } from "./stack";
import type { GroupStatusView, StatusView, WaitingView } from "./views";

/** How many runs `status` counts by status: the newest started (the by-kind-listed index). */
const RUN_WINDOW = 200;

async function depthOf(
  sqs: SQSClient,
  url: string,
): Promise<{ visible: number; inFlight: number }> {
  const { Attributes = {} } = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: url,
      AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    }),
  );
  return {
    visible: Number(Attributes.ApproximateNumberOfMessages ?? 0),
    inFlight: Number(Attributes.ApproximateNumberOfMessagesNotVisible ?? 0),
  };
}

const queueNameOf = (url: string) => url.slice(url.lastIndexOf("/") + 1);

/**
 * The newest datapoint (maximum over 5 minutes, last 15 minutes) of each metric; undefined where
 * CloudWatch has none (a quiet queue, or an emulator without metrics).
 */
async function latest(
  stack: OpsStack,
  queries: readonly {
    id: string;
    namespace: string;
    metric: string;
    dimension: [string, string];
  }[],
): Promise<Map<string, number>> {
  const found = new Map<string, number>();
  if (queries.length === 0) return found;
  const end = new Date();
  try {
    for (let i = 0; i < queries.length; i += 500) {
      const out = await stack.cloudwatch.send(
        new GetMetricDataCommand({
          StartTime: new Date(end.getTime() - 15 * 60_000),
          EndTime: end,
          MetricDataQueries: queries.slice(i, i + 500).map((q) => ({
            Id: q.id,
            MetricStat: {
              Metric: {
                Namespace: q.namespace,
                MetricName: q.metric,
                Dimensions: [{ Name: q.dimension[0], Value: q.dimension[1] }],
              },
              Period: 300,
              Stat: "Maximum",
            },
          })),
        }),
      );
      for (const r of out.MetricDataResults ?? [])
        if (r.Id && r.Values?.length) found.set(r.Id, r.Values[0] as number);
    }
  } catch {
    // No CloudWatch (or no permission to read it): the ages stay unknown.
  }
  return found;
}

async function groupStatus(stack: OpsStack): Promise<GroupStatusView[]> {
  const entries = Object.entries(stack.names.groups);
  const ages = await latest(
    stack,
    entries.map(([, urls], i) => ({
      id: `age${i}`,
      namespace: "AWS/SQS",
      metric: "ApproximateAgeOfOldestMessage",
      dimension: ["QueueName", queueNameOf(urls.queue)],
    })),
  );
  return Promise.all(
    entries.map(async ([group, urls], i) => {
      const [queue, dlq, buffer, bufferDlq] = await Promise.all([
        depthOf(stack.sqs, urls.queue),
        depthOf(stack.sqs, urls.deadLetterQueue),
        urls.buffer ? depthOf(stack.sqs, urls.buffer) : undefined,
        urls.bufferDeadLetterQueue ? depthOf(stack.sqs, urls.bufferDeadLetterQueue) : undefined,
      ]);
      const age = ages.get(`age${i}`);
      return {
        group,
        depth: queue.visible,
        inFlight: queue.inFlight,
        ...(age !== undefined ? { oldestAgeSeconds: age } : {}),
        deadLetters: dlq.visible + dlq.inFlight,
        ...(buffer ? { bufferDepth: buffer.visible + buffer.inFlight } : {}),
        ...(bufferDlq ? { bufferDeadLetters: bufferDlq.visible + bufferDlq.inFlight } : {}),
      };
    }),
  );
}

/**
 * When the lease sweeper last got through a sweep (the newest datapoint of `LeaseExpired`, which
 * every such sweep publishes, within the last hour); undefined without one or without CloudWatch.
 */
export async function lastSweep(stack: OpsStack): Promise<string | undefined> {
  const end = new Date();
  try {
    const out = await stack.cloudwatch.send(
      new GetMetricDataCommand({
        StartTime: new Date(end.getTime() - 60 * 60_000),
        EndTime: end,
        MetricDataQueries: [
          {
            Id: "sweeps",
            MetricStat: {
              Metric: {
                Namespace: "AgentBus",
                MetricName: LEASE_EXPIRED_METRIC,
                Dimensions: [{ Name: "service", Value: SWEEPER_PRODUCER }],
              },
              Period: 60,
              Stat: "SampleCount",
            },
          },
        ],
      }),
    );
    return out.MetricDataResults?.[0]?.Timestamps?.[0]?.toISOString();
  } catch {
    return undefined;
  }
}

/** What waits for a person, the newest waits first; with `tenant`, that tenant's only. */
export async function waiting(stack: OpsStack, limit = 50, tenant?: string): Promise<WaitingView> {
  const [heldReplies, unknown, awaitingApproval, needsHuman, failedRuns, handedOff] =
    await Promise.all([
      summaries(stack, { waiting: "held_reply" }, limit, { tenant }),
      unknownSideEffects(stack, limit, tenant),
      summaries(stack, { waiting: "approval" }, limit, { tenant }),
      summaries(stack, { waiting: "needs_human" }, limit, { tenant }),
      summaries(stack, { waiting: "failed_run" }, limit, { tenant }),
      summaries(stack, { waiting: "handed_off" }, limit, { tenant }),
    ]);
  return {
    heldReplies,
    unknownSideEffects: unknown,
    awaitingApproval,
    needsHuman,
    failedRuns,
    handedOff,
  };
}

/**
 * Queues, relay, runs by status and what waits for a person, read from the stack; with `tenant`,
 * the runs and what waits are that tenant's (the queues are shared by every tenant). The runs are
 * read where the stack has them (its features, as its groups' roles describe them).
 */
export async function status(
  stack: OpsStack,
  waitingNow?: WaitingView,
  tenant?: string,
): Promise<StatusView> {
  const relayFunction = stack.outputs.RelayFunctionName;
  const features = featuresOf(rolesOfGroups(stack.groups));
  const hasRuns = features.includes("runs");
  const [groups, relayFailures, runs, w, relay, sweptAt] = await Promise.all([
    groupStatus(stack),
    depthOf(stack.sqs, stack.names.relayFailureQueue),
    hasRuns ? summaries(stack, { kind: "run" }, RUN_WINDOW, { tenant }) : [],
    waitingNow ?? waiting(stack, 1000, tenant),
    relayFunction
      ? latest(stack, [
          {
            id: "relay",
            namespace: "AWS/Lambda",
            metric: "IteratorAge",
            dimension: ["FunctionName", relayFunction],
          },
        ])
      : new Map<string, number>(),
    hasRuns ? lastSweep(stack) : undefined,
  ]);
  const runsByStatus: Record<string, number> = {};
  for (const r of runs) runsByStatus[r.status] = (runsByStatus[r.status] ?? 0) + 1;
  const heldCount = w.heldReplies.reduce(
    (n, c) => n + ((c as { counts?: Record<string, number> }).counts?.held ?? 1),
    0,
  );
  const failedNodes = w.failedRuns.reduce(
    (n, c) => n + ((c as { counts?: Record<string, number> }).counts?.failed_nodes ?? 0),
    0,
  );
  const age = relay.get("relay");
  return {
    features,
    groups,
    ...(age !== undefined ? { relayIteratorAgeMs: age } : {}),
    relayFailures: relayFailures.visible + relayFailures.inFlight,
    ...(sweptAt ? { lastSweepAt: sweptAt } : {}),
    runsByStatus,
    counts: {
      heldReplies: heldCount,
      unknownSideEffects: w.unknownSideEffects.length,
      awaitingApproval: w.awaitingApproval.length,
      needsHumanNodes: w.needsHuman.length,
      failedNodes,
      handedOff: w.handedOff.length,
    },
  };
}
