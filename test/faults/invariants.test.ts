import { describe, expect, it } from "vitest";
import { defineWorkflow } from "../../functions/core/dag/graph";
import type { DagRun } from "../../functions/core/dag/run";
import { InMemoryEventStore } from "../../functions/core/memory";
import { checkInvariants, escalatedSends, type RunFacts } from "../../lib/dev/faults/invariants";
import type { SignalFacts, WorkflowRunFacts } from "../../lib/dev/faults/workflow-invariants";

/**
 * The one invariant checker of both chaos runs (lib/dev/faults/invariants.ts), on facts made by
 * hand: a schedule that went right breaks nothing, and each kind of wrong breaks its invariant.
 * A view that does not fold needs a stored view; the simulation's planted defects (test/sim)
 * show that one, on facts a run gathered.
 */
/** A list of two, then a map over it that tolerates one failure: the second item failed. */
const scoring = defineWorkflow({
  name: "scoring",
  version: 1,
  nodes: [
    { id: "listing", role: "listing" },
    {
      id: "scores",
      role: "scorer",
      map: { items: { node: "listing", path: "words" }, concurrency: 2, maxFailed: 1 },
    },
  ],
  edges: [{ from: "listing", to: "scores" }],
});
const ended = { remaining_upstreams: 0, attempt: 1, assigned_generation: 0 };
const scored = { word: "alpha", score: 7 };
const refused = { code: "scorer.refused", message: "no score" };
const scoringRun: DagRun = {
  run_id: "run_2",
  workflow: { name: "scoring", version: 1 },
  status: "COMPLETED",
  generation: 0,
  input: {},
  nodes: {
    listing: { ...ended, state: "COMPLETED", output: { words: ["alpha", "beta"] } },
    scores: {
      ...ended,
      state: "COMPLETED",
      output: {
        items: [
          { status: "completed", output: scored },
          { status: "failed", error: refused },
        ],
        failed: 1,
      },
    },
  },
};
const scoringFacts: WorkflowRunFacts = {
  id: "run_2",
  definition: scoring,
  run: scoringRun,
  endedAt: 10,
  cancelSentAt: undefined,
  answers: [
    { node: "scores", generation: 0, item: 0, outcome: { output: scored } },
    // The same answer again, for a request sent again after a lease ran out.
    { node: "scores", generation: 0, item: 0, outcome: { output: scored } },
    { node: "scores", generation: 0, item: 1, outcome: { error: refused } },
  ],
};
/** The scoring run with its map node's state replaced. */
const scoresEnded = (scores: Partial<DagRun["nodes"][string]>): WorkflowRunFacts => ({
  ...scoringFacts,
  run: {
    ...scoringRun,
    nodes: { ...scoringRun.nodes, scores: { ...ended, state: "COMPLETED", ...scores } },
  },
});

/** One node polished again until it is good, three rounds at most: good in its second round. */
const polishing = defineWorkflow({
  name: "polishing",
  version: 1,
  nodes: [{ id: "polish", role: "polisher" }],
  edges: [
    {
      from: "polish",
      to: "polish",
      loop: { until: { path: "good", equals: true }, maxRounds: 3 },
    },
  ],
});
const polishingRun = (output: unknown, loop: NonNullable<DagRun["loops"]>[string]): DagRun => ({
  run_id: "run_3",
  workflow: { name: "polishing", version: 1 },
  status: "COMPLETED",
  generation: 1,
  input: {},
  nodes: { polish: { ...ended, attempt: 2, assigned_generation: 1, state: "COMPLETED", output } },
  loops: { polish: loop },
});
const polishAnswers = [0, 1].map((generation) => ({
  node: "polish",
  generation,
  outcome: { output: { good: generation === 1 } },
}));
const polishingFacts: WorkflowRunFacts = {
  id: "run_3",
  endedAt: 11,
  cancelSentAt: undefined,
  definition: polishing,
  run: polishingRun({ good: true }, { round: 2, ended: "condition" }),
  answers: polishAnswers,
};

