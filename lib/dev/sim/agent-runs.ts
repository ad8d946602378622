import {
  type AgentDefinition,
  type AgentJournal,
  newJournal,
} from "../../../functions/core/agent/agent";
import { type AgentPorts, agentStep } from "../../../functions/core/agent/loop";
import { taskPollDue } from "../../../functions/core/agent/task-wait";
import { TransientError } from "../../../functions/core/errors";
import type { ModelPort, ModelRequest, ModelResponse } from "../../../functions/core/model";
import type { Random } from "../faults/random";

/**
 * An agent's runs in the simulated schedules whose one write is an outside system's (an MCP
 * server's tool, another system's A2A agent): each run taken step by step through the agent loop
 * and the side-effect ledger as a deployed agent takes it, a step's journal committed (a JSON
 * round trip) before the next reads it, each delivery perhaps crashing before its commit (the
 * step is taken again); a run waiting for an outside task is delivered its poll at the wait's
 * deadline. ./mcp-desk.ts and ./a2a-billing.ts play them.
 */

/** Deliveries a step may take before the run is counted unfinished. */
const MAX_DELIVERIES = 30;

/** The worker died after the outside system acted, before the ledger recorded its outcome. */
export class WorkerCrash extends Error {}

/** One run, step by step, each delivery perhaps crashing before its commit; how it ended. */
export async function playAgentRun(
  agent: AgentDefinition,
  ports: AgentPorts,
  runId: string,
  random: Random,
): Promise<string> {
  let journal = await begin(agent.name, ports, runId);
  let receiveCount = 1;
  let clock = Date.UTC(2026, 0, 1);
  for (let delivery = 0; delivery < MAX_DELIVERIES; delivery++) {
    // A minute on; a run waiting for a task is delivered its poll at its deadline, or later.
    clock = Math.max(clock + 60_000, Date.parse(journal.waiting?.deadline ?? "") || 0);
    const context = { now: new Date(clock), receiveCount };
    const taken = taskPollDue(journal, context.now) ?? journal;
    const step = await agentStep(agent, taken, ports, context).catch((error: unknown) => {
      if (error instanceof TransientError || error instanceof WorkerCrash) return undefined;
      throw error;
    });
    // Not committed: the step failed, or the worker died before its commit.
    if (!step || random.chance(0.1)) {
      receiveCount += 1;
      continue;
    }
    journal = JSON.parse(JSON.stringify(step.journal)) as AgentJournal;
    receiveCount = 1;
    if (step.next !== "continue" && journal.waiting?.kind !== "task") return journal.status;
  }
  return "unfinished";
}

async function begin(agent: string, ports: AgentPorts, runId: string): Promise<AgentJournal> {
  const first = await ports.content.put(JSON.stringify({ role: "user", text: runId }));
  const stem = agent.replaceAll("-", "_");
  return newJournal({
    runId,
    taskId: `task_${runId}`,
    agent,
    subject: {},
    startedBy: { event_type: `${stem}.requested`, payload: {} },
    correlationId: `corr_${runId}`,
    decisionType: `${stem}.decision.requested`,
    firstMessage: first,
    now: new Date(Date.UTC(2026, 0, 1)),
  });
}

/**
 * A model that calls one tool with the input `ask` makes of the run's id (its first message),
 * then answers `answer`.
 */
export class OneCallModel implements ModelPort {
  constructor(
    readonly name: string,
    private readonly tool: string,
    private readonly ask: (runId: string) => Record<string, unknown>,
    private readonly answer: object,
  ) {}

  async converse(request: ModelRequest): Promise<ModelResponse> {
    const asked = request.messages.some((m) => m.toolResults?.length);
    const runId = request.messages[0]?.text ?? "";
    const usage = { inputTokens: 1, outputTokens: 1 };
    const base = { usage, modelId: this.name, latencyMs: 1 };
    if (asked) return { ...base, text: JSON.stringify(this.answer), stopReason: "end_turn" };
    const toolCalls = [{ id: "call_1", name: this.tool, input: this.ask(runId) }];
    return { ...base, text: "", toolCalls, stopReason: "tool_use" };
  }
}

export function add(counts: Record<string, number>, kind: string, n = 1): void {
  counts[kind] = (counts[kind] ?? 0) + n;
}
