import { PutEventsCommand } from "@aws-sdk/client-eventbridge";
import { ReceiveMessageCommand } from "@aws-sdk/client-sqs";
import { ulid } from "ulid";
import type { Decision } from "../../functions/core/pipeline";
import { appendToStream } from "../../functions/core/producer";
import { systemClock, ulidSource } from "../../functions/core/runtime";
import type { TaskView } from "../../functions/roles/task-projection";
import { type Envelope, registry } from "../../schemas";
import type { LocalEnvironment } from "./environment";
import type { DeadLetter } from "./trace";

export interface Check {
  readonly name: string;
  readonly ok: boolean;
  readonly detail: string;
}

export interface ScenarioResult {
  readonly correlations: string[];
  readonly checks: Check[];
  readonly deadLetters: DeadLetter[];
  readonly views: Record<string, TaskView | undefined>;
}

const LIFECYCLE = [
  { type: "task.accepted", payload: { title: "Why has my refund not arrived?" } },
  {
    type: "plan.created",
    payload: { steps: ["look up the order", "check the refund", "draft a reply"] },
  },
  { type: "answer.generated", payload: { answer_ref: "ans_refund-eta" } },
  { type: "notification.sent", payload: { channel: "email" } },
];

/**
 * The reference scenario on the local stack, with the faults a real deployment meets:
 * - task A: a full lifecycle; the consumer's acknowledgement of v2 is lost, so v2 is delivered again;
 * - task B: v3 reaches the bus before v1 and v2 (the relay is held back and v3 is replayed ahead),
 *   so the consumer repairs the gap from the event store and the late originals are duplicates;
 * - task C: accepted, then client feedback sent with `put-events` (unsequenced): one is
 *   delivered twice, one has already expired on arrival;
 * - a poison message (an id that looks like a phone number) is put on the bus.
 * Then every expectation is checked against the stored state and what the runtime observed.
 */
