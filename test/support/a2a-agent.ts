import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { type AgentCard, type Message, type Part, Role, type Task, TaskState } from "@a2a-js/sdk";
import {
  type AgentExecutor,
  DefaultRequestHandler,
  type ExecutionEventBus,
  InMemoryTaskStore,
  type RequestContext,
} from "@a2a-js/sdk/server";
import { agentCardHandler, jsonRpcHandler, UserBuilder } from "@a2a-js/sdk/server/express";

/** What the test uses of Express (a peer of the SDK's server, whose types are not installed). */
interface ExpressApp {
  use(...handlers: unknown[]): void;
  listen(port: number, host: string, ready: () => void): Server;
}
type Middleware = (
  req: IncomingMessage & { body?: unknown },
  res: ServerResponse,
  next: () => void,
) => void;
interface Express {
  (): ExpressApp;
  json(): Middleware;
}

/**
 * An A2A agent from the official SDK (`DefaultRequestHandler`, `InMemoryTaskStore`, the Express
 * JSON-RPC handler), run by a test on 127.0.0.1, that counts the messages it receives. A small
 * billing desk: each message opens an invoice (an applied write) and completes its task with the
 * invoice's id as an artifact's text and data; when it `dedupes`, a message id it has seen gives
 * the invoice it opened then. A message whose text holds "refuse" fails its task, "reject" is
 * rejected, "more" asks for input; "attach" adds the invoice as a file (its bytes, `INVOICE_PDF`)
 * and the partner's terms as a file by URI (`TERMS_URI`). `answerDelayMs` delays the task's end after the invoice is
 * opened (the first event, the task `working`, is sent at once). With `workPolls` = N, a task
 * stays `working` (and its stream open) until its N+1th `tasks/get`, which finds it ended. It takes requests with
 * `Authorization: Bearer <token>` only (401 otherwise); its card is at `cardUrl`.
 */

export interface TestA2aAgent {
  readonly cardUrl: string;
  /** Messages received (`message/send` and `message/stream`), in order. */
  readonly received: {
    messageId: string;
    text: string;
    data?: unknown;
    metadata: Record<string, unknown>;
  }[];
  /** Invoices opened (each an applied write), in order. */
  readonly invoices: { readonly id: string; readonly messageId: string }[];
  /** `tasks/get` and `tasks/list` requests received. */
  readonly reads: { get: number; list: number };
  answerDelayMs: number;
  /** How many `tasks/get` find a task still `working` before it goes on to its end. */
  workPolls: number;
  close(): Promise<void>;
}

export const A2A_TOKEN = "a2a-token-for-tests";
export const INVOICE_PDF = Buffer.from("%PDF-1.7 an invoice");
export const TERMS_URI = "https://billing.partner.example/terms.pdf";

export async function startTestA2aAgent(
  options: { readonly dedupes?: boolean } = {},
): Promise<TestA2aAgent> {
  const state = {
    received: [] as TestA2aAgent["received"],
    invoices: [] as TestA2aAgent["invoices"][number][],
    reads: { get: 0, list: 0 },
    answerDelayMs: 0,
    workPolls: 0,
  };
  const store = new WatchedTaskStore();
  const held: (() => void)[] = [];
  const { default: express } = (await import("express" as string)) as { default: Express };
  const app = express();
  const http: Server = await new Promise((done) => {
    const server = app.listen(0, "127.0.0.1", () => done(server));
  });
  const base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  const handler = new DefaultRequestHandler(
    billingCard(base),
    store,
    billingDesk(state, options.dedupes ?? false, held),
  );
  const authorized: Middleware = (req, res, next) => {
    if (req.headers.authorization !== `Bearer ${A2A_TOKEN}`) res.writeHead(401).end("unauthorized");
    else next();
  };
  const counted: Middleware = (req, _res, next) => {
    const body = req.body as { method?: unknown; params?: { id?: unknown } } | undefined;
    const method = body?.method;
    if (method === "ListTasks" || method === "tasks/list") state.reads.list += 1;
    if (method !== "GetTask" && method !== "tasks/get") return next();
    state.reads.get += 1;
    const taskId = body?.params?.id;
    if (state.reads.get <= state.workPolls || typeof taskId !== "string" || held.length === 0)
      return next();
    // The work is done: the held tasks go on to their end before this read is answered.
    for (const go of held.splice(0)) go();
    store.ended(taskId).then(next, next);
  };
  app.use(authorized, express.json(), counted);
  app.use("/.well-known/agent-card.json", agentCardHandler({ agentCardProvider: handler }));
  app.use(
    "/a2a",
    jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }),
  );
  return Object.assign(state, {
    cardUrl: `${base}/.well-known/agent-card.json`,
    close: () =>
      new Promise<void>((done) => {
        http.closeAllConnections();
        http.close(() => done());
      }),
  });
}