/** A review whose one node is the scoring run above, as its child (log positions 10 and 12). */
const review = defineWorkflow({
  name: "review",
  version: 1,
  nodes: [{ id: "scoring", workflow: { name: "scoring" } }],
  edges: [],
});
const reviewRun = (status: DagRun["status"], node: DagRun["nodes"][string]): DagRun => ({
  run_id: "run_4",
  workflow: { name: "review", version: 1 },
  status,
  generation: 0,
  input: {},
  nodes: { scoring: node },
});
const reviewFacts: WorkflowRunFacts = {
  id: "run_4",
  definition: review,
  run: reviewRun("COMPLETED", {
    ...ended,
    state: "COMPLETED",
    output: { status: "COMPLETED", outputs: {} },
  }),
  endedAt: 12,
  cancelSentAt: undefined,
  answers: [],
};
const childFacts: WorkflowRunFacts = {
  ...scoringFacts,
  parent: { run_id: "run_4", node_id: "scoring", generation: 0 },
};

/** A wait for signal `approved`: released by it, then the same signal again, unmatched. */
const approval = defineWorkflow({
  name: "approval",
  version: 1,
  nodes: [{ id: "approval", wait: { signal: "approved", seconds: 90 } }],
  edges: [],
});
const released = { released_by: "signal", signal: "approved", payload: {} };
const approvalRun = (node: DagRun["nodes"][string]): DagRun => ({
  run_id: "run_6",
  workflow: { name: "approval", version: 1 },
  status: node.state === "RUNNING" ? "RUNNING" : "COMPLETED",
  generation: 0,
  input: {},
  nodes: { approval: node },
});
const releasedBySignal = {
  node: "approval",
  generation: 0,
  state: "COMPLETED",
  releasedBy: "signal",
  cause: "workflow.signal.requested",
};
const unmatched: NonNullable<SignalFacts["applied"]> = {
  waiting: [],
  released: [],
  unmatched: true,
  runChanged: false,
  timedOut: [],
};
const approvalFacts: WorkflowRunFacts = {
  id: "run_6",
  definition: approval,
  run: approvalRun({ ...ended, state: "COMPLETED", output: released }),
  endedAt: 14,
  cancelSentAt: undefined,
  answers: [],
  waitEnds: [releasedBySignal],
  signals: [
    {
      key: "approved",
      applied: { ...unmatched, waiting: ["approval"], released: ["approval"], unmatched: false },
    },
    { key: "approved", applied: { ...unmatched, runChanged: false } },
    // Sent before the run started: refused, no state recorded it.
    { key: "approved" },
  ],
};

const right: RunFacts = {
  store: new InMemoryEventStore(),
  groups: [
    { name: "audit", subscriptions: ["task.accepted", "conversation.message.received"] },
    { name: "sender", subscriptions: ["conversation.message.received"] },
  ],
  events: [
    { eventId: "e1", eventType: "task.accepted" },
    { eventId: "e2", eventType: "conversation.message.received" },
  ],
  applied: [
    { group: "audit", eventId: "e1" },
    { group: "audit", eventId: "e2" },
    { group: "sender", eventId: "e2" },
  ],
  settled: [
    { group: "audit", eventId: "e1" },
    { group: "audit", eventId: "e2" },
    { group: "sender", eventId: "e2" },
  ],
  deadLetters: [{ group: "audit", what: "not an envelope", poison: true }],
  runs: [{ id: "run_1", ended: true, status: "COMPLETED" }],
  replies: [{ key: "task_2:reply:1" }],
  conversations: [{ id: "conv_1", sent: 2, accepted: ["task_1", "task_2"] }],
  tasks: [],
  conversationStreams: [],
  refunds: [
    { orderId: "A-1002", count: 1, onRecord: false, orderStatus: "cancelled" },
    { orderId: "123", count: 0, onRecord: true, orderStatus: "returned" },
  ],
  refundsMade: [{ key: "task_1:rrun_1:call_2_1", orderId: "A-1002", reviewOf: "A-1002" }],
  awaitingPerson: [],
  workflowRuns: [childFacts, polishingFacts, reviewFacts, approvalFacts],
};

