import { createHash } from "node:crypto";
import {
  type AgentCard,
  type Part,
  Role,
  type StreamResponse,
  type Task,
  TaskState,
} from "@a2a-js/sdk";
import {
  type Client,
  ClientFactory,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from "@a2a-js/sdk/client";
import { PermanentError, TransientError, UnknownOutcomeError } from "../../core/errors";
import { canonicalJson } from "../../core/model";
import { surelyNotSent } from "../not-sent";
import type { A2aFile } from "./files";
import type { A2aAgentPort, A2aCard, A2aOutgoing, A2aTaskState, A2aTaskView } from "./port";
import { FINAL_STATES, INTERRUPTED_STATES } from "./port";

/**
 * Another system's agent over A2A, through the official SDK's client (`ClientFactory`: the card
 * read from the URL of the role's use, the transport it offers, JSON-RPC or HTTP+JSON). One client
 * per container, made on first use with the bearer token `token` gives, and made again after a
 * card that could not be read or a 401 (the token read again). A message is sent streamed, so the
 * remote task's id is known from the agent's first event; an agent that does not stream is sent
 * it plainly by the SDK. Errors follow the port's contract (./port.ts): HTTP statuses are told by
 * the fetch this client gives the SDK, before the SDK reads the body.
 */

export interface SdkA2aAgentOptions {
  /** The agent card's URL (`https://partner.example.com/.well-known/agent-card.json`). */
  readonly url: string;
  /** The bearer token (read when the client is made); none: no Authorization header. */
  readonly token?: () => Promise<string>;
}

/** How long reading the card (or any request given no timeout of its own) may take. */
const CARD_TIMEOUT_MS = 10_000;

export class SdkA2aAgent implements A2aAgentPort {
  private made: Promise<{ client: Client; card: A2aCard }> | undefined;

  constructor(private readonly options: SdkA2aAgentOptions) {}

  async card(): Promise<A2aCard> {
    return (await this.connected()).card;
  }

  async send(message: A2aOutgoing): Promise<A2aTaskView> {
    const { client } = await this.connected();
    const followed = new TaskFollower();
    try {
      const signal = AbortSignal.timeout(message.timeoutMs);
      for await (const event of client.sendMessageStream(requestOf(message), { signal })) {
        followed.see(event);
        if (followed.settled()) break;
      }
    } catch (error) {
      throw this.told("message", error, followed.taskId);
    }
    if (!followed.settled())
      throw new UnknownOutcomeError(
        "a2a.dropped",
        `the A2A agent ${this.options.url} ended the stream with its task ${followed.view().state}`,
        { details: followed.taskId ? { taskId: followed.taskId } : {} },
      );
    return followed.view();
  }

  async getTask(taskId: string, timeoutMs: number): Promise<A2aTaskView | undefined> {
    const { client } = await this.connected();
    try {
      const task = await client.getTask(
        { tenant: "", id: taskId },
        { signal: AbortSignal.timeout(timeoutMs) },
      );
      return viewOfTask(task);
    } catch (error) {
      // Not found (a 404 over HTTP+JSON), or any other refusal of the read: it cannot tell.
      if (isA2aError(error) || error instanceof PermanentError) return undefined;
      throw this.told("tasks/get", error);
    }
  }

  async findTask(contextId: string, timeoutMs: number): Promise<A2aTaskView | undefined> {
    const { client } = await this.connected();
    try {
      const listed = await client.listTasks(
        {
          tenant: "",
          contextId,
          status: TaskState.TASK_STATE_UNSPECIFIED,
          pageToken: "",
          statusTimestampAfter: undefined,
          includeArtifacts: true,
        },
        { signal: AbortSignal.timeout(timeoutMs) },
      );
      const task = listed.tasks.find((t) => t.contextId === contextId);
      return task ? viewOfTask(task) : undefined;
    } catch (error) {
      // An agent that cannot list (unsupported, no such method): the task cannot be found by it.
      if (isA2aError(error) || error instanceof PermanentError) return undefined;
      throw this.told("tasks/list", error);
    }
  }

  /** The client and card; a failed read of the card is tried again by the next request. */
  private connected(): Promise<{ client: Client; card: A2aCard }> {
    this.made ??= this.make().catch((error: unknown) => {
      this.made = undefined;
      throw error;
    });
    return this.made;
  }

  private async make(): Promise<{ client: Client; card: A2aCard }> {
    const token = await this.options.token?.();
    const fetchImpl = statusTelling(token, () => {
      this.made = undefined;
    });
    const resolver = new DefaultAgentCardResolver({ fetchImpl });
    let card: AgentCard;
    try {
      card = await resolver.resolve(this.options.url, "");
    } catch (error) {
      throw this.cardError(error);
    }
    const checked = cardOf(card, this.options.url);
    const factory = new ClientFactory({
      transports: [
        new JsonRpcTransportFactory({ fetchImpl }),
        new RestTransportFactory({ fetchImpl }),
      ],
    });
    try {
      return { client: await factory.createFromAgentCard(card), card: checked };
    } catch (error) {
      throw badCard(this.options.url, error instanceof Error ? error.message : String(error));
    }
  }

  /** A card not read: nothing there to reach, no answer, or a 401, 429, 5xx (retried); else refused. */
  private cardError(error: unknown): Error {
    const words = error instanceof Error ? error.message : String(error);
    const name = (error as { name?: unknown } | undefined)?.name;
    const unreached =
      error instanceof TransientError ||
      error instanceof UnknownOutcomeError ||
      name === "TimeoutError" ||
      name === "AbortError" ||
      (error instanceof TypeError && words === "fetch failed");
    if (!unreached) return badCard(this.options.url, words);
    return new TransientError(
      "a2a.unavailable",
      `the A2A agent card ${this.options.url}: ${words}`,
      {
        cause: error,
      },
    );
  }

  /** An error, told as the port's contract says. */
  private told(what: string, error: unknown, taskId?: string): Error {
    if (error instanceof TransientError || error instanceof PermanentError) return error;
    const words = `${what} at the A2A agent ${this.options.url}: ${error instanceof Error ? error.message : String(error)}`;
    const details = taskId ? { taskId } : {};
    if (error instanceof UnknownOutcomeError)
      return new UnknownOutcomeError(error.code, words, { cause: error, details });
    const name = (error as { name?: unknown } | undefined)?.name;
    if (name === "TimeoutError" || name === "AbortError")
      return new UnknownOutcomeError("a2a.timeout", words, { cause: error, details });
    if (surelyNotSent(error)) return new TransientError("a2a.unavailable", words, { cause: error });
    if (isA2aError(error))
      return new PermanentError("a2a.protocol_error", words, { details: { error: String(name) } });
    if (/HTTP error|Status: 4\d\d/.test(words)) return new PermanentError("a2a.refused", words);
    return new UnknownOutcomeError("a2a.dropped", words, { cause: error, details });
  }
}

function badCard(url: string, why: string): PermanentError {
  return new PermanentError("a2a.bad_card", `the A2A agent card at ${url} cannot be used: ${why}`);
}

/** What the hub uses of a card, checked: a name and somewhere to send messages. */
export function cardOf(card: AgentCard, url: string): A2aCard {
  if (typeof card?.name !== "string" || card.name === "")
    throw badCard(url, "it has no name (is it an agent card?)");
  if (!Array.isArray(card.supportedInterfaces) || card.supportedInterfaces.length === 0)
    throw badCard(url, "it names no interface (supportedInterfaces) to send messages to");
  const skills = (card.skills ?? []).map(({ id, name, description }) => ({
    id,
    name,
    description: description ?? "",
  }));
  const shown = { name: card.name, description: card.description ?? "", skills };
  const hash = `sha256:${createHash("sha256").update(canonicalJson(shown)).digest("hex")}`;
  return { ...shown, hash };
}

/**
 * A fetch that tells HTTP statuses the SDK would turn into plain errors: 401 (the token read
 * again: `forget`) and 429, 408: nothing done, retried; 5xx: it may have been acted on.
 */
function statusTelling(token: string | undefined, forget: () => void): typeof fetch {
  return async (input, init) => {
    const headers = new Headers(init?.headers);
    if (token) headers.set("Authorization", `Bearer ${token}`);
    const signal = init?.signal ?? AbortSignal.timeout(CARD_TIMEOUT_MS);
    const response = await fetch(input, { ...init, headers, signal });
    const where = `${init?.method ?? "GET"} ${String(input)}: HTTP ${response.status}`;
    if (response.status === 401) {
      forget();
      throw new TransientError("a2a.unavailable", `${where} (the token is read again)`);
    }
    if (response.status === 408 || response.status === 429)
      throw new TransientError("a2a.throttled", where);
    if (response.status >= 500) throw new UnknownOutcomeError("a2a.dropped", where);
    if (response.status >= 400 && (init?.method ?? "GET") === "GET")
      throw new PermanentError("a2a.refused", where);
    return response;
  };
}

function requestOf(message: A2aOutgoing) {
  const parts: Part[] = [];
  if (message.text !== undefined) parts.push(part({ $case: "text", value: message.text }));
  if (message.data !== undefined) parts.push(part({ $case: "data", value: { ...message.data } }));
  return {
    tenant: "",
    message: {
      messageId: message.messageId,
      contextId: message.contextId,
      taskId: "",
      role: Role.ROLE_USER,
      parts,
      metadata: { ...message.metadata },
      extensions: [],
      referenceTaskIds: [],
    },
    configuration: undefined,
    metadata: { ...message.metadata },
  };
}

function part(content: Part["content"]): Part {
  return { content, metadata: undefined, filename: "", mediaType: "" };
}

/** What a stream has said of the task so far. */
class TaskFollower {
  taskId: string | undefined;
  private state: A2aTaskState = "submitted";
  private artifacts = new Map<string, Part[]>();
  private statusParts: Part[] = [];
  private answered = false;

  see(event: StreamResponse): void {
    const payload = event.payload;
    if (!payload) return;
    if (payload.$case === "message") {
      this.state = "completed";
      this.statusParts = payload.value.parts;
      this.answered = true;
    } else if (payload.$case === "task") {
      this.taskId = payload.value.id;
      this.state = stateOf(payload.value.status?.state);
      this.statusParts = payload.value.status?.message?.parts ?? [];
      for (const artifact of payload.value.artifacts)
        this.artifacts.set(artifact.artifactId, artifact.parts);
    } else if (payload.$case === "statusUpdate") {
      this.taskId = payload.value.taskId;
      this.state = stateOf(payload.value.status?.state);
      this.statusParts = payload.value.status?.message?.parts ?? this.statusParts;
    } else if (payload.$case === "artifactUpdate" && payload.value.artifact) {
      const { artifactId, parts } = payload.value.artifact;
      const before = payload.value.append ? (this.artifacts.get(artifactId) ?? []) : [];
      this.artifacts.set(artifactId, [...before, ...parts]);
    }
  }

  settled(): boolean {
    return this.answered || FINAL_STATES.has(this.state) || INTERRUPTED_STATES.has(this.state);
  }

  view(): A2aTaskView {
    return viewOf(this.taskId, this.state, [...this.artifacts.values()].flat(), this.statusParts);
  }
}

function viewOfTask(task: Task): A2aTaskView {
  const parts = task.artifacts.flatMap((a) => a.parts);
  return viewOf(task.id, stateOf(task.status?.state), parts, task.status?.message?.parts ?? []);
}

function viewOf(
  taskId: string | undefined,
  state: A2aTaskState,
  artifactParts: readonly Part[],
  statusParts: readonly Part[],
): A2aTaskView {
  const parts = artifactParts.length > 0 ? artifactParts : statusParts;
  const text = parts.flatMap((p) => (p.content?.$case === "text" ? [p.content.value] : []));
  const data = parts.flatMap((p) => (p.content?.$case === "data" ? [p.content.value] : []));
  const files = parts.flatMap(fileOf);
  return {
    ...(taskId ? { taskId } : {}),
    state,
    text: text.join("\n"),
    ...(data.length === 1 ? { data: data[0] } : data.length > 1 ? { data } : {}),
    ...(files.length > 0 ? { files } : {}),
  };
}

/** A file part (`raw` bytes or a `url`) as the port gives it; none for another part. */
function fileOf(part: Part): A2aFile[] {
  const about = {
    ...(part.filename ? { name: part.filename } : {}),
    ...(part.mediaType ? { mediaType: part.mediaType } : {}),
  };
  if (part.content?.$case === "raw")
    return [{ ...about, bytes: new Uint8Array(part.content.value) }];
  if (part.content?.$case === "url") return [{ ...about, uri: part.content.value }];
  return [];
}

const STATES: Readonly<Record<number, A2aTaskState>> = {
  [TaskState.TASK_STATE_SUBMITTED]: "submitted",
  [TaskState.TASK_STATE_WORKING]: "working",
  [TaskState.TASK_STATE_COMPLETED]: "completed",
  [TaskState.TASK_STATE_FAILED]: "failed",
  [TaskState.TASK_STATE_CANCELED]: "canceled",
  [TaskState.TASK_STATE_INPUT_REQUIRED]: "input-required",
  [TaskState.TASK_STATE_REJECTED]: "rejected",
  [TaskState.TASK_STATE_AUTH_REQUIRED]: "auth-required",
};

function stateOf(state: TaskState | undefined): A2aTaskState {
  return (state !== undefined && STATES[state]) || "unknown";
}

function isA2aError(error: unknown): boolean {
  return error instanceof Error && Symbol.for("@a2a-js/sdk.A2AError") in error;
}
