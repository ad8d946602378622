import { ulid } from "ulid";
import { afterAll, beforeAll } from "vitest";
import {
  type LocalEnvironment,
  type LocalOptions,
  startLocal,
} from "../../lib/dev/local/environment";
import { putOnBus } from "../../lib/dev/local/put-on-bus";
import {
  loadConversation,
  sendCommandOf,
  waitUntil,
} from "../../lib/dev/local/scenario/customer-support";
import type { Envelope } from "../../schemas";
import { emulator } from "../support/aws";
import { groupOutcome } from "../support/outcomes";

/** How long a support e2e test waits for one thing on the local stack. */
export const TIMEOUT = 120_000;

/**
 * The local stack a support e2e file runs on, under a stage of its own (`stagePrefix` and a
 * random tail): deployed to the emulator before the file's tests and stopped after them, with the
 * reads and waits those tests share. Call it inside the file's `describe`; `options` are the
 * local stack's own (`envOverrides`, ...).
 */
export function localSupportStack(
  stagePrefix: string,
  options: Omit<LocalOptions, "endpoint" | "stage"> = {},
) {
  const stage = `${stagePrefix}${ulid().slice(-6).toLowerCase()}`;
  let started: LocalEnvironment | undefined;
  beforeAll(async () => {
    started = await startLocal({ ...options, endpoint: emulator().endpoint, stage });
  }, 240_000);
  afterAll(async () => {
    await started?.stop();
  });
  const env = (): LocalEnvironment => {
    if (!started) throw new Error(`the local stack ${stage} is not started`);
    return started;
  };
  /** Waits until the conversation view shows the turn at `status`; the view then. */
  const turnReaches = (conversationId: string, taskId: string, status: string) =>
    waitUntil(
      `turn ${taskId} ${status}`,
      async () => {
        const view = await loadConversation(env(), conversationId);
        return view?.turns[taskId]?.status === status ? view : undefined;
      },
      TIMEOUT,
    );
  return {
    stage,
    /** The running stack (inside a test). */
    get env(): LocalEnvironment {
      return env();
    },
    /** Puts customers' messages on the events bus, as a client would. */
    putMessages: (...messages: Envelope[]) => putOnBus(env(), "events", messages),
    /** What the local channel delivered in the conversation. */
    deliveriesTo: (conversationId: string) =>
      env()
        .channel.deliveries()
        .filter((d) => d.conversationId === conversationId),
    /** The group's inbox row for the event; undefined until the group has handled it. */
    inboxRow: async (group: string, eventId: string) =>
      (await env().store.inboxRecords(group, [eventId]))[0],
    /** The group's outcome of the event, from its row or its records (test/support/outcomes). */
    outcomeOf: (group: string, event: Envelope) => groupOutcome(env().store, group, event),
    /** Waits for the send command of the message's turn. */
    sendOf: (message: Envelope): Promise<Envelope> =>
      waitUntil(
        `the send command of ${message.task_id}`,
        () => sendCommandOf(env(), message.task_id),
        TIMEOUT,
      ),
    turnReaches,
    /** Waits until the conversation view shows the turn delivered; the view then. */
    delivered: (conversationId: string, taskId: string) =>
      turnReaches(conversationId, taskId, "delivered"),
  };
}