const broken = async (facts: Partial<RunFacts>) =>
  (await checkInvariants({ ...right, ...facts })).map((v) => v.invariant);

describe("the invariants of a chaos schedule", () => {
  it("hold for a schedule that went right", async () => {
    expect(await checkInvariants(right)).toEqual([]);
  });

  it("see each kind of wrong", async () => {
    expect(
      await broken({ applied: [...right.applied, { group: "sender", eventId: "e2" }] }),
    ).toEqual(["applied once"]);
    expect(await broken({ settled: right.settled.slice(1) })).toEqual(["nothing lost"]);
    // A group that receives only unsequenced messages owes no stored event, and every other one.
    const auditOnlyUnsequenced = right.groups.map((g) =>
      g.name === "audit" ? { ...g, unsequencedOnly: true } : g,
    );
    const e1Stored = right.events.map((e) => (e.eventId === "e1" ? { ...e, sequenced: true } : e));
    const withoutAuditE1 = right.settled.slice(1);
    expect(
      await broken({ groups: auditOnlyUnsequenced, events: e1Stored, settled: withoutAuditE1 }),
    ).toEqual([]);
    expect(
      await broken({
        groups: auditOnlyUnsequenced,
        events: e1Stored,
        settled: right.settled.filter((x) => x.group !== "audit" || x.eventId !== "e2"),
      }),
    ).toEqual(["nothing lost"]);
    expect(await broken({ deadLetters: [] })).toEqual(["poison dead-lettered"]);
    expect(
      await broken({
        deadLetters: [...right.deadLetters, { group: "sender", what: "e2", poison: false }],
      }),
    ).toEqual(["only poison dead-lettered"]);
    expect(await broken({ runs: [{ id: "run_1", ended: false, status: "RUNNING" }] })).toEqual([
      "runs end",
    ]);
    expect(await broken({ replies: [...right.replies, { key: "task_2:reply:2" }] })).toEqual([
      "sent once",
    ]);
    expect(await broken({ replies: [{ key: "task_1:reply:1" }] })).toEqual([
      "conversations answered",
    ]);
    expect(
      await broken({ conversations: [{ id: "conv_1", sent: 2, accepted: ["task_2"] }] }),
    ).toEqual(["conversations answered"]);
    // A turn waiting for a person's decision is not unanswered.
    expect(
      await broken({ replies: [{ key: "task_1:reply:1" }], awaitingPerson: ["task_2"] }),
    ).toEqual([]);
    expect(
      await broken({
        refunds: [{ orderId: "A-1002", count: 2, onRecord: false, orderStatus: "cancelled" }],
      }),
    ).toEqual(["refunded once"]);
    // Refunded once, whoever refunded it: the shop's refund on the record counts.
    expect(
      await broken({
        refunds: [{ orderId: "123", count: 1, onRecord: true, orderStatus: "cancelled" }],
      }),
    ).toEqual(["refunded once"]);
    expect(
      await broken({
        refunds: [{ orderId: "A-1002", count: 1, onRecord: false, orderStatus: "placed" }],
      }),
    ).toEqual(["refunded ⇒ cancelled"]);
    expect(
      await broken({
        refundsMade: [{ key: "task_1:rrun_1:call_2_1", orderId: "A-1002", reviewOf: "123" }],
      }),
    ).toEqual(["refunds only the reviewed order"]);
  });

  it("take a send the sender escalated, its outcome unknown, as a turn waiting for a person", async () => {
    const store = new InMemoryEventStore();
    const delivery = (taskId: string, outcome: string) =>
      store.states.set(`delivery#${taskId}`, {
        aggregate: { type: "delivery", id: taskId },
        revision: 1,
        version: 1,
        data: { keys: { [`${taskId}:reply:1`]: { outcome, at: "2026-09-01T10:00:00.000Z" } } },
      });
    delivery("task_2", "escalated");
    delivery("task_3", "failed");
    const waiting = await escalatedSends(store, ["task_2", "task_3", "task_4", "task_2"]);
    expect(waiting).toEqual(["task_2"]);
    expect(await broken({ replies: [{ key: "task_1:reply:1" }], awaitingPerson: waiting })).toEqual(
      [],
    );
    // A send that failed for good is no hand-off: the turn is unanswered.
    const failed = await escalatedSends(store, ["task_3"]);
    expect(await broken({ replies: [{ key: "task_1:reply:1" }], awaitingPerson: failed })).toEqual([
      "conversations answered",
    ]);
  });

  it("see a map item run twice, and a map node that ended out of order or over its tolerance", async () => {
    const again = {
      node: "scores",
      generation: 0,
      item: 0,
      outcome: { output: { ...scored, score: 3 } },
    };
    expect(
      await broken({
        workflowRuns: [{ ...scoringFacts, answers: [...scoringFacts.answers, again] }],
      }),
    ).toEqual(["step run once"]);
    const swapped = [
      { status: "failed", error: refused },
      { status: "completed", output: scored },
    ];
    expect(
      await broken({ workflowRuns: [scoresEnded({ output: { items: swapped, failed: 1 } })] }),
    ).toEqual(["map ended in order"]);
    const bothFailed = [
      { status: "failed", error: refused },
      { status: "failed", error: refused },
    ];
    expect(
      await broken({ workflowRuns: [scoresEnded({ output: { items: bothFailed, failed: 2 } })] }),
    ).toEqual(["map ended in order"]);
    expect(
      await broken({
        workflowRuns: [scoresEnded({ output: { items: swapped.slice(1), failed: 0 } })],
      }),
    ).toEqual(["map ended in order"]);
    expect(
      await broken({
        workflowRuns: [
          scoresEnded({ state: "FAILED", error: { code: "agent_run.crashed", message: "" } }),
        ],
      }),
    ).toEqual(["map ended in order"]);
    // Over its tolerance, the node failed: as it should (the polishing run goes right throughout).
    expect(
      await broken({
        workflowRuns: [
          scoresEnded({ state: "FAILED", error: { code: "dag.map_failed", message: "" } }),
        ],
      }),
    ).toEqual([]);
  });

  it("see a loop that ran more rounds than its maximum or did not end as it says", async () => {
    const loopBroken = (facts: Partial<WorkflowRunFacts>) =>
      broken({ workflowRuns: [scoringFacts, { ...polishingFacts, ...facts }] });
    const fourRounds = [0, 1, 2, 3].map((generation) => ({
      node: "polish",
      generation,
      outcome: { output: { good: generation === 3 } },
    }));
    expect(await loopBroken({ answers: fourRounds })).toEqual(["loop within its rounds"]);
    expect(
      await loopBroken({ run: polishingRun({ good: false }, { round: 2, ended: "condition" }) }),
    ).toEqual(["loop within its rounds"]);
    expect(
      await loopBroken({ run: polishingRun({ good: false }, { round: 2, ended: "max_rounds" }) }),
    ).toEqual(["loop within its rounds"]);
    expect(await loopBroken({ run: polishingRun({ good: true }, { round: 2 }) })).toEqual([
      "loop within its rounds",
    ]);
    // At its maximum without the condition, under onMax "complete": as it should.
    expect(
      await loopBroken({ run: polishingRun({ good: false }, { round: 3, ended: "max_rounds" }) }),
    ).toEqual([]);
  });

  it("see a child that ended after its parent's node, or ran on past its parent's cancel", async () => {
    const childBroken = (child: Partial<WorkflowRunFacts>, parent: Partial<WorkflowRunFacts>) =>
      broken({
        workflowRuns: [
          { ...childFacts, ...child },
          { ...reviewFacts, ...parent },
        ],
      });
    expect(await childBroken({ endedAt: 13 }, {})).toEqual(["child ended first"]);
    expect(await childBroken({ run: { ...scoringRun, status: "PARTIAL" } }, {})).toEqual([
      "child ended first",
    ]);
    const cancelled = reviewRun("CANCELLED", { ...ended, state: "CANCELLED" });
    expect(
      await childBroken(
        { run: { ...scoringRun, status: "RUNNING" }, endedAt: undefined, cancelSentAt: 12 },
        { run: cancelled },
      ),
    ).toEqual(["child ended first"]);
    expect(await childBroken({ endedAt: 14, cancelSentAt: 12 }, { run: cancelled })).toEqual([
      "child ended first",
    ]);
    // Ended before its parent's cancel was sent, or cancelled by it: as it should.
    expect(await childBroken({ endedAt: 10, cancelSentAt: 12 }, { run: cancelled })).toEqual([]);
    expect(
      await childBroken(
        { run: { ...scoringRun, status: "CANCELLED" }, endedAt: 14, cancelSentAt: 12 },
        { run: cancelled },
      ),
    ).toEqual([]);
  });

  it("see a child node's assignment that started two child runs", async () => {
    const again = { ...childFacts, id: "run_5" };
    expect(
      await broken({ workflowRuns: [childFacts, again, polishingFacts, reviewFacts] }),
    ).toEqual(["child started once"]);
  });

  it("see a wait that ended twice, or not as what ended it says, or runs on in an ended run", async () => {
    const waitBroken = (facts: Partial<WorkflowRunFacts>) =>
      broken({ workflowRuns: [{ ...approvalFacts, ...facts }] });
    const deadline = { ...releasedBySignal, state: "FAILED", cause: "node.wait.expired" };
    const timedOut = { ...deadline, releasedBy: undefined, error: "dag.wait_deadline" };
    expect(await waitBroken({ waitEnds: [releasedBySignal, timedOut] })).toEqual([
      "wait released once",
    ]);
    expect(
      await waitBroken({ waitEnds: [{ ...releasedBySignal, cause: "node.wait.expired" }] }),
    ).toEqual(["wait released once"]);
    expect(
      await waitBroken({ waitEnds: [{ ...timedOut, cause: "workflow.signal.requested" }] }),
    ).toEqual(["wait released once"]);
    const runningInEnded = { ...approvalRun({ ...ended, state: "RUNNING" }), status: "FAILED" };
    expect(await waitBroken({ run: runningInEnded as DagRun, waitEnds: [] })).toEqual([
      "wait released once",
    ]);
    // Timed out, once, on the sweeper's report: as it should.
    expect(await waitBroken({ waitEnds: [timedOut] })).toEqual([]);
  });

  it("see a signal that released what did not wait for it, or changed a run nothing in it waited on", async () => {
    const signalBroken = (applied: Partial<typeof unmatched>) =>
      broken({
        workflowRuns: [
          {
            ...approvalFacts,
            signals: [{ key: "approved", applied: { ...unmatched, ...applied } }],
          },
        ],
      });
    // A late signal that revived a wait its deadline had failed.
    expect(await signalBroken({ released: [], runChanged: true, timedOut: ["approval"] })).toEqual([
      "signal released what waited",
    ]);
    expect(await signalBroken({ unmatched: false })).toEqual(["signal released what waited"]);
    expect(await signalBroken({ waiting: ["approval"], unmatched: false })).toEqual([
      "signal released what waited",
    ]);
    expect(
      await signalBroken({ waiting: ["approval"], released: ["approval"], runChanged: true }),
    ).toEqual(["signal released what waited"]);
    // Released what waited for it, and recorded nothing unmatched: as it should.
    expect(
      await signalBroken({
        waiting: ["approval"],
        released: ["approval"],
        unmatched: false,
        runChanged: true,
      }),
    ).toEqual([]);
  });
});
