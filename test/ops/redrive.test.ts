import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageCommand,
  type Message,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import { describe, expect, it } from "vitest";
import { redrive, redriveAuditAction } from "../../lib/operator/redrive";
import type { OpsStack } from "../../lib/operator/stack";

const GROUP = "conversation-projection";
const QUEUE = "https://sqs.local/000000000000/conversation-projection.fifo";
const DLQ = "https://sqs.local/000000000000/conversation-projection-dlq.fifo";

interface DeadLetter {
  readonly eventId: string;
  readonly type: string;
  /** `<aggregate type>/<aggregate id>`. */
  readonly stream: string;
  /** 0: unsequenced. */
  readonly version: number;
  readonly orderKey: string;
}

interface Stored {
  readonly message: Message;
  handle?: string;
}

/**
 * A dead-letter queue in memory, as much of SQS as a redrive uses. FIFO (the default): it hands a
 * message group's messages out in the order they were dead-lettered, and none of a group while one
 * of it is held. `fifo: false` hands out everything visible, in the order given. Sends go to
 * `sent`; `deleteError` makes a delete fail (with the message it returns).
 */
class DeadLetterQueue {
  readonly sent: { eventId: string; groupId?: string; deduplicationId?: string }[] = [];
  readonly deleted: string[] = [];
  readonly released: string[] = [];
  deleteError: (messageId: string) => string | undefined = () => undefined;
  private readonly stored: Stored[];
  private handles = 0;

  constructor(
    letters: readonly DeadLetter[],
    private readonly fifo = true,
  ) {
    const deadLetteredAt = Date.now() - 60_000;
    this.stored = letters.map((l, i) => ({
      message: {
        MessageId: `msg-${l.eventId}`,
        Body: JSON.stringify({
          event_id: l.eventId,
          event_type: l.type,
          order_key: l.orderKey,
          aggregate: {
            type: l.stream.split("/")[0],
            id: l.stream.split("/")[1],
            version: l.version,
          },
        }),
        Attributes: { MessageGroupId: l.orderKey, SentTimestamp: String(deadLetteredAt + i) },
      },
    }));
  }

  /** The queue's hold on a message ends (its visibility timeout passed): it is handed out again. */
  endHold(messageId: string): void {
    const s = this.stored.find((x) => x.message.MessageId === messageId);
    if (s) s.handle = undefined;
  }

  /** What is still in the queue (event ids, in order). */
  remaining(): string[] {
    return this.stored.map((s) => eventIdOf(s.message));
  }

  readonly client = {
    send: async (command: unknown): Promise<unknown> => {
      if (command instanceof ReceiveMessageCommand) return { Messages: this.receive(command) };
      if (command instanceof SendMessageCommand) {
        this.sent.push({
          eventId: JSON.parse(command.input.MessageBody ?? "{}").event_id,
          ...(command.input.MessageGroupId ? { groupId: command.input.MessageGroupId } : {}),
          ...(command.input.MessageDeduplicationId
            ? { deduplicationId: command.input.MessageDeduplicationId }
            : {}),
        });
        return { MessageId: `sent-${this.sent.length}` };
      }
      if (command instanceof DeleteMessageCommand) return this.delete(command);
      if (command instanceof ChangeMessageVisibilityBatchCommand) {
        for (const entry of command.input.Entries ?? []) {
          const s = this.stored.find((x) => x.handle && x.handle === entry.ReceiptHandle);
          if (!s) continue;
          s.handle = undefined;
          this.released.push(eventIdOf(s.message));
        }
        return { Successful: [], Failed: [] };
      }
      throw new Error(`the stub does not answer ${(command as object).constructor.name}`);
    },
  };

  private receive(command: ReceiveMessageCommand): Message[] {
    const limit = command.input.MaxNumberOfMessages ?? 1;
    const lockedGroups = new Set(
      this.stored.filter((s) => s.handle).map((s) => s.message.Attributes?.MessageGroupId),
    );
    const handedOut: Message[] = [];
    for (const s of this.stored) {
      if (handedOut.length >= limit) break;
      if (s.handle) continue;
      if (this.fifo && lockedGroups.has(s.message.Attributes?.MessageGroupId)) continue;
      this.handles += 1;
      s.handle = `rh-${this.handles}`;
      handedOut.push({ ...s.message, ReceiptHandle: s.handle });
    }
    return handedOut;
  }

