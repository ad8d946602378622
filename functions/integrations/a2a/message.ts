import type { ContentStore } from "../../core/agent/content";
import { PermanentError, UnknownOutcomeError } from "../../core/errors";
import { StillWorkingError, type WriteFound } from "../../core/write-once";
import { IDEMPOTENCY_KEY_META } from "../mcp/port";
import { type A2aFileRef, fileLimit, keepFiles } from "./files";
import type { A2aAgentPort, A2aCard, A2aTaskView } from "./port";

/**
 * One message to another system's agent and its answer as an outcome: the core an agent's tool
 * (./tool.ts) and a workflow step (./step.ts) share. A write's message is sent under the step's
 * key: it is the message's id, it is in the message's metadata (`io.agentbus/idempotency-key`),
 * and it is the context the agent makes the task in, so that a redelivery can find the task by it.
 *
 * - a task `completed` (or a direct answer): its output, the artifacts' text (and data);
 * - `failed`, `rejected`, `canceled`: refused (`a2a.task_failed`, `a2a.task_rejected`,
 *   `a2a.task_canceled`), with the agent's words;
 * - `input-required`, `auth-required`: refused (`a2a.input_required`, `a2a.auth_required`): the
 *   agent asks for more than a message can give; the run is not put to wait for it;
 * - no answer in time, a connection dropped after sending: unknown, learnt by `learn`: the task
 *   by its id when the agent said it (`tasks/get`), else the task made in the key's context
 *   (`tasks/list`); completed -> applied; failed, rejected, canceled -> not applied (a message
 *   again under the same key); still working, waiting for input, or not found -> cannot tell;
 * - a task still `submitted` or `working` when the agent answered (its id known): the caller that
 *   can wait (an agent's tool: `started` keeps the id with the ledger's record) is told it goes on
 *   (StillWorkingError `a2a.task_working`) and polls it by `resume` (`tasks/get`): the run's task
 *   wait (functions/core/agent/task-wait.ts), or a workflow step's (`sendAndWait`, which counts
 *   a call that ran out of time after the agent named its task as that task still working,
 *   functions/core/step-role.ts); for any other caller it stays unknown as above.
 * An answer's files are kept as ./files.ts says: bytes in the content store, a URI as it is.
 */

export interface A2aCallDeclaration {
  /** The agent, as messages name it (`partner-billing`). */
  readonly agent: string;
  /** A skill of the card the message is for (sent in the metadata as `io.agentbus/skill`). */
  readonly skill?: string;
  /** How long the task may take before its outcome is unknown. @default 30000 */
  readonly timeoutMs?: number;
  /** The card's hash (`a2aCardHash`): another card is refused. */
  readonly pin?: string;
  /** Where the bytes of files in the agent's answers are kept (the role's `content` port). */
  readonly files?: ContentStore;
  /** The most bytes one file of an answer may have. @default MAX_A2A_FILE_BYTES (262,500) */
  readonly maxFileBytes?: number;
}

/** What the agent gave back: its artifacts' text, and their data and files when they have any. */
export interface A2aOutput {
  readonly text: string;
  readonly data?: unknown;
  readonly files?: readonly A2aFileRef[];
}

/** What is sent: the message's text, and a data part. */
export interface A2aContent {
  readonly text?: string;
  readonly data?: Readonly<Record<string, unknown>>;
}

export const DEFAULT_A2A_TIMEOUT_MS = 30_000;
export const SKILL_META = "io.agentbus/skill";

/** The card, checked against the declaration: its pin, and the skill it names. */
export async function checkedCard(
  port: A2aAgentPort,
  declaration: A2aCallDeclaration,
): Promise<A2aCard> {
  const card = await port.card();
  if (declaration.pin !== undefined && card.hash !== declaration.pin)
    throw new PermanentError(
      "a2a.card_changed",
      `the A2A agent ${declaration.agent}'s card is not the one pinned (${declaration.pin}); it is ${card.hash} now`,
    );
  if (declaration.skill !== undefined && !card.skills.some((s) => s.id === declaration.skill))
    throw new PermanentError(
      "a2a.skill_not_listed",
      `the A2A agent ${declaration.agent} has no skill ${declaration.skill} (its card lists: ${card.skills.map((s) => s.id).join(", ") || "none"})`,
    );
  return card;
}

/** The card's hash, as `pin` takes it. */
export async function a2aCardHash(port: A2aAgentPort): Promise<string> {
  return (await port.card()).hash;
}

/**
 * A message and what is learnt of it, by key. The task ids the agent said are kept per key for
 * this container (a redelivery elsewhere finds the task by the key's context instead).
 */
export class A2aExchange {
  private readonly taskIds = new Map<string, string>();

  constructor(
    private readonly port: A2aAgentPort,
    private readonly declaration: A2aCallDeclaration,
  ) {
    // A limit no file could be kept under is refused where the tool or step is declared.
    fileLimit(declaration.agent, declaration.maxFileBytes);
  }

  private get timeoutMs(): number {
    return this.declaration.timeoutMs ?? DEFAULT_A2A_TIMEOUT_MS;
  }

