import { type AgentDefinition, defineAgent } from "../../../functions/core/agent/agent";
import { InMemoryContentStore } from "../../../functions/core/agent/content";
import { InMemorySideEffects } from "../../../functions/core/side-effects";
import {
  IDEMPOTENCY_KEY_META,
  InMemoryMcpServer,
  type McpCall,
  type McpCallResult,
  type McpFault,
  type McpServerPort,
  type McpToolDeclaration,
  mcpTools,
} from "../../../functions/integrations/mcp/index";
import * as z from "../../../schemas/zod";
import { Random } from "../faults/random";
import type { Violation } from "../faults/violation";
import { add, OneCallModel, playAgentRun, WorkerCrash } from "./agent-runs";

/**
 * MCP write tools in the simulated schedules: a help-desk agent whose `create_ticket` is an MCP
 * server's tool (the integration's twin, functions/integrations/mcp/memory.ts), run through the
 * agent loop and the side-effect ledger as a deployed agent runs it (./agent-runs.ts). Each schedule draws how the
 * server's writes are learnt (a query tool by key, a server that dedupes keys, or neither: a
 * person) and, at the plan's `mcp` rate, each call's fault: unavailable, a timeout before or after
 * the server ran it, or the worker's crash after the server ran it, before the ledger recorded it;
 * and, per delivered step, a crash before its commit (the step is taken again). In half the
 * schedules the server runs `create_ticket` as a task that stays working for a few polls (a task
 * that outlives its call: the run waits, and each later delivery, a minute on, is its poll), the
 * worker crashing after the server created it at the same rate. Invariant: **MCP write applied
 * once**, each ticket the agent asked for opened at most once at the server.
 *
 * The planted defect `mcp-key-per-attempt` sends every call under a key of its own (a key minted
 * per attempt): the server can neither deduplicate it nor find it by the step's key.
 */

/** The faults of an MCP write's call, in the order one draw per call picks them. */
export const MCP_FAULTS = [
  "throttle",
  "connection-reset",
  "timeout-after-apply",
  "crash-after-write",
] as const;
type McpSimFault = (typeof MCP_FAULTS)[number];

/** What each is at the twin: unavailable, a timeout before or after the server ran the call. */
const TWIN_FAULT: Readonly<Record<Exclude<McpSimFault, "crash-after-write">, McpFault>> = {
  throttle: "unavailable",
  "connection-reset": "timeout before running",
  "timeout-after-apply": "timeout after running",
};

export type PlantedMcpBug = "mcp-key-per-attempt";

export const MCP_APPLIED_ONCE = "MCP write applied once";

const MODES = ["query", "dedupes", "person"] as const;

export interface McpDeskResult {
  readonly violations: Violation[];
  readonly counts: Record<string, number>;
  readonly injected: Record<string, number>;
}

/** The help desk's runs of one schedule, each call's faults at `rate` (the plan's `mcp`). */
export async function playMcpDesk(
  seed: number,
  rate: number,
  bug?: string,
): Promise<McpDeskResult> {
  const random = new Random(seed ^ 0x3c9d);
  const mode = random.pick(MODES);
  const result: McpDeskResult = { violations: [], counts: {}, injected: {} };
  // A task that works for up to 3 polls, or a plain call.
  const workingPolls = random.chance(0.5) ? random.below(4) : undefined;
  const server = helpDeskServer(mode === "dedupes", workingPolls);
  const faulty = new FaultyMcp(server, random, rate, result.injected);
  const port = bug === "mcp-key-per-attempt" ? withKeyPerAttempt(faulty) : faulty;
  const ports = {
    model: new OneCallModel(
      "mcp-desk-script",
      "create_ticket",
      (runId) => ({ subject: `ticket of ${runId}` }),
      { ticket: "opened" },
    ),
    content: new InMemoryContentStore(),
    sideEffects: new InMemorySideEffects(),
  };
  const agent = deskAgent(port, mode, workingPolls !== undefined);
  const runs = 1 + random.below(3);
  const as = workingPolls === undefined ? mode : `${mode}, task`;
  for (let i = 0; i < runs; i++) {
    const end = await playAgentRun(agent, ports, `run_mcp_${seed}_${i}`, random);
    add(result.counts, `mcp run ${end} (${as})`);
  }
  result.violations.push(...appliedOnce(server));
  return result;
}

function deskAgent(
  port: McpServerPort,
  mode: (typeof MODES)[number],
  asTask: boolean,
): AgentDefinition {
  const create: McpToolDeclaration =
    mode === "query"
      ? { query: { tool: "find_ticket", keyArgument: "key" } }
      : mode === "dedupes"
        ? { dedupes: true }
        : {};
  return defineAgent({
    name: "mcp-desk",
    instructions: "Open the ticket the customer asks for.",
    tools: mcpTools(port, {
      server: "help-desk",
      tools: { create_ticket: create },
      // A task's call waits its timeout out in the process: a few milliseconds here.
      ...(asTask ? { timeoutMs: 5 } : {}),
    }),
    output: z.object({ ticket: z.string() }),
    schemas: { answer: { type: "object", properties: { ticket: { type: "string" } } } },
    maxTurns: 3,
    maxUnknownAttempts: 4,
  });
}