  private delete(command: DeleteMessageCommand): object {
    const at = this.stored.findIndex((s) => s.handle && s.handle === command.input.ReceiptHandle);
    const s = this.stored[at];
    if (!s) throw new Error("ReceiptHandleIsInvalid: the receipt handle has expired");
    const error = this.deleteError(s.message.MessageId ?? "");
    if (error) throw new Error(error);
    this.stored.splice(at, 1);
    this.deleted.push(eventIdOf(s.message));
    return {};
  }
}

function eventIdOf(m: Message): string {
  return JSON.parse(m.Body ?? "{}").event_id;
}

function stackOf(queue: DeadLetterQueue): OpsStack {
  return {
    sqs: queue.client as unknown as SQSClient,
    names: { groups: { [GROUP]: { queue: QUEUE, deadLetterQueue: DLQ } } },
  } as unknown as OpsStack;
}

const letter = (
  eventId: string,
  type: string,
  stream: string,
  version: number,
  orderKey = "conv_1",
): DeadLetter => ({ eventId, type, stream, version, orderKey });

describe("dlq redrive order", () => {
  it("re-queues a message group in the order it was dead-lettered, across the streams it holds", async () => {
    // One conversation's group: its own stream, a reply's and a delivery's, each at its version.
    const dlq = new DeadLetterQueue([
      letter("e1", "conversation.message.accepted", "conversation/conv_1", 7),
      letter("e2", "reply.generated", "reply/task_a", 1),
      letter("e3", "notification.delivered", "delivery/task_a", 1),
      letter("e4", "conversation.message.accepted", "conversation/conv_1", 8),
    ]);
    const report = await redrive(stackOf(dlq), GROUP);
    expect(dlq.sent.map((s) => s.eventId)).toEqual(["e1", "e2", "e3", "e4"]);
    expect(report.moved.map((m) => m.eventId)).toEqual(["e1", "e2", "e3", "e4"]);
    expect(new Set(dlq.sent.map((s) => s.groupId))).toEqual(new Set(["conv_1"]));
    expect(new Set(dlq.sent.map((s) => s.deduplicationId)).size).toBe(4);
    expect(dlq.remaining()).toEqual([]);
  });

  it("puts one stream's versions in order in the places its messages were received in, the other messages staying where they were", async () => {
    // A standard dead-letter queue hands messages out in any order: the run's stream came out
    // 3, 2, with an agent run's event and an unsequenced operator command between.
    const dlq = new DeadLetterQueue(
      [
        letter("run-v3", "node.completed", "dag_run/run_1", 3, "run_1"),
        letter("agent-v1", "agent_run.started", "agent_run/ar_1", 1, "run_1"),
        letter("command", "workflow.signal.requested", "dag_run/run_1", 0, "run_1"),
        letter("run-v2", "node.started", "dag_run/run_1", 2, "run_1"),
        letter("agent-v2", "agent_run.completed", "agent_run/ar_1", 2, "run_1"),
      ],
      false,
    );
    await redrive(stackOf(dlq), GROUP);
    expect(dlq.sent.map((s) => s.eventId)).toEqual([
      "run-v2",
      "agent-v1",
      "command",
      "run-v3",
      "agent-v2",
    ]);
  });

  it("keeps a version dead-lettered twice in receive order, and each order key's messages together", async () => {
    const dlq = new DeadLetterQueue(
      [
        letter("b-v2", "plan.created", "task/task_b", 2, "task_b"),
        letter("a-v2", "plan.created", "task/task_a", 2, "task_a"),
        letter("a-v1", "task.accepted", "task/task_a", 1, "task_a"),
        letter("a-v2-again", "plan.created", "task/task_a", 2, "task_a"),
        letter("b-v1", "task.accepted", "task/task_b", 1, "task_b"),
      ],
      false,
    );
    const report = await redrive(stackOf(dlq), GROUP);
    const requeued = ["a-v1", "a-v2", "a-v2-again", "b-v1", "b-v2"];
    expect(dlq.sent.map((s) => s.eventId)).toEqual(requeued);
    expect(report.moved.map((m) => m.eventId)).toEqual(requeued);
  });

  it("shows in a dry run the order a redrive would re-queue in, and moves nothing", async () => {
    const dlq = new DeadLetterQueue([
      letter("e1", "conversation.message.accepted", "conversation/conv_1", 7),
      letter("e2", "reply.generated", "reply/task_a", 1),
      letter("e3", "conversation.message.accepted", "conversation/conv_1", 8),
    ]);
    const report = await redrive(stackOf(dlq), GROUP, { dryRun: true });
    expect(report.moved.map((m) => m.eventId)).toEqual(["e1", "e2", "e3"]);
    expect(dlq.sent).toEqual([]);
    expect(dlq.remaining()).toEqual(["e1", "e2", "e3"]);
    expect(dlq.released).toEqual(["e1", "e2", "e3"]);
  });
});

