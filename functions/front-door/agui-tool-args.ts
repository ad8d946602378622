import type { Envelope } from "../../schemas";
import { CONTENT_MISSING, type ContentStore } from "../core/agent/content";
import { PermanentError } from "../core/errors";
import { toolCallArgs, toolCallTurn } from "./agui-events";

/**
 * The inputs of the tool calls an AG-UI stream sends (`TOOL_CALL_ARGS`): an agent's tool call is
 * recorded in its run's stream as its next step command, which names the model turn that asked
 * for it (`done.turn_ref`); the turn, in the content store, holds the call's input.
 *
 * Each poll reads the turns the facts it read name, each turn once, TURNS_PER_READ turns in one
 * read (a BatchGetItem on the state table). A stream reads a fact once per connection (after the
 * position it resumes from), so it reads a turn once per connection and per poll that read one
 * of its calls, never once per poll: a connection costs one content read per model turn whose
 * calls it sends, ceil(turn size / 4 KB) read units each (a turn is at most MAX_TURN_BYTES).
 *
 * A turn no longer stored (`content.missing`), or that does not hold the call, gives the call
 * ARGS_UNAVAILABLE, and the stream goes on; any other failure of the read is the poll's, as a
 * failed read of a stream is (the client reconnects and resumes).
 */

/** The most turns read in one content read (a DynamoDB BatchGetItem's most keys). */
export const TURNS_PER_READ = 100;

/**
 * Each tool call's `TOOL_CALL_ARGS` delta, by the event id of the fact that records it, for the
 * facts of `facts` that are agents' tool calls naming their turn. Without a content store: none
 * (the calls' args are ARGS_UNAVAILABLE). At most TURNS_PER_READ turns are held at once.
 */
export async function toolCallArgsOf(
  content: Pick<ContentStore, "getMany"> | undefined,
  facts: readonly Envelope[],
): Promise<ReadonlyMap<string, string>> {
  const calls = facts.flatMap((fact) => {
    const call = toolCallTurn(fact);
    return call ? [{ ...call, eventId: fact.event_id }] : [];
  });
  const refs = [...new Set(calls.map((call) => call.turnRef))];
  const args = new Map<string, string>();
  for (let start = 0; start < refs.length && content; start += TURNS_PER_READ) {
    const texts = await turnTexts(content, refs.slice(start, start + TURNS_PER_READ));
    for (const call of calls)
      if (texts.has(call.turnRef))
        args.set(call.eventId, toolCallArgs(texts.get(call.turnRef), call.callId));
  }
  return args;
}

/**
 * The texts of `refs`, undefined for one no longer stored: one read, or, when one of them is
 * missing, one read each (so a turn gone costs its neighbours nothing but a read).
 */
async function turnTexts(
  content: Pick<ContentStore, "getMany">,
  refs: readonly string[],
): Promise<Map<string, string | undefined>> {
  try {
    const texts = await content.getMany(refs);
    return new Map(refs.map((ref, index) => [ref, texts[index]]));
  } catch (error) {
    if (!isMissing(error)) throw error;
  }
  const texts = new Map<string, string | undefined>();
  for (const ref of refs)
    texts.set(
      ref,
      await content.getMany([ref]).then(
        ([text]) => text,
        (error: unknown) => {
          if (isMissing(error)) return undefined;
          throw error;
        },
      ),
    );
  return texts;
}

function isMissing(error: unknown): boolean {
  return error instanceof PermanentError && error.code === CONTENT_MISSING;
}
