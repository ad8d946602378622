import { TransientError, UnknownOutcomeError } from "../../core/errors";
import type { A2aAgentPort, A2aCard, A2aOutgoing, A2aTaskView } from "./port";

/**
 * The A2A integration's twin: an agent in memory with the port's error contract (./port.ts). Its
 * answer to a message is the test's (`answer`); each message makes a task in the message's
 * context, kept for `getTask` and `findTask`. It keeps every message that reached it, and fails
 * the next sends as told (`failNext`): unavailable (nothing reached it), a timeout before or after
 * the agent acted.
 */

export type A2aFault = "unavailable" | "timeout before acting" | "timeout after acting";

export type A2aAnswer = (
  message: A2aOutgoing,
) => Omit<A2aTaskView, "taskId"> | Promise<Omit<A2aTaskView, "taskId">>;

export class InMemoryA2aAgent implements A2aAgentPort {
  /** Every message that reached the agent, in order. */
  readonly received: A2aOutgoing[] = [];
  private readonly tasks: { contextId: string; view: A2aTaskView }[] = [];
  private readonly faults: A2aFault[] = [];

  constructor(
    private answer: A2aAnswer = () => ({ state: "completed", text: "" }),
    private readonly cardSaid: A2aCard = {
      name: "agent",
      description: "",
      skills: [],
      hash: "sha256:memory",
    },
  ) {}

  /** How the agent answers from now on. */
  answers(answer: A2aAnswer): this {
    this.answer = answer;
    return this;
  }

  /** The next sends fail as said, one fault each. */
  failNext(...faults: A2aFault[]): void {
    this.faults.push(...faults);
  }

  async card(): Promise<A2aCard> {
    return this.cardSaid;
  }

  async send(message: A2aOutgoing): Promise<A2aTaskView> {
    const fault = this.faults.shift();
    if (fault === "unavailable")
      throw new TransientError("a2a.unavailable", "the A2A agent is unavailable");
    if (fault === "timeout before acting")
      throw new UnknownOutcomeError("a2a.timeout", "no answer in time");
    this.received.push(message);
    const view = { taskId: `task-${this.tasks.length + 1}`, ...(await this.answer(message)) };
    this.tasks.push({ contextId: message.contextId, view });
    if (fault === "timeout after acting")
      throw new UnknownOutcomeError("a2a.timeout", "no answer in time", {
        details: { taskId: view.taskId },
      });
    return view;
  }

  async getTask(taskId: string): Promise<A2aTaskView | undefined> {
    return this.tasks.find((t) => t.view.taskId === taskId)?.view;
  }

  async findTask(contextId: string): Promise<A2aTaskView | undefined> {
    return this.tasks.find((t) => t.contextId === contextId)?.view;
  }
}
