import type { Envelope } from "../../../schemas";
import type { Random } from "../faults/random";

/** One message in a group's queue: a copy of the envelope as the bus delivered it. */
export interface Message {
  readonly id: number;
  readonly group: string;
  /** The FIFO message group (the envelope's order key); every message of a group is in order. */
  readonly messageGroup: string;
  /** The body as JSON text, as SQS holds it (a poison message's body is what it is). */
  readonly body: string;
  receiveCount: number;
  /** In flight (received, neither deleted nor back) until this step. */
  invisibleUntil: number;
}

/**
 * A consumer group's queue as SQS runs one. FIFO: a message group hands out its oldest message
 * only while none of its messages is in flight; a received message that is not deleted comes back
 * when its visibility ends; past `maxReceiveCount` receives it moves to the dead-letter queue.
 */
export class GroupQueue {
  readonly messages: Message[] = [];
  readonly deadLetters: Message[] = [];

  constructor(
    readonly group: string,
    /** Receives before a message moves to the dead-letter queue (the group's redrive policy). */
    readonly maxReceiveCount: number,
    /** False for a standard queue: any visible message may be received, in any order. */
    readonly ordered = true,
  ) {}

  send(message: Message): void {
    this.messages.push(message);
  }

  /** The messages that could be received at `step`: the oldest of each idle message group. */
  receivable(step: number): Message[] {
    const busy = new Set<string>();
    const heads: Message[] = [];
    for (const m of this.messages) {
      if (!this.ordered) {
        if (m.invisibleUntil <= step) heads.push(m);
        continue;
      }
      if (busy.has(m.messageGroup)) continue;
      busy.add(m.messageGroup);
      if (m.invisibleUntil <= step) heads.push(m);
    }
    return heads;
  }

  receive(message: Message, step: number, visibility: number): void {
    message.receiveCount++;
    message.invisibleUntil = step + visibility;
  }

  delete(message: Message): void {
    const at = this.messages.indexOf(message);
    if (at >= 0) this.messages.splice(at, 1);
  }

  /** A receive that failed: the message returns after its visibility, or is dead-lettered. */
  fail(message: Message): void {
    if (message.receiveCount < this.maxReceiveCount) return;
    this.delete(message);
    this.deadLetters.push(message);
  }

  /** Moves every dead letter back to the queue with a fresh receive count (`dlq redrive`). */
  redrive(): number {
    const moved = this.deadLetters.splice(0);
    for (const m of moved) {
      m.receiveCount = 0;
      m.invisibleUntil = 0;
      this.messages.push(m);
    }
    return moved.length;
  }

  get empty(): boolean {
    return this.messages.length === 0;
  }
}

/** Picks which receivable message goes next: at random, as concurrent pollers would. */
export function nextMessage(queues: readonly GroupQueue[], step: number, random: Random) {
  const ready = queues.flatMap((queue) =>
    queue.receivable(step).map((message) => ({ queue, message })),
  );
  return ready.length === 0 ? undefined : random.pick(ready);
}

/** The envelope text of a message body (what a consumer would JSON.parse). */
export function bodyOf(envelope: Envelope): string {
  return JSON.stringify(envelope);
}
