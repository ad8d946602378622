import { contentKey } from "../../functions/adapters/dynamodb/content";
import { stateItem } from "../../functions/adapters/dynamodb/items";
import {
  type AgentJournal,
  agentModelSchemas,
  defineAgent,
  newJournal,
} from "../../functions/core/agent/agent";
import { AGENT_RUN_AGGREGATE } from "../../functions/core/agent/agent-role";
import { InMemoryContentStore } from "../../functions/core/agent/content";
import { agentStep } from "../../functions/core/agent/loop";
import { MESSAGES_KEPT, messageCount } from "../../functions/core/agent/messages";
import { defineTool } from "../../functions/core/agent/tool";
import type { ModelPort, ModelRequest, ModelResponse } from "../../functions/core/model";
import { jsonSchemasOf } from "../../functions/core/model-schema-export";
import { InMemorySideEffects } from "../../functions/core/side-effects";
import { itemSize } from "../../lib/dev/metering/metering";
import * as z from "../../schemas/zod";
import { fmt, fmtInt, renderTable } from "./stats";

type Out = (line?: string) => void;

/**
 * `npm run bench -- long-run`: one agent run of LONG_RUN_TURNS model turns that call a tool, then a
 * turn that answers, step by step on the agent loop with in-memory stores, each step's journal stored as the
 * DynamoDB adapter stores a run's item (deflated: the agents' states are compact). What it writes
 * per turn: the run's item at each step of the turn, and the content items the turn stores (the
 * model's turn, the tool's answer, the next user message, and a page of older references every
 * MESSAGES_KEPT messages), as DynamoDB sizes them. The step command each step appends is the same
 * size at every step and left out. Lambda durable functions stop an execution at 3,000 operations
 * (about 1,500 such turns, a model call and a tool call each a step).
 */

export const LONG_RUN_TURNS = 2_000;

export interface LongRunResult {
  readonly turns: number;
  /** Bytes written by turn 10 and by the last turn that calls a tool. */
  readonly early: TurnBytes;
  readonly late: TurnBytes;
  /** What the item would hold of references if it kept them all, at the last turn. */
  readonly allRefsBytes: number;
}

export interface TurnBytes {
  readonly turn: number;
  /** The run's item, written at each step of the turn. */
  readonly item: number;
  /** The turn's messages (the model's turn, the tool's answer, the next user message). */
  readonly content: number;
  /** The pages of older references, their bytes so far spread over the turns so far. */
  readonly pages: number;
  /** The run's item after the turn, as stored. */
  readonly itemSize: number;
}

const RUN = "run_long_1";
const T0 = new Date("2026-01-01T00:00:00.000Z");

/** A model that asks for one lookup a turn until `turns`, then answers. */
class LongModel implements ModelPort {
  readonly name = "long-run";
  private turn = 0;
  constructor(private readonly turns: number) {}
  async converse(_request: ModelRequest): Promise<ModelResponse> {
    this.turn += 1;
    const done = this.turn >= this.turns;
    return {
      text: done ? JSON.stringify({ verdict: "done" }) : "Looking the next one up.",
      ...(done
        ? {}
        : { toolCalls: [{ id: `call_${this.turn}`, name: "lookup", input: { n: this.turn } }] }),
      stopReason: done ? "end_turn" : "tool_use",
      usage: { inputTokens: 1000, outputTokens: 20 },
      modelId: "long-run",
      latencyMs: 1,
    };
  }
}

const lookup = defineTool({
  name: "lookup",
  description: "Look a number up.",
  effect: "read",
  input: z.object({ n: z.int() }),
  output: z.object({ n: z.int(), found: z.string() }),
  async run({ n }) {
    return { n, found: `record ${n}: ${"a plain result of a lookup ".repeat(8)}` };
  },
});

const Answer = z.object({ verdict: z.string() });

/**
 * A content store that counts the bytes of the items it writes, as DynamoDB sizes them: pages of
 * references (./messages.ts: a list of references and the page before) apart.
 */
class MeteredContent extends InMemoryContentStore {
  bytes = 0;
  pageBytes = 0;
  override async put(text: string): Promise<string> {
    const ref = await super.put(text);
    const size = itemSize({ pk: contentKey(ref), text });
    const parsed = JSON.parse(text) as Record<string, unknown>;
    if ("earlier" in parsed && Array.isArray(parsed.messages)) this.pageBytes += size;
    else this.bytes += size;
    return ref;
  }
}