  /**
   * Sends `content` under `key` (a write's) or a fresh id (a read's); its outcome or an error.
   * With `started`, a task still going on is handed to it and thrown as StillWorkingError.
   */
  async send(
    content: A2aContent,
    key: string | undefined,
    started?: (taskId: string) => Promise<void>,
  ): Promise<A2aOutput> {
    await checkedCard(this.port, this.declaration);
    const messageId = key ?? crypto.randomUUID();
    const skill = this.declaration.skill;
    const metadata = {
      ...(key ? { [IDEMPOTENCY_KEY_META]: key } : {}),
      ...(skill ? { [SKILL_META]: skill } : {}),
    };
    try {
      const view = await this.port.send({
        messageId,
        contextId: key ?? messageId,
        ...content,
        metadata,
        timeoutMs: this.timeoutMs,
      });
      if (key && view.taskId) this.taskIds.set(key, view.taskId);
      if (started && view.taskId && GOING_ON.includes(view.state)) await started(view.taskId);
      return await this.outputOf(view, started !== undefined);
    } catch (error) {
      const taskId = (error as UnknownOutcomeError).details?.taskId;
      if (key && error instanceof UnknownOutcomeError && typeof taskId === "string")
        this.taskIds.set(key, taskId);
      throw error;
    }
  }

  /**
   * As `send` with `started`, for a caller that waits for the task however the call ends (a
   * workflow step, ./step.ts): a call whose time ran out, or whose stream dropped, after the agent
   * named its task is that task still going on (StillWorkingError), polled by `resume`.
   */
  async sendAndWait(
    content: A2aContent,
    key: string,
    started: (taskId: string) => Promise<void>,
  ): Promise<A2aOutput> {
    try {
      return await this.send(content, key, started);
    } catch (error) {
      const taskId = (error as UnknownOutcomeError).details?.taskId;
      const named = error instanceof UnknownOutcomeError && typeof taskId === "string";
      if (!named || error instanceof StillWorkingError) throw error;
      await started(taskId);
      throw new StillWorkingError(
        "a2a.task_working",
        `the A2A agent ${this.declaration.agent}'s task ${taskId} had not ended when the call did (${error.message})`,
        { operation: taskId, status: "working" },
      );
    }
  }

  /** The task an earlier send started, asked about once (`tasks/get`): as `send` with `started`. */
  async resume(taskId: string): Promise<A2aOutput> {
    const view = await this.port.getTask(taskId, this.timeoutMs);
    if (!view)
      throw new UnknownOutcomeError(
        "a2a.task_lost",
        `the A2A agent ${this.declaration.agent} no longer knows task ${taskId}`,
        { details: { taskId } },
      );
    return await this.outputOf(view, true);
  }

  /** What the agent knows of the message sent under `key`. */
  async learn(key: string): Promise<WriteFound<A2aOutput>> {
    const taskId = this.taskIds.get(key);
    const view = taskId
      ? await this.port.getTask(taskId, this.timeoutMs)
      : await this.port.findTask(key, this.timeoutMs);
    if (!view) return { status: "unknown" };
    if (view.state === "completed") return { status: "applied", output: await this.kept(view) };
    if (view.state === "failed" || view.state === "rejected" || view.state === "canceled")
      return { status: "not_applied" };
    return { status: "unknown" };
  }

  private async outputOf(view: A2aTaskView, waits: boolean): Promise<A2aOutput> {
    if (view.state === "completed") return this.kept(view);
    if (waits && view.taskId && GOING_ON.includes(view.state))
      throw new StillWorkingError(
        "a2a.task_working",
        `the A2A agent ${this.declaration.agent}'s task ${view.taskId} is ${view.state}`,
        { operation: view.taskId, status: view.state },
      );
    const refused = REFUSALS[view.state];
    const words = view.text || "no reason given";
    if (refused)
      throw new PermanentError(
        refused,
        `the A2A agent ${this.declaration.agent}'s task ${view.taskId ?? ""} ended ${view.state}: ${words}`,
        { details: view.taskId ? { taskId: view.taskId } : {} },
      );
    throw new UnknownOutcomeError(
      "a2a.dropped",
      `the A2A agent ${this.declaration.agent}'s task ${view.taskId ?? ""} is ${view.state}`,
      { details: view.taskId ? { taskId: view.taskId } : {} },
    );
  }

  /** The output of a completed task: its text, data, and files kept (./files.ts). */
  private async kept(view: A2aTaskView): Promise<A2aOutput> {
    const { agent, files: store, maxFileBytes } = this.declaration;
    const files = view.files?.length
      ? await keepFiles(view.files, { agent, store, maxFileBytes })
      : [];
    return {
      text: view.text,
      ...(view.data === undefined ? {} : { data: view.data }),
      ...(files.length > 0 ? { files } : {}),
    };
  }
}

/** The states of a task the agent still works on. */
const GOING_ON: readonly A2aTaskView["state"][] = ["submitted", "working"];

const REFUSALS: Readonly<Partial<Record<A2aTaskView["state"], string>>> = {
  failed: "a2a.task_failed",
  rejected: "a2a.task_rejected",
  canceled: "a2a.task_canceled",
  "input-required": "a2a.input_required",
  "auth-required": "a2a.auth_required",
};
