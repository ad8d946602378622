import { ulid } from "ulid";
import { TURN_LIMIT } from "../../functions/roles/customer-support/conversation-projection/conversation-projection";
import type { LocalEnvironment } from "../../lib/dev/local/environment";
import { putOnBus } from "../../lib/dev/local/put-on-bus";
import {
  customerMessage,
  loadConversation,
  waitUntil,
} from "../../lib/dev/local/scenario/customer-support";
import type { Meter, MeteredWrite } from "../../lib/dev/metering/metering";
import { fmtInt, renderTable } from "./stats";

type Out = (line?: string) => void;

/**
 * One conversation of CONVERSATION_TURNS turns on the local stack, each message sent once the
 * reply to the one before was delivered: the write units of turns 1, 10, TURN_LIMIT and the last,
 * by group, with the conversation's and its view's items as the turn left them. Both keep their
 * last 50 messages and turns, so a turn costs more up to the 50th and, past it, what the 50th did:
 * neither item may keep growing with the turns it dropped.
 */
export const CONVERSATION_TURNS = TURN_LIMIT + 10;

/** The turns whose writes are shown. */
const SHOWN_TURNS = [1, 10, TURN_LIMIT, CONVERSATION_TURNS];

const REPLY_TIMEOUT_MS = 180_000;

export interface TurnWrites {
  readonly turn: number;
  readonly writeUnits: number;
  /** Write units of the conversation group's writes and of the view's. */
  readonly conversation: number;
  readonly view: number;
  readonly others: number;
  /** The largest conversation state and view item the turn wrote, in bytes. */
  readonly conversationItem: number;
  readonly viewItem: number;
}

export async function conversationTurns(
  env: LocalEnvironment,
  dynamo: Meter,
  out: Out,
): Promise<TurnWrites[]> {
  const conversationId = `conv_${ulid()}`;
  const shown: TurnWrites[] = [];
  for (let turn = 1; turn <= CONVERSATION_TURNS; turn++) {
    dynamo.reset();
    const message = customerMessage(
      conversationId,
      "cust_alice",
      `Where is order A-1001? (${turn})`,
    );
    await putOnBus(env, "events", [message]);
    await waitUntil(
      `the reply to turn ${turn}`,
      async () => {
        const view = await loadConversation(env, conversationId);
        return view?.turns[message.task_id]?.status === "delivered";
      },
      REPLY_TIMEOUT_MS,
    );
    await env.runtime.idle();
    if (SHOWN_TURNS.includes(turn)) shown.push(turnWrites(turn, dynamo.writes()));
  }
  out();
  out(
    `A conversation of ${CONVERSATION_TURNS} turns: write units per turn (its state and its view keep the last ${TURN_LIMIT})`,
  );
  const columns = [
    ["turn", (t: TurnWrites) => t.turn],
    ["WU", (t: TurnWrites) => t.writeUnits],
    ["conversation WU", (t: TurnWrites) => t.conversation],
    ["view WU", (t: TurnWrites) => t.view],
    ["other WU", (t: TurnWrites) => t.others],
    ["state (B)", (t: TurnWrites) => t.conversationItem],
    ["view (B)", (t: TurnWrites) => t.viewItem],
  ] as const;
  const rows = shown.map((t) => columns.map(([, value]) => fmtInt(value(t))));
  const header = columns.map(([name]) => name);
  for (const line of renderTable(
    header,
    rows,
    header.map(() => "r" as const),
  ))
    out(line);
  return shown;
}

function turnWrites(turn: number, writes: readonly MeteredWrite[]): TurnWrites {
  const sum = (ws: readonly MeteredWrite[]) => ws.reduce((n, w) => n + w.writeUnits, 0);
  const largest = (ws: readonly MeteredWrite[], prefix: string) =>
    Math.max(
      0,
      ...ws.flatMap((w) => w.items.filter((i) => i.key.startsWith(prefix))).map((i) => i.bytes),
    );
  const ofScope = (scope: string) => writes.filter((w) => w.scope === scope);
  const conversation = ofScope("conversation");
  const view = ofScope("conversation-projection");
  return {
    turn,
    writeUnits: sum(writes),
    conversation: sum(conversation),
    view: sum(view),
    others: sum(writes) - sum(conversation) - sum(view),
    conversationItem: largest(conversation, "conversation#"),
    viewItem: largest(view, "conversation_view#"),
  };
}
