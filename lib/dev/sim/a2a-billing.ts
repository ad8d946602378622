import { type AgentDefinition, defineAgent } from "../../../functions/core/agent/agent";
import { InMemoryContentStore } from "../../../functions/core/agent/content";
import { classify } from "../../../functions/core/errors";
import { InMemorySideEffects } from "../../../functions/core/side-effects";
import {
  DEFAULT_STEP_ATTEMPTS,
  type StepContext,
  StepWaiting,
} from "../../../functions/core/step-role";
import {
  type A2aAgentPort,
  type A2aFault,
  type A2aOutgoing,
  type A2aTaskView,
  a2aStep,
  a2aTool,
  InMemoryA2aAgent,
} from "../../../functions/integrations/a2a/index";
import { IDEMPOTENCY_KEY_META } from "../../../functions/integrations/mcp/port";
import * as z from "../../../schemas/zod";
import { Random } from "../faults/random";
import type { Violation } from "../faults/violation";
import { add, OneCallModel, playAgentRun, WorkerCrash } from "./agent-runs";

/**
 * A2A write tools in the simulated schedules, beside the MCP ones (./mcp-desk.ts): a clerk agent
 * whose `open_invoice` is another system's A2A agent (the integration's twin,
 * functions/integrations/a2a/memory.ts), run through the agent loop and the side-effect ledger
 * (./agent-runs.ts). Each schedule draws how the agent's writes are learnt (its tasks read by id
 * or by the key's context, an agent that dedupes message ids, or neither: a person) and, at the
 * plan's `a2a` rate, each message's fault: unavailable, a timeout before or after the agent acted,
 * or the worker's crash after the agent acted, before the ledger recorded it; and, per delivered
 * step, a crash before its commit. Then the same agent as a workflow node (`a2aStep` in a role that
 * `waits`), its task working for a few polls: each delivery of the node's request or poll may
 * crash before its commit. Invariant: **A2A message applied once**, each invoice the clerk or the
 * node asked for opened at most once by the remote agent.
 *
 * The planted defect `a2a-message-id-per-attempt` sends every message under a key of its own (a
 * message id, and so a context, minted per attempt): the agent can neither deduplicate it nor be
 * asked for its task by the step's key.
 */

/** The faults of an A2A message, in the order one draw per message picks them. */
export const A2A_FAULTS = [
  "throttle",
  "connection-reset",
  "timeout-after-apply",
  "crash-after-write",
] as const;
type A2aSimFault = (typeof A2A_FAULTS)[number];

/** What each is at the twin: unavailable, a timeout before or after the agent acted. */
const TWIN_FAULT: Readonly<Record<Exclude<A2aSimFault, "crash-after-write">, A2aFault>> = {
  throttle: "unavailable",
  "connection-reset": "timeout before acting",
  "timeout-after-apply": "timeout after acting",
};

export type PlantedA2aBug = "a2a-message-id-per-attempt";

export const A2A_APPLIED_ONCE = "A2A message applied once";

/** How a message's unknown outcome is learnt: the task by id or context, a resend, a person. */
const MODES = ["tasks", "dedupes", "person"] as const;
type Mode = (typeof MODES)[number];

export interface A2aBillingResult {
  readonly violations: Violation[];
  readonly counts: Record<string, number>;
  readonly injected: Record<string, number>;
}

/** The clerk's runs of one schedule, each message's faults at `rate` (the plan's `a2a`). */
export async function playA2aBilling(
  seed: number,
  rate: number,
  bug?: string,
): Promise<A2aBillingResult> {
  const random = new Random(seed ^ 0x2a2a);
  const mode = random.pick(MODES);
  const result: A2aBillingResult = { violations: [], counts: {}, injected: {} };
  const billing = new BillingAgent(mode);
  const faulty = new FaultyA2a(billing, random, rate, result.injected);
  const port = bug === "a2a-message-id-per-attempt" ? withKeyPerAttempt(faulty) : faulty;
  const ports = {
    model: new OneCallModel(
      "a2a-clerk-script",
      "open_invoice",
      (runId) => ({ message: `invoice of ${runId}` }),
      { invoice: "opened" },
    ),
    content: new InMemoryContentStore(),
    sideEffects: new InMemorySideEffects(),
  };
  const agent = clerkAgent(port, mode);
  const runs = 1 + random.below(3);
  for (let i = 0; i < runs; i++) {
    const end = await playAgentRun(agent, ports, `run_a2a_${seed}_${i}`, random);
    add(result.counts, `a2a run ${end} (${mode})`);
  }
  const node = await playBillingNode(port, billing, random, rate, seed);
  add(result.counts, `a2a node ${node} (${mode})`);
  result.violations.push(...appliedOnce(billing.invoices));
  return result;
}

function clerkAgent(port: A2aAgentPort, mode: Mode): AgentDefinition {
  return defineAgent({
    name: "a2a-clerk",
    instructions: "Have the billing agent open the invoice the customer asks for.",
    tools: [a2aTool(port, { name: "open_invoice", agent: "billing", dedupes: mode === "dedupes" })],
    output: z.object({ invoice: z.string() }),
    schemas: { answer: { type: "object", properties: { invoice: { type: "string" } } } },
    maxTurns: 3,
    maxUnknownAttempts: 4,
  });
}

interface Invoice {
  readonly messageId: string;
  readonly text: string;
}

