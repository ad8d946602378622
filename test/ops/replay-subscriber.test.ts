import { describe, expect, it } from "vitest";
import { replayDeduplicationId } from "../../functions/core/replay";
import { evaluate, transform } from "../../lib/dev/local/runtime/subscriber-buses";
import {
  pointInTimeReplay,
  type SubscriberDescription,
} from "../../lib/operator/replay-subscriber";

const live: SubscriberDescription = {
  Name: "agentbus-dev-task-projection-events",
  EventBusArn: "arn:aws:events:us-east-1:111122223333:event-busv2/agentbus-dev-events/x",
  Type: "FIFO",
  FilterConfiguration: {
    Filters: [{ Scope: "DATA", Pattern: '{"detail-type":["task.accepted"]}' }],
  },
  InvokeConfiguration: {
    TargetArn: "arn:aws:sqs:us-east-1:111122223333:agentbus-dev-task-projection.fifo",
    RoleArn: "arn:aws:iam::111122223333:role/delivery",
    SqsParameters: { MessageGroupId: "{% $events.Data.detail.order_key %}" },
  },
  OnFailureConfiguration: { Arn: "arn:aws:sqs:us-east-1:111122223333:dlq" },
};
const window = { from: new Date("2026-12-01T10:00:00Z"), to: new Date("2026-12-01T11:00:30.5Z") };

describe("a point-in-time subscriber as agentbus replay's request", () => {
  const request = pointInTimeReplay(live, "agentbus-dev-events-0123456789abcdef", window);

  it("copies the live subscriber's filter, target, role, group id and dead letters", () => {
    expect(request.FilterConfiguration).toEqual(live.FilterConfiguration);
    expect(request.InvokeConfiguration).toMatchObject(live.InvokeConfiguration);
    expect(request.OnFailureConfiguration).toEqual(live.OnFailureConfiguration);
    expect(request.EventBusArn).toBe(live.EventBusArn);
  });

  it("reads the window from retention, in whole seconds covering it", () => {
    expect(request.StartingPosition).toBe("POINT_IN_TIME");
    expect(request.PointInTimeConfiguration).toEqual({
      PointType: "TIMESTAMP",
      StartingPoint: Date.parse("2026-12-01T10:00:00Z") / 1000,
      EndPoint: Date.parse("2026-12-01T11:00:31Z") / 1000,
    });
  });

  it("marks what it delivers as the consumer reads a replay, under a deduplication id of its own", () => {
    const event = {
      Data: { "detail-type": "task.accepted", detail: { event_id: "01KB", order_key: "task_1" } },
      SystemMetadata: {},
      publishedAt: 0,
    };
    expect(transform(request.Transformer.JsonataConfiguration.Expression, event)).toEqual({
      ...event.Data,
      "replay-name": request.Name,
    });
    expect(evaluate(request.InvokeConfiguration.SqsParameters.MessageDeduplicationId, event)).toBe(
      replayDeduplicationId("01KB", request.Name),
    );
  });

  it("is the same request, with the same client token, when the command is run again", () => {
    expect(pointInTimeReplay(live, request.Name, window)).toEqual(request);
    expect(pointInTimeReplay(live, `${request.Name}-other`, window).ClientToken).not.toBe(
      request.ClientToken,
    );
    expect(() => pointInTimeReplay(live, "-bad name", window)).toThrow(/not one EventBridge takes/);
  });
});