/** The run's item as the DynamoDB adapter stores it after `step` steps. */
function storedSize(journal: AgentJournal, step: number): number {
  const aggregate = { type: AGENT_RUN_AGGREGATE, id: RUN, version: step };
  const item = stateItem(aggregate, step + 1, step, journal, T0, null, undefined, undefined, {
    compact: true,
  });
  return itemSize(item);
}

export async function runLongRunSection(out: Out, turns = LONG_RUN_TURNS): Promise<LongRunResult> {
  const agent = defineAgent({
    name: "long",
    instructions: "Look the numbers up one at a time, then answer.",
    tools: [lookup],
    output: Answer,
    schemas: jsonSchemasOf(agentModelSchemas({ lookup: lookup.input }, Answer)),
    maxTurns: turns + 1,
  });
  const content = new MeteredContent();
  const ports = {
    model: new LongModel(turns + 1),
    content,
    sideEffects: new InMemorySideEffects(),
  };
  const first = await content.put(JSON.stringify({ role: "user", text: "Look them all up." }));
  let journal = newJournal({
    runId: RUN,
    taskId: "task_long_1",
    agent: agent.name,
    subject: {},
    startedBy: { event_type: "long.requested", payload: {} },
    correlationId: "corr_long_1",
    decisionType: "long.decision.requested",
    firstMessage: first,
    now: T0,
  });
  const perTurn: TurnBytes[] = [];
  let item = 0;
  let written = content.bytes;
  for (let step = 1; journal.status === "RUNNING"; step++) {
    const result = await agentStep(agent, journal, ports, { now: T0, receiveCount: 1 });
    journal = JSON.parse(JSON.stringify(result.journal)) as AgentJournal;
    const size = storedSize(journal, step);
    item += size;
    // A turn ends when its calls are answered, or with the answer.
    if (journal.pending.length === 0) {
      perTurn.push({
        turn: journal.totals.model_turns,
        item,
        content: content.bytes - written,
        pages: content.pageBytes / journal.totals.model_turns,
        itemSize: size,
      });
      item = 0;
      written = content.bytes;
    }
  }
  const result = {
    turns,
    early: turnOf(perTurn, 10),
    late: turnOf(perTurn, turns),
    allRefsBytes: messageCount(journal) * 67,
  };
  printLongRun(out, result, journal);
  return result;
}

function turnOf(perTurn: readonly TurnBytes[], turn: number): TurnBytes {
  const found = perTurn.find((t) => t.turn === turn);
  if (!found) throw new Error(`the run did not take turn ${turn}`);
  return found;
}

function printLongRun(out: Out, r: LongRunResult, journal: AgentJournal): void {
  out(
    `One agent run of ${fmtInt(r.turns)} model turns that call a tool and one that answers, ${fmtInt(journal.step)} steps, ${fmtInt(messageCount(journal))} messages; bytes written per turn as DynamoDB sizes the items (a page of ${MESSAGES_KEPT} references is sealed every ${MESSAGES_KEPT / 2} turns: its bytes are spread over the turns so far):`,
  );
  const rows = [r.early, r.late].map((t) => [
    `turn ${fmtInt(t.turn)}`,
    fmtInt(t.item),
    fmtInt(t.content),
    fmtInt(t.pages),
    fmtInt(written(t)),
    fmtInt(t.itemSize),
  ]);
  const header = ["", "run item B", "messages B", "pages B", "total B", "item size B"];
  for (const line of renderTable(header, rows, ["l", "r", "r", "r", "r", "r"])) out(line);
  const ratio = written(r.late) / written(r.early);
  out(
    `Turn ${fmtInt(r.turns)} writes ${fmt(ratio, 3)}× what turn 10 writes. The item keeps the newest ${MESSAGES_KEPT} references and the newest page's; keeping every reference, it would hold ${fmtInt(r.allRefsBytes)} bytes of them by now (DynamoDB's item limit is 400 KB). Lambda durable functions end an execution at 3,000 operations: about 1,500 turns of a model call and a tool call.`,
  );
}

const written = (t: TurnBytes) => t.item + t.content + t.pages;

/** The summary line. */
export function longRunSummary(r: LongRunResult): string {
  const early = written(r.early);
  const late = written(r.late);
  return `9. An agent run of ${fmtInt(r.turns)} turns writes ${fmtInt(late)} bytes at turn ${fmtInt(r.turns)} and ${fmtInt(early)} at turn 10 (${fmt(late / early, 3)}×); its item stays ${fmtInt(r.late.itemSize)} bytes.`;
}
