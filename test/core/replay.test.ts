import { describe, expect, it } from "vitest";
import { dispatch } from "../../functions/core/dispatch";
import { consume } from "../../functions/core/pipeline";
import type { DeadLetterSink, FifoMessage, FifoSender } from "../../functions/core/ports";
import {
  deliveryOf,
  pastDedupHorizon,
  replayDeduplicationId,
  replayedBody,
} from "../../functions/core/replay";
import {
  type TaskView,
  taskProjection,
} from "../../functions/roles/task-projection/task-projection";
import { registry } from "../../schemas";
import { feedback, makeDeps, newTaskId, seedTask } from "./fixtures";

const DAY = 86_400_000;
const HORIZON_SECONDS = 7 * 86_400;
const options = (replay?: { name: string; time?: string }) => ({
  inboxTtlSeconds: HORIZON_SECONDS,
  ...(replay ? { replay } : {}),
});

const viewOf = (store: ReturnType<typeof makeDeps>["store"], taskId: string) =>
  store.states.get(`task_view#${taskId}`)?.data as TaskView | undefined;

/**
 * Archive replays never apply an effect twice. Stream events are guarded by the group's checkpoint,
 * which never expires; an unsequenced message by its inbox row, which lives as long as the inbox's
 * time to live: a replayed one older than that is discarded as expired, while a message that is
 * not a replay (a dead letter redriven days later) is still applied.
 */
describe("replayed unsequenced messages and the dedup horizon", () => {
  it("within the horizon a replay is a duplicate (the inbox row is there)", async () => {
    const { deps, clock } = makeDeps();
    const [accepted] = await seedTask(deps, 1);
    const taskId = accepted?.aggregate.id ?? "";
    await consume(accepted, taskProjection, deps, options());
    const rating = feedback(taskId, 4, { occurred_at: clock.now().toISOString() });
    expect((await consume(rating, taskProjection, deps, options())).status).toBe("applied");
    clock.advance(6 * DAY);
    const replayed = await consume(rating, taskProjection, deps, options({ name: "r1" }));
    expect(replayed.status).toBe("duplicate");
  });

  it("past the horizon a replay is discarded as expired, where without the mark it would apply twice", async () => {
    const { deps, clock, store } = makeDeps();
    const [accepted] = await seedTask(deps, 1);
    const taskId = accepted?.aggregate.id ?? "";
    await consume(accepted, taskProjection, deps, options());
    const rating = feedback(taskId, 4, { occurred_at: clock.now().toISOString() });
    await consume(rating, taskProjection, deps, options());
    expect(viewOf(store, taskId)?.feedback.count).toBe(1);
    clock.advance(8 * DAY); // the inbox row has expired (TTL)

    const replayed = await consume(rating, taskProjection, deps, options({ name: "r1" }));
    expect(replayed).toMatchObject({ status: "discarded", reason: "expired" });
    expect(replayed.steps.at(-1)?.pastHorizon).toBe(true);
    expect(viewOf(store, taskId)?.feedback.count).toBe(1);
    expect(store.inbox.get(`task-projection#${rating.event_id}`)).toMatchObject({
      outcome: "discarded",
      reason: "expired",
    });

    // The negative control: the same old message delivered without the mark is applied again.
    clock.advance(8 * DAY);
    expect((await consume(rating, taskProjection, deps, options())).status).toBe("applied");
    expect(viewOf(store, taskId)?.feedback.count).toBe(2);
  });

  it("a dead letter redriven past the horizon is not a replay: it is applied", async () => {
    const { deps, clock, store } = makeDeps();
    const [accepted] = await seedTask(deps, 1);
    const taskId = accepted?.aggregate.id ?? "";
    await consume(accepted, taskProjection, deps, options());
    const rating = feedback(taskId, 5, { occurred_at: clock.now().toISOString() });
    clock.advance(10 * DAY); // it waited in the dead-letter queue
    expect((await consume(rating, taskProjection, deps, options())).status).toBe("applied");
    expect(viewOf(store, taskId)?.feedback.rating_total).toBe(5);
  });

  it("stream events are kept by the checkpoint, whatever their age: duplicate, or applied once", async () => {
    const { deps, clock, store } = makeDeps();
    const events = await seedTask(deps, 2);
    const [v1, v2] = events;
    await consume(v1, taskProjection, deps, options());
    clock.advance(20 * DAY);
    const mark = { name: "r2", time: v1?.occurred_at };
    expect((await consume(v1, taskProjection, deps, options(mark))).status).toBe("duplicate");
    expect((await consume(v2, taskProjection, deps, options(mark))).status).toBe("applied");
    expect((await consume(v2, taskProjection, deps, options(mark))).status).toBe("duplicate");
    const taskId = v1?.aggregate.id ?? "";
    expect(viewOf(store, taskId)?.history.map((h) => h.version)).toEqual([1, 2]);
  });

  it("judges the age by the earlier of occurred_at and the time on the bus", () => {
    const now = new Date("2026-11-30T12:00:00Z");
    const old = "2026-11-20T12:00:00Z";
    const recent = "2026-11-29T12:00:00Z";
    const message = feedback(newTaskId(), 1, { occurred_at: recent });
    expect(pastDedupHorizon(message, undefined, now, HORIZON_SECONDS)).toBe(false);
    expect(pastDedupHorizon(message, { name: "r" }, now, HORIZON_SECONDS)).toBe(false);
    expect(pastDedupHorizon(message, { name: "r", time: old }, now, HORIZON_SECONDS)).toBe(true);
    const oldMessage = feedback(newTaskId(), 1, { occurred_at: old });
    expect(pastDedupHorizon(oldMessage, { name: "r", time: recent }, now, HORIZON_SECONDS)).toBe(
      true,
    );
  });
});