describe("dlq redrive with a failed delete", () => {
  it("goes on past a delete that fails, says which, and ends with its report and audit record", async () => {
    const dlq = new DeadLetterQueue([
      letter("e1", "conversation.message.accepted", "conversation/conv_1", 7),
      letter("e2", "reply.generated", "reply/task_a", 1),
      letter("e3", "conversation.message.accepted", "conversation/conv_1", 8),
      letter("other", "task.accepted", "task/task_b", 1, "task_b"),
    ]);
    dlq.deleteError = (messageId) =>
      messageId === "msg-e2" ? "ThrottlingException: Rate exceeded" : undefined;
    const report = await redrive(stackOf(dlq), GROUP, { eventIds: ["e1", "e2", "e3"] });
    expect(dlq.sent.map((s) => s.eventId)).toEqual(["e1", "e2", "e3"]);
    expect(report.moved.map((m) => m.eventId)).toEqual(["e1", "e2", "e3"]);
    expect(report.failed).toEqual([]);
    expect(report.notDeleted).toEqual([
      { messageId: "msg-e2", eventId: "e2", error: "ThrottlingException: Rate exceeded" },
    ]);
    // The message not asked for is made visible again at once, not left hidden.
    expect(dlq.released).toEqual(["other"]);
    expect(report.left).toBe(1);
    expect(dlq.remaining()).toEqual(["e2", "other"]);
    expect(redriveAuditAction(report, "reply bug fixed")).toEqual({
      action: "dlq.redrive",
      target: GROUP,
      reason: "reply bug fixed",
      outcome: { count: 3, event_ids: ["e1", "e2", "e3"], failed: 0 },
    });
  });

  it("deletes a re-queued message handed out again after its hold ended, without sending it twice", async () => {
    const dlq = new DeadLetterQueue([
      letter("e1", "conversation.message.accepted", "conversation/conv_1", 7),
      letter("e2", "reply.generated", "reply/task_a", 1),
      letter("e3", "conversation.message.accepted", "conversation/conv_1", 8),
    ]);
    // The hold on e2 ends before its delete: the receipt handle is no longer good.
    let held = true;
    dlq.deleteError = (messageId) => {
      if (messageId !== "msg-e2" || !held) return undefined;
      held = false;
      dlq.endHold(messageId);
      return "ReceiptHandleIsInvalid: the receipt handle has expired";
    };
    const report = await redrive(stackOf(dlq), GROUP);
    expect(dlq.sent.map((s) => s.eventId)).toEqual(["e1", "e2", "e3"]);
    expect(report.moved.map((m) => m.eventId)).toEqual(["e1", "e2", "e3"]);
    expect(report.notDeleted).toEqual([]);
    expect(dlq.deleted).toEqual(["e1", "e3", "e2"]);
    expect(dlq.remaining()).toEqual([]);
  });

  it("reports a delete that fails again when the message is handed out again", async () => {
    const dlq = new DeadLetterQueue([
      letter("e1", "conversation.message.accepted", "conversation/conv_1", 7),
      letter("e2", "conversation.message.accepted", "conversation/conv_1", 8),
    ]);
    dlq.deleteError = (messageId) => {
      if (messageId !== "msg-e1") return undefined;
      dlq.endHold(messageId);
      return "ReceiptHandleIsInvalid: the receipt handle has expired";
    };
    const report = await redrive(stackOf(dlq), GROUP);
    expect(dlq.sent.map((s) => s.eventId)).toEqual(["e1", "e2"]);
    expect(report.moved.map((m) => m.eventId)).toEqual(["e1", "e2"]);
    expect(report.notDeleted).toEqual([
      {
        messageId: "msg-e1",
        eventId: "e1",
        error: "ReceiptHandleIsInvalid: the receipt handle has expired",
      },
    ]);
    expect(dlq.remaining()).toEqual(["e1"]);
  });
});