function billingCard(base: string): AgentCard {
  return {
    name: "Billing desk",
    description: "Opens invoices for a partner's customers.",
    supportedInterfaces: [
      { url: `${base}/a2a`, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" },
    ],
    provider: undefined,
    version: "1.0.0",
    capabilities: { streaming: true, extensions: [] },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ["text/plain", "application/json"],
    defaultOutputModes: ["text/plain", "application/json"],
    skills: [
      {
        id: "open_invoice",
        name: "Open an invoice",
        description: "Opens an invoice for a customer and says its id.",
        tags: ["billing"],
        examples: [],
        inputModes: [],
        outputModes: [],
        securityRequirements: [],
      },
    ],
    signatures: [],
  };
}

type State = Omit<TestA2aAgent, "cardUrl" | "close">;

/** The SDK's store, telling when a task has ended (or stopped for input). */
class WatchedTaskStore extends InMemoryTaskStore {
  private readonly states = new Map<string, TaskState | undefined>();
  private waiters: (() => void)[] = [];

  override async save(...args: Parameters<InMemoryTaskStore["save"]>): Promise<void> {
    await super.save(...args);
    this.states.set(args[0].id, args[0].status?.state);
    for (const wake of this.waiters.splice(0)) wake();
  }

  async ended(taskId: string): Promise<void> {
    while (!ENDED.has(this.states.get(taskId) ?? TaskState.TASK_STATE_WORKING))
      await new Promise<void>((wake) => this.waiters.push(wake));
  }
}

const ENDED = new Set([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_REJECTED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_INPUT_REQUIRED,
  TaskState.TASK_STATE_AUTH_REQUIRED,
]);

function billingDesk(state: State, dedupes: boolean, held: (() => void)[]): AgentExecutor {
  return {
    async execute(context: RequestContext, bus: ExecutionEventBus) {
      const message = context.userMessage;
      const text = message.parts.flatMap(textOf).join("\n");
      const data = message.parts.flatMap(dataOf)[0];
      const metadata = { ...message.metadata };
      state.received.push({
        messageId: message.messageId,
        text,
        ...(data ? { data } : {}),
        metadata,
      });
      const task = taskOf(context, TaskState.TASK_STATE_WORKING);
      bus.publish({ kind: "task", data: task });
      if (state.workPolls > 0) await new Promise<void>((go) => held.push(go));
      const ended = (s: TaskState, words: string) => {
        bus.publish({ kind: "statusUpdate", data: statusOf(task, s, words) });
        bus.finished();
      };
      if (text.includes("refuse")) return ended(TaskState.TASK_STATE_FAILED, "invoice refused");
      if (text.includes("reject")) return ended(TaskState.TASK_STATE_REJECTED, "not for us");
      if (text.includes("more"))
        return ended(TaskState.TASK_STATE_INPUT_REQUIRED, "which customer?");
      const seen = state.invoices.find((i) => i.messageId === message.messageId);
      const invoice =
        dedupes && seen
          ? seen
          : { id: `INV-${state.invoices.length + 1}`, messageId: message.messageId };
      if (invoice !== seen) state.invoices.push(invoice);
      if (state.answerDelayMs > 0) await new Promise((r) => setTimeout(r, state.answerDelayMs));
      bus.publish({
        kind: "artifactUpdate",
        data: {
          taskId: task.id,
          contextId: task.contextId,
          artifact: {
            artifactId: "invoice",
            name: "invoice",
            description: "",
            parts: [
              textPart(`opened ${invoice.id}`),
              dataPart({ invoice: invoice.id }),
              ...(text.includes("attach") ? attachments(invoice.id) : []),
            ],
            metadata: undefined,
            extensions: [],
          },
          append: false,
          lastChunk: true,
          metadata: undefined,
        },
      });
      ended(TaskState.TASK_STATE_COMPLETED, "done");
    },
    async cancelTask() {},
  };
}

function taskOf(context: RequestContext, state: TaskState): Task {
  return {
    id: context.taskId,
    contextId: context.contextId,
    status: { state, message: undefined, timestamp: new Date().toISOString() },
    artifacts: [],
    history: [context.userMessage],
    metadata: undefined,
  };
}

function statusOf(task: Task, state: TaskState, words: string) {
  const message: Message = {
    messageId: crypto.randomUUID(),
    contextId: task.contextId,
    taskId: task.id,
    role: Role.ROLE_AGENT,
    parts: [textPart(words)],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
  return {
    taskId: task.id,
    contextId: task.contextId,
    status: { state, message, timestamp: new Date().toISOString() },
    metadata: undefined,
  };
}

function textOf(part: Part): string[] {
  return part.content?.$case === "text" ? [part.content.value] : [];
}

function dataOf(part: Part): unknown[] {
  return part.content?.$case === "data" ? [part.content.value] : [];
}

function textPart(value: string): Part {
  return { content: { $case: "text", value }, metadata: undefined, filename: "", mediaType: "" };
}

function dataPart(value: Record<string, unknown>): Part {
  return { content: { $case: "data", value }, metadata: undefined, filename: "", mediaType: "" };
}

/** The invoice as a file of bytes, and the partner's terms as a file by URI. */
function attachments(invoice: string): Part[] {
  return [
    {
      content: { $case: "raw", value: INVOICE_PDF },
      metadata: undefined,
      filename: `${invoice}.pdf`,
      mediaType: "application/pdf",
    },
    {
      content: { $case: "url", value: TERMS_URI },
      metadata: undefined,
      filename: "",
      mediaType: "",
    },
  ];
}