interface Ticket {
  readonly key: string;
  readonly subject: string;
}

/**
 * The server: tickets opened under the request's key; `find_ticket` by key. With `workingPolls`,
 * `create_ticket` is a task that `tasks/get` finds working that many times.
 */
function helpDeskServer(
  dedupes: boolean,
  workingPolls: number | undefined,
): InMemoryMcpServer & { tickets: Ticket[] } {
  const tickets: Ticket[] = [];
  const answer = (ticket: Ticket): McpCallResult => ({
    isError: false,
    content: [{ type: "text", text: ticket.subject }],
  });
  const server = new InMemoryMcpServer({
    create_ticket: {
      inputSchema: { type: "object", properties: { subject: { type: "string" } } },
      ...(workingPolls === undefined ? {} : { task: true, workingPolls }),
      run(args, meta) {
        const key = String(meta[IDEMPOTENCY_KEY_META]);
        const seen = tickets.find((t) => t.key === key);
        if (dedupes && seen) return answer(seen);
        const ticket = { key, subject: String(args.subject) };
        tickets.push(ticket);
        return answer(ticket);
      },
    },
    find_ticket: {
      inputSchema: { type: "object", properties: { key: { type: "string" } } },
      run(args) {
        const ticket = tickets.find((t) => t.key === args.key);
        return ticket ? answer(ticket) : { isError: true, content: [] };
      },
    },
  });
  return Object.assign(server, { tickets });
}

/** The server under the plan's faults, one draw per `create_ticket` call. */
class FaultyMcp implements McpServerPort {
  constructor(
    private readonly inner: InMemoryMcpServer,
    private readonly random: Random,
    private readonly rate: number,
    private readonly injected: Record<string, number>,
  ) {}

  listTools() {
    return this.inner.listTools();
  }

  async callTool(call: McpCall): Promise<McpCallResult> {
    const fault = call.name === "create_ticket" ? this.draw() : undefined;
    if (fault) add(this.injected, `${fault} mcp`);
    if (fault === "crash-after-write") {
      await this.inner.callTool(call);
      throw new WorkerCrash("the worker died after the MCP server ran the call");
    }
    if (fault) this.inner.failNext(TWIN_FAULT[fault]);
    return this.inner.callTool(call);
  }

  /** A task created: the worker may die before the ledger keeps its id (a crash-after-write). */
  async startTask(call: McpCall) {
    const task = await this.inner.startTask(call);
    if (this.random.chance(this.rate)) {
      add(this.injected, "crash-after-task-created mcp");
      throw new WorkerCrash("the worker died after the MCP server created the task");
    }
    return task;
  }

  /** A poll: the worker may die while it asks (the task's id is kept by then). */
  async getTask(taskId: string) {
    if (this.random.chance(this.rate)) {
      add(this.injected, "crash-while-polling mcp");
      throw new WorkerCrash("the worker died while it polled the MCP task");
    }
    return this.inner.getTask(taskId);
  }

  taskResult(taskId: string) {
    return this.inner.taskResult(taskId);
  }

  private draw(): McpSimFault | undefined {
    for (const fault of MCP_FAULTS) if (this.random.chance(this.rate)) return fault;
    return undefined;
  }
}

/** The planted defect: every call goes out under a key of its own. */
function withKeyPerAttempt(port: McpServerPort): McpServerPort {
  let attempts = 0;
  const minted = (call: McpCall): McpCall => {
    const key = call.meta?.[IDEMPOTENCY_KEY_META];
    if (key === undefined) return call;
    return { ...call, meta: { ...call.meta, [IDEMPOTENCY_KEY_META]: `${key}#${attempts++}` } };
  };
  return {
    listTools: () => port.listTools(),
    callTool: (call) => port.callTool(minted(call)),
    startTask: (call) => port.startTask(minted(call)),
    getTask: (taskId, timeoutMs) => port.getTask(taskId, timeoutMs),
    taskResult: (taskId, timeoutMs) => port.taskResult(taskId, timeoutMs),
  };
}

/** Each ticket the agent asked for (one per run, by subject) opened at most once. */
function appliedOnce(server: { tickets: Ticket[] }): Violation[] {
  const opened = new Map<string, number>();
  for (const { subject } of server.tickets) opened.set(subject, (opened.get(subject) ?? 0) + 1);
  return [...opened]
    .filter(([, n]) => n > 1)
    .map(([subject, n]) => ({
      invariant: MCP_APPLIED_ONCE,
      detail: `the MCP server opened "${subject}" ${n} times`,
    }));
}
