import type { Report } from "./events";

/**
 * Fault injection, as the runtime's loops consult it: a stream held back, consumer groups whose
 * workers are gone, and acknowledgements to lose.
 */
export class Faults {
  private paused = false;
  private readonly lostAcks = new Set<string>();
  private readonly pausedGroups = new Set<string>();

  constructor(private readonly report: Report) {}

  /** The relay (stream reading) is held back. */
  get streamPaused(): boolean {
    return this.paused;
  }

  pauseStream(): void {
    this.paused = true;
  }

  resumeStream(): void {
    this.paused = false;
  }

  /** The next successful handling of this event by this group loses its acknowledgement. */
  loseAckOnce(eventId: string, group: string): void {
    this.lostAcks.add(`${group}#${eventId}`);
  }

  /** Whether this handling is to lose its acknowledgement; the fault is used up if so. */
  takeLostAck(group: string | undefined, eventId: string): boolean {
    return this.lostAcks.delete(`${group}#${eventId}`);
  }

  pauseGroup(group: string): void {
    this.pausedGroups.add(group);
    this.report({ kind: "fault", description: `paused consumer group ${group}` });
  }

  resumeGroup(group: string): void {
    this.pausedGroups.delete(group);
  }

  groupPaused(group: string): boolean {
    return this.pausedGroups.has(group);
  }
}