export async function runScenario(
  env: LocalEnvironment,
  log: (line: string) => void = () => {},
): Promise<ScenarioResult> {
  const deps = { store: env.store, registry, clock: systemClock, ids: ulidSource() };
  const bus = env.buses.events;
  if (!bus) throw new Error("the stack has no events bus");
  const tasks = { A: `task_${ulid()}`, B: `task_${ulid()}`, C: `task_${ulid()}` };
  const correlations = { A: `corr_${ulid()}`, B: `corr_${ulid()}`, C: `corr_${ulid()}` };

  const append = async (task: keyof typeof tasks, steps: number, cause?: Envelope) => {
    const out: Envelope[] = [];
    let previous = cause;
    for (const step of LIFECYCLE.slice(0, steps)) {
      const emitted = await appendToStream(deps, {
        aggregate: { type: "task", id: tasks[task] },
        producer: "task-api",
        correlationId: correlations[task],
        taskId: tasks[task],
        cause: previous,
        decide: (state): Decision<{ status: string }> => ({
          state: { status: step.type, ...(state?.data as object | undefined) },
          emit: [step],
        }),
      });
      out.push(...emitted);
      previous = emitted.at(-1);
    }
    return out;
  };

  const put = async (envelopes: unknown[], source = "agentbus.client") => {
    const response = await env.clients.eventbridge.send(
      new PutEventsCommand({
        Entries: envelopes.map((e) => ({
          EventBusName: bus,
          Source: source,
          DetailType: String((e as { event_type?: string }).event_type ?? "unknown"),
          Detail: JSON.stringify(e),
        })),
      }),
    );
    if (response.FailedEntryCount)
      throw new Error(`put-events failed: ${JSON.stringify(response.Entries)}`);
  };

  const feedback = (rating: number, extra: Record<string, unknown> = {}) => ({
    event_id: ulid(),
    event_type: "task.feedback.received",
    schema_version: 1,
    occurred_at: new Date().toISOString(),
    correlation_id: correlations.C,
    causation_id: null,
    task_id: tasks.C,
    aggregate: { type: "task", id: tasks.C, version: 0 },
    order_key: tasks.C,
    producer: "web-client",
    payload: { rating },
    ...extra,
  });

  // Task A: full lifecycle, the consumer's ack of v2 is lost once.
  log("task A: the task API commits 4 events; the consumer's acknowledgement of v2 will be lost");
  env.runtime.pauseStream();
  const a = await append("A", 4);
  const aV2 = a[1] as Envelope;
  env.runtime.loseAckOnce(aV2.event_id, "task-projection");
  env.runtime.resumeStream();
  await env.runtime.idle();

  // Task B: v3 overtakes v1 and v2.
  log("task B: the relay is held back; v3 is replayed to the bus ahead of v1 and v2");
  env.runtime.pauseStream();
  const b = await append("B", 3);
  const bV3 = b[2] as Envelope;
  await put([bV3], "agentbus.replay");
  await waitFor(
    () =>
      env.observations.deliveries.get(bV3.event_id)?.some((d) => d.status === "applied") ?? false,
    60_000,
  );
  env.runtime.resumeStream();
  await env.runtime.idle();

  // Task C: feedback from a client (unsequenced), a duplicate delivery, an expired one, and poison.
  log(
    "task C: accepted; a client sends feedback twice over (one ack lost), one already expired, and one poison message",
  );
  await append("C", 1);
  await env.runtime.idle();
  const good = feedback(5);
  const late = feedback(1, { expires_at: new Date(Date.now() - 1000).toISOString() });
  const poison = feedback(3, { correlation_id: "user_138_phone_13800138000" });
  env.runtime.loseAckOnce(good.event_id, "task-projection");
  await put([good, late, poison]);
  await env.runtime.idle();

  const deadLetters = await readDeadLetters(env);
  const views: Record<string, TaskView | undefined> = {};
  for (const [name, id] of Object.entries(tasks)) {
    const { state } = await env.store.load({ state: { type: "task_view", id } });
    views[name] = state?.data as TaskView | undefined;
  }
  const group = "task-projection";
  const o = env.observations;
  const history = (name: string) => views[name]?.history.map((h) => h.version).join(",") ?? "none";
  const checks: Check[] = [
    check(
      "A: view delivered with v1..v4 applied once each",
      views.A?.status === "delivered" && history("A") === "1,2,3,4",
      `status ${views.A?.status}, history ${history("A")}`,
    ),
    check(
      "A: lost ack of v2 -> redelivered -> duplicate",
      (o.deliveries.get(aV2.event_id) ?? []).some((d) => d.status === "duplicate"),
      "see trace",
    ),
    check(
      "B: v3 first -> gap v1, v2 repaired from the event store",
      (o.deliveries.get(b[0]?.event_id ?? "") ?? []).some(
        (d) => d.repaired && d.status === "applied",
      ),
      "see trace",
    ),
    check(
      "B: view generated with v1..v3 in order",
      views.B?.status === "generated" && history("B") === "1,2,3",
      `status ${views.B?.status}, history ${history("B")}`,
    ),
    check(
      "C: feedback applied once despite a second delivery",
      views.C?.feedback.count === 1 && views.C.feedback.rating_total === 5,
      JSON.stringify(views.C?.feedback),
    ),
    check(
      "C: expired feedback discarded with reason",
      o.count(group, "discarded", "expired") === 1,
      `${o.count(group, "discarded", "expired")} expired discards`,
    ),
    check(
      "poison message dead-lettered with its reason",
      deadLetters.some((d) => d.eventId === poison.event_id && d.code === "envelope.invalid"),
      deadLetters.map((d) => `${d.code}`).join(", ") || "no dead letters",
    ),
    check(
      "no unexpected failures",
      o.failures.length === 0,
      o.failures.slice(0, 3).join(" | ") || "none",
    ),
  ];
  return { correlations: Object.values(correlations), checks, deadLetters, views };
}

function check(name: string, ok: boolean, detail: string): Check {
  return { name, ok, detail };
}

async function waitFor(condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("timed out waiting for the scenario to progress");
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Peek at every dead-letter queue of the stack (messages stay where they are). */
export async function readDeadLetters(env: LocalEnvironment): Promise<DeadLetter[]> {
  const urls = new Set<string>();
  for (const f of env.deployment.functions)
    if (f.environment.DEAD_LETTER_QUEUE_URL) urls.add(f.environment.DEAD_LETTER_QUEUE_URL);
  const out: DeadLetter[] = [];
  for (const url of urls) {
    const response = await env.clients.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: 10,
        VisibilityTimeout: 0,
        MessageAttributeNames: ["All"],
      }),
    );
    for (const m of response.Messages ?? []) {
      let eventId: string | undefined;
      try {
        const body = JSON.parse(m.Body ?? "") as {
          event_id?: string;
          detail?: { event_id?: string };
        };
        eventId = body.event_id ?? body.detail?.event_id;
      } catch {
        eventId = undefined;
      }
      out.push({
        queue: url.split("/").at(-1) ?? url,
        code: m.MessageAttributes?.["agentbus.error_code"]?.StringValue ?? "unknown",
        reason: m.MessageAttributes?.["agentbus.error_reason"]?.StringValue ?? "",
        eventId,
      });
    }
  }
  return out;
}
