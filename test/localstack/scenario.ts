import { type EventBridgeClient, PutEventsCommand } from "@aws-sdk/client-eventbridge";
import { ulid } from "ulid";
import type { DynamoEventStore } from "../../functions/adapters/dynamodb/event-store";
import { appendToStream } from "../../functions/core/producer";
import type { Decision } from "../../functions/core/role";
import { systemClock, ulidSource } from "../../functions/core/runtime";
import { LIFECYCLE } from "../../lib/dev/local/scenario";
import { type Envelope, registry } from "../../schemas";

/**
 * The foundation scenario in its LocalStack flavour. On the local runtime the scenario holds the
 * relay back and loses acknowledgements on purpose; LocalStack runs the real event source mappings,
 * which have no such hooks, so faults are only injected from outside and the checks look at the
 * converged result, never at an order of arrival:
 * - task A: the task API commits its four lifecycle events (`appendToStream`, one transaction each);
 * - task B: commits v1..v3 and also puts v3 straight on the bus (a replay that may overtake v1 and
 *   v2; the consumer then repairs the gap from the event store, or the replay is a duplicate);
 * - task C: accepted; one client feedback put twice with the same event id, one already expired,
 *   and one poison message (an id that looks like a phone number).
 */

/** A client's `task.feedback.received` envelope as sent with put-events (unsequenced: version 0). */
export interface FeedbackEnvelope {
  readonly event_id: string;
  readonly event_type: "task.feedback.received";
  readonly correlation_id: string;
  readonly task_id: string;
  readonly [field: string]: unknown;
}

export interface PlayedScenario {
  readonly tasks: { readonly A: string; readonly B: string; readonly C: string };
  /** What the task API committed, per task. */
  readonly committed: { readonly A: Envelope[]; readonly B: Envelope[]; readonly C: Envelope[] };
  /** Put twice with the same event id. */
  readonly feedback: FeedbackEnvelope;
  /** Already expired when put. */
  readonly expired: FeedbackEnvelope;
  /** Invalid correlation id: refused by the dispatcher, dead-lettered. */
  readonly poison: FeedbackEnvelope;
}

export interface ScenarioTarget {
  /** The event store on the stack's tables (names from the stack outputs). */
  readonly store: DynamoEventStore;
  readonly eventbridge: EventBridgeClient;
  /** The `events` topic's bus. */
  readonly bus: string;
}

export async function playScenario(target: ScenarioTarget): Promise<PlayedScenario> {
  const deps = { store: target.store, registry, clock: systemClock, ids: ulidSource() };
  const tasks = { A: `task_${ulid()}`, B: `task_${ulid()}`, C: `task_${ulid()}` };
  const correlations = { A: `corr_${ulid()}`, B: `corr_${ulid()}`, C: `corr_${ulid()}` };

  const append = async (task: keyof typeof tasks, steps: number): Promise<Envelope[]> => {
    const out: Envelope[] = [];
    for (const step of LIFECYCLE.slice(0, steps)) {
      const emitted = await appendToStream(deps, {
        aggregate: { type: "task", id: tasks[task] },
        producer: "task-api",
        correlationId: correlations[task],
        taskId: tasks[task],
        cause: out.at(-1),
        decide: (): Decision<{ status: string }> => ({
          state: { status: step.type },
          emit: [step],
        }),
      });
      out.push(...emitted);
    }
    return out;
  };

  const put = async (envelopes: readonly unknown[], source: string) => {
    const response = await target.eventbridge.send(
      new PutEventsCommand({
        Entries: envelopes.map((envelope) => ({
          EventBusName: target.bus,
          Source: source,
          DetailType: String((envelope as { event_type?: unknown }).event_type ?? "unknown"),
          Detail: JSON.stringify(envelope),
        })),
      }),
    );
    if (response.FailedEntryCount) {
      throw new Error(`put-events failed: ${JSON.stringify(response.Entries)}`);
    }
  };

  const feedbackFor = (rating: number, extra: Record<string, unknown> = {}): FeedbackEnvelope => ({
    event_id: ulid(),
    event_type: "task.feedback.received",
    schema_version: 1,
    occurred_at: new Date().toISOString(),
    correlation_id: correlations.C,
    causation_id: null,
    task_id: tasks.C,
    aggregate: { type: "task", id: tasks.C, version: 0 },
    producer: "web-client",
    payload: { rating },
    ...extra,
  });

  const A = await append("A", 4);

  const B = await append("B", 3);
  const bV3 = B[2];
  if (!bV3) throw new Error("task B: v3 was not committed");
  await put([bV3], "agentbus.replay");

  const C = await append("C", 1);
  const feedback = feedbackFor(5);
  const expired = feedbackFor(1, { expires_at: new Date(Date.now() - 60_000).toISOString() });
  const poison = feedbackFor(3, { correlation_id: "user_138_phone_13800138000" });
  // A client retrying after a lost response: two put-events calls, one event id.
  await put([feedback], "agentbus.client");
  await put([feedback], "agentbus.client");
  await put([expired, poison], "agentbus.client");

  return { tasks, committed: { A, B, C }, feedback, expired, poison };
}
