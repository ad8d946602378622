import { createHash } from "node:crypto";

/**
 * The names of the archive replays `agentbus replay` starts. A name is derived from what the
 * replay is (stage, topic, window, groups), so the same command run again finds the replay it
 * started instead of starting another; every name starts with the stage's prefix, which is what
 * the operator repair policy lets an operator describe.
 */

/** EventBridge replay names: 1..64 characters of `.`, `-`, `_`, letters and digits. */
export const REPLAY_NAME_PATTERN = /^[.\-_A-Za-z0-9]{1,64}$/;
const MAX_NAME = 64;
const DIGEST_LENGTH = 16;

/** How the names of a stage's replays start: `agentbus-<stage>-`. */
export function replayNamePrefix(stage: string): string {
  return `agentbus-${stage}-`;
}

export interface ReplayIdentity {
  readonly stage: string;
  readonly topic: string;
  readonly from: Date;
  readonly to: Date;
  /** The groups the replay is delivered to (their order does not matter). */
  readonly groups: readonly string[];
}

/**
 * `agentbus-<stage>-<topic>-<digest>`: the digest (16 hex digits of SHA-256) covers the stage, the
 * topic, the window to the millisecond and the sorted groups; the topic is shortened if the name
 * would pass 64 characters (the digest still tells replays apart).
 */
export function replayName(identity: ReplayIdentity): string {
  const groups = [...new Set(identity.groups)].sort();
  const digest = createHash("sha256")
    .update(
      JSON.stringify([
        identity.stage,
        identity.topic,
        identity.from.toISOString(),
        identity.to.toISOString(),
        groups,
      ]),
    )
    .digest("hex")
    .slice(0, DIGEST_LENGTH);
  const prefix = replayNamePrefix(identity.stage);
  const room = MAX_NAME - prefix.length - DIGEST_LENGTH - 1;
  const topic = identity.topic.replace(/[^.\-_A-Za-z0-9]/g, "-").slice(0, Math.max(0, room));
  return `${prefix}${topic}${topic ? "-" : ""}${digest}`;
}