/**
 * A workflow node whose handler is `a2aStep` in a role that waits, played delivery by delivery as
 * the step role and the orchestrator would: the output completes the node; StepWaiting makes the
 * next delivery the poll, at its time; a transient error or a crash before the commit delivers it
 * again (up to the step's attempts); a refusal or an unknown outcome fails the node. How it ended.
 */
async function playBillingNode(
  port: A2aAgentPort,
  billing: BillingAgent,
  random: Random,
  rate: number,
  seed: number,
): Promise<string> {
  billing.workPolls = random.below(4);
  const ledger = new InMemorySideEffects();
  const step = a2aStep(port, ledger, { agent: "billing", taskLimitSeconds: 600 });
  const input = { message: `invoice of node ${seed}` };
  let now = Date.parse("2026-01-01T00:00:00.000Z");
  let receiveCount = 1;
  let waited = false;
  for (let delivery = 0; delivery < 50; delivery++) {
    const context: StepContext = {
      ...{ runId: `run_node_${seed}`, nodeId: "invoice", generation: 1, attempt: 1 },
      ...{ role: "billing", taskId: `task_node_${seed}`, now: new Date(now), receiveCount },
      mayWait: true,
    };
    const crashes = random.chance(rate);
    try {
      await step(input, context);
      if (!crashes) return waited ? "completed after waiting" : "completed";
    } catch (error) {
      if (error instanceof StepWaiting && !crashes) {
        [now, receiveCount, waited] = [error.pollAt.getTime(), 1, true];
        continue;
      }
      const again = error instanceof WorkerCrash || classify(error) === "transient";
      if (!again && !(error instanceof StepWaiting)) return "failed";
    }
    if (receiveCount >= DEFAULT_STEP_ATTEMPTS) return "failed (retries spent)";
    [now, receiveCount] = [now + 1000, receiveCount + 1];
  }
  return "still waiting";
}

/**
 * The remote billing agent: each message opens an invoice and completes its task; when it
 * dedupes, a message id it has seen gives the invoice it opened then; in `person` mode it cannot
 * be asked for a task (by id or context), as an agent whose tasks are gone. With `workPolls`, a
 * task is `working` when the message is answered and for that many `getTask`s after.
 */
class BillingAgent extends InMemoryA2aAgent {
  readonly invoices: Invoice[] = [];
  workPolls = 0;
  private polls = 0;

  constructor(private readonly mode: Mode) {
    super();
    this.answers((message) => {
      const seen = this.invoices.find((i) => i.messageId === message.messageId);
      if (!(mode === "dedupes" && seen))
        this.invoices.push({ messageId: message.messageId, text: message.text ?? "" });
      const state = this.workPolls > 0 ? "working" : "completed";
      return { state, text: "opened", data: { invoice: message.messageId } };
    });
  }

  override async getTask(taskId: string): Promise<A2aTaskView | undefined> {
    if (this.mode === "person") return undefined;
    const view = await super.getTask(taskId);
    if (view?.state !== "working" || ++this.polls <= this.workPolls) return view;
    return { ...view, state: "completed" };
  }

  override async findTask(contextId: string): Promise<A2aTaskView | undefined> {
    return this.mode === "person" ? undefined : super.findTask(contextId);
  }
}

/** The agent under the plan's faults, one draw per message. */
class FaultyA2a implements A2aAgentPort {
  constructor(
    private readonly inner: InMemoryA2aAgent,
    private readonly random: Random,
    private readonly rate: number,
    private readonly injected: Record<string, number>,
  ) {}

  card() {
    return this.inner.card();
  }

  async send(message: A2aOutgoing): Promise<A2aTaskView> {
    const fault = this.draw();
    if (fault) add(this.injected, `${fault} a2a`);
    if (fault === "crash-after-write") {
      await this.inner.send(message);
      throw new WorkerCrash("the worker died after the A2A agent acted on the message");
    }
    if (fault) this.inner.failNext(TWIN_FAULT[fault]);
    return this.inner.send(message);
  }

  getTask(taskId: string) {
    return this.inner.getTask(taskId);
  }

  findTask(contextId: string) {
    return this.inner.findTask(contextId);
  }

  private draw(): A2aSimFault | undefined {
    for (const fault of A2A_FAULTS) if (this.random.chance(this.rate)) return fault;
    return undefined;
  }
}

/** The planted defect: every message goes out under a key (message id, context) of its own. */
function withKeyPerAttempt(port: A2aAgentPort): A2aAgentPort {
  let attempts = 0;
  const minted = (message: A2aOutgoing): A2aOutgoing => {
    const key = message.metadata[IDEMPOTENCY_KEY_META];
    if (key === undefined) return message;
    const fresh = `${String(key)}#${attempts++}`;
    const metadata = { ...message.metadata, [IDEMPOTENCY_KEY_META]: fresh };
    return { ...message, messageId: fresh, contextId: fresh, metadata };
  };
  return {
    card: () => port.card(),
    send: (message) => port.send(minted(message)),
    getTask: (taskId, timeoutMs) => port.getTask(taskId, timeoutMs),
    findTask: (contextId, timeoutMs) => port.findTask(contextId, timeoutMs),
  };
}

/** Each invoice the clerk asked for (one per run, by its text) opened at most once. */
function appliedOnce(invoices: readonly Invoice[]): Violation[] {
  const opened = new Map<string, number>();
  for (const { text } of invoices) opened.set(text, (opened.get(text) ?? 0) + 1);
  return [...opened]
    .filter(([, n]) => n > 1)
    .map(([text, n]) => ({
      invariant: A2A_APPLIED_ONCE,
      detail: `the A2A agent opened "${text}" ${n} times`,
    }));
}