describe("the replay mark on the way to the consumer", () => {
  it("reads a bare envelope, an EventBridge event, and a replayed one", () => {
    const envelope = feedback(newTaskId(), 2);
    expect(deliveryOf(envelope)).toEqual({ envelope });
    expect(deliveryOf({ "detail-type": "x", detail: envelope })).toEqual({ envelope });
    expect(
      deliveryOf({
        "detail-type": "x",
        detail: envelope,
        time: "2026-11-30T10:00:00Z",
        "replay-name": "r1",
      }),
    ).toEqual({ envelope, replay: { name: "r1", time: "2026-11-30T10:00:00Z" } });
    const body = JSON.parse(replayedBody(envelope, { name: "r1" }, "agentbus.relay"));
    expect(deliveryOf(body)).toEqual({ envelope, replay: { name: "r1" } });
    expect(body.source).toBe("agentbus.relay");
  });

  it("the dispatcher keeps the mark and gives a replay a deduplication id of its own", async () => {
    const envelope = feedback(newTaskId(), 3);
    const sent: FifoMessage[] = [];
    const sender: FifoSender = {
      send: async (messages) => {
        sent.push(...messages);
        return [];
      },
    };
    const deadLetters: DeadLetterSink = { send: async () => {} };
    const item = { envelope, rawBody: "{}", source: "agentbus.client" };
    const replay = { name: "agentbus-t-events-0123456789abcdef", time: "2026-11-30T10:00:00Z" };
    await dispatch(
      [
        { ...item, recordId: "live" },
        { ...item, recordId: "replayed", replay },
      ],
      registry,
      sender,
      deadLetters,
    );
    const [live, replayed] = sent;
    expect(live?.deduplicationId).toBe(envelope.event_id);
    expect(JSON.parse(live?.body ?? "")).toEqual(envelope);
    expect(replayed?.deduplicationId).toBe(replayDeduplicationId(envelope.event_id, replay.name));
    expect(replayed?.deduplicationId).toMatch(/^[0-9A-Z]{26}-[0-9a-f]{16}$/);
    expect(replayed?.groupId).toBe(envelope.order_key);
    expect(deliveryOf(JSON.parse(replayed?.body ?? ""))).toEqual({ envelope, replay });
    expect(replayDeduplicationId(envelope.event_id, "other")).not.toBe(replayed?.deduplicationId);
  });
});
