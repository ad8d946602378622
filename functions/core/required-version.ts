import type { AggregateRef, Envelope, RequiredVersion } from "../../schemas";
import { PermanentError, TransientError } from "./errors";
import type { StoredState } from "./ports";

/**
 * The version threshold (seed 000 §5.3): a message whose envelope carries `required_version`
 * depends on another aggregate's work, which its own order key cannot wait for (a send that must
 * not overtake the reply it sends, an approval that refers to a task at version N). A consumer
 * applies it only once that aggregate's stored state has reached the version:
 * - reached (`version` at or above it): the message is applied at once;
 * - not yet (or no state): it is held: nothing of it is applied or recorded, and the delivery
 *   fails with the transient `ordering.required_version_pending`, so the queue hands it out
 *   again after the retry backoff; in a FIFO group it holds back the messages behind it (the
 *   group's order is kept);
 * - not yet on the queue's last receive (`lastAttempt`): the permanent
 *   `ordering.required_version_timeout`, dead-lettered with the aggregate, the version required
 *   and the version found.
 * The check reads the named state (one strongly consistent read of its item, none when it is the
 * state the delivery reads anyway) and only for a message that carries the requirement; the
 * version only grows, so a requirement once reached stays reached.
 */
export async function awaitRequiredVersion(
  event: Envelope,
  readState: (ref: AggregateRef) => Promise<StoredState | undefined>,
  lastAttempt: boolean,
): Promise<void> {
  const required = event.required_version;
  if (!required) return;
  const found = (await readState({ type: required.type, id: required.id }))?.version ?? 0;
  if (found >= required.version) return;
  const details = {
    event_id: event.event_id,
    aggregate: `${required.type}/${required.id}`,
    required: required.version,
    found,
  };
  if (lastAttempt)
    throw new PermanentError(
      "ordering.required_version_timeout",
      `${waiting(event, required)}, still at version ${found} on the last attempt: gave up`,
      { details },
    );
  throw new TransientError(
    "ordering.required_version_pending",
    `${waiting(event, required)}, at version ${found}: held`,
    { details },
  );
}

function waiting(event: Envelope, required: RequiredVersion): string {
  const at = `${event.event_type} v${event.aggregate.version} (${event.event_id})`;
  return `${at} waits for ${required.type}/${required.id} to reach version ${required.version}`;
}
