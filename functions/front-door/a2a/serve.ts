import { A2A_VERSION_HEADER, AgentCard } from "@a2a-js/sdk";
import { JsonRpcTransportHandler, ServerCallContext, validateVersion } from "@a2a-js/sdk/server";
import { fail, type HttpRequest } from "../http";
import type { Caller } from "../identity";
import { STREAM_HEADERS } from "../stream";
import { admitNewTask } from "./admit";
import type { A2aAgents } from "./agents";
import { agentCardOf } from "./card";
import {
  type A2aAgentContext,
  type A2aPorts,
  type A2aSettings,
  runAgentHandler,
} from "./run-agent";

/**
 * The A2A routes of the front door's stream function (its URL takes POST and streams answers, which
 * an HTTP API cannot): each offered role's card and its JSON-RPC endpoint (./card.ts). A card is
 * public (it says how to call, never what was done); every call needs the front door's token, the
 * tenant its claim's. A JSON-RPC answer is JSON, or server-sent events (`data: <JSON-RPC
 * response>`) for `SendStreamingMessage` and `SubscribeToTask`, as the SDK's own servers write
 * them.
 */

export const ROOT_CARD_PATH = "/.well-known/agent-card.json";
const AGENT_PATH = /^\/v1\/a2a\/([a-z][a-z0-9-]{0,63})(\/\.well-known\/agent-card\.json)?$/;

/** Whether a path is one of the A2A routes (the stream function answers them, token or not). */
export function isA2aPath(path: string): boolean {
  return path === ROOT_CARD_PATH || path.startsWith("/v1/a2a/");
}

export interface A2aRequest extends HttpRequest {
  readonly body?: string;
}

/** What the function writes: a whole answer, or a stream of server-sent events. */
export type A2aAnswer =
  | { readonly status: number; readonly headers: Record<string, string>; readonly body: string }
  | {
      readonly status: 200;
      readonly headers: Record<string, string>;
      readonly stream: AsyncIterable<string>;
    };

export interface A2aService {
  readonly agents: A2aAgents;
  readonly ports: A2aPorts;
  readonly settings: A2aSettings;
  /** The caller, from the request's verified token (throws 401/403 as a problem). */
  caller(): Promise<Caller>;
}

/** Answer an A2A route: a card, or a JSON-RPC call to an offered role (404 for another). */
export async function answerA2a(request: A2aRequest, service: A2aService): Promise<A2aAnswer> {
  const roles = Object.keys(service.agents);
  if (roles.length === 0) fail("not_served", "this deployment offers no agent over A2A");
  const matched = AGENT_PATH.exec(request.path);
  const role = request.path === ROOT_CARD_PATH ? roles[0] : matched?.[1];
  if (request.path === ROOT_CARD_PATH && roles.length > 1)
    fail(
      "not_found",
      `more than one agent is offered: their cards are at ${roles.map((r) => `/v1/a2a/${r}/.well-known/agent-card.json`).join(", ")}`,
    );
  const offered = role === undefined ? undefined : service.agents[role];
  if (role === undefined || !offered)
    fail("not_found", `no agent is offered at ${request.path} (offered: ${roles.join(", ")})`);
  const card = agentCardOf(role, offered, baseUrlOf(request), {
    pushNotifications: service.ports.pushConfigs !== undefined,
  });
  const isCard = request.path === ROOT_CARD_PATH || matched?.[2] !== undefined;
  const method = isCard ? "GET" : "POST";
  if (request.method !== method && !(isCard && request.method === "HEAD"))
    fail("method_not_allowed", `${request.path} takes ${method}`, { headers: { allow: method } });
  if (isCard)
    return {
      status: 200,
      headers: { "content-type": "application/json", "cache-control": "public, max-age=300" },
      body: JSON.stringify(AgentCard.toJSON(card)),
    };
  const caller = await service.caller();
  const agent = { caller, role, offered, card, ports: service.ports, settings: service.settings };
  return jsonRpcAnswer(request, agent);
}

/**
 * One JSON-RPC call: its answer as JSON, or its stream as server-sent events. A call that starts
 * a task is admitted first (./admit.ts): refused, its error is the answer, as JSON.
 */
async function jsonRpcAnswer(request: A2aRequest, agent: A2aAgentContext): Promise<A2aAnswer> {
  const { card } = agent;
  const version = request.headers[A2A_VERSION_HEADER.toLowerCase()];
  const context = new ServerCallContext(version ? { requestedVersion: version } : {});
  let body: unknown;
  try {
    body = JSON.parse(request.body ?? "");
  } catch {
    return rpcJson({
      jsonrpc: "2.0",
      id: null,
      error: { code: -32700, message: "the body is not JSON" },
    });
  }
  try {
    validateVersion(context.requestedVersion, card, "JSONRPC");
  } catch (error) {
    return rpcJson({
      jsonrpc: "2.0",
      id: idOf(body),
      error: JsonRpcTransportHandler.mapToJSONRPCError(error),
    });
  }
  const call = (body !== null && typeof body === "object" ? body : {}) as Record<string, unknown>;
  const admission = await admitNewTask(agent, call);
  if ("error" in admission)
    return rpcJson({ jsonrpc: "2.0", id: idOf(body), error: admission.error });
  // The SDK may refuse the call after its admission counted the run (a push URL it does not
  // take): a run whose start was never put must not hold one of its tenant's runs in flight.
  const { admitted } = admission;
  let started = false;
  const markStarted = () => {
    started = true;
  };
  const releaseUnstarted = async () => {
    if (!admitted || started) return;
    await agent.ports.admission.runs
      .remove(agent.caller.tenantId, [admitted.run])
      .catch(() => undefined);
  };
  const handler = runAgentHandler({
    ...agent,
    ...(admitted ? { admitted: { ...admitted, starting: markStarted } } : {}),
  });
  const transport = new JsonRpcTransportHandler(handler);
  const answer = await transport.handle(admission.call, context).catch(async (error) => {
    await releaseUnstarted();
    throw error;
  });
  if (!(Symbol.asyncIterator in answer)) {
    await releaseUnstarted();
    return rpcJson(answer);
  }
  const stream = sseOf(answer, idOf(body), releaseUnstarted);
  return { status: 200, headers: { ...STREAM_HEADERS }, stream };
}

async function* sseOf(
  responses: AsyncIterable<unknown>,
  id: unknown,
  ended: () => Promise<void>,
): AsyncGenerator<string> {
  try {
    for await (const response of responses) yield `data: ${JSON.stringify(response)}\n\n`;
  } catch (error) {
    const failure = { jsonrpc: "2.0", id, error: JsonRpcTransportHandler.mapToJSONRPCError(error) };
    yield `event: error\ndata: ${JSON.stringify(failure)}\n\n`;
  } finally {
    await ended();
  }
}

function rpcJson(response: unknown): A2aAnswer {
  return {
    status: 200,
    headers: { "content-type": "application/json" },
    body: JSON.stringify(response),
  };
}

function idOf(body: unknown): unknown {
  return body !== null && typeof body === "object" && "id" in body
    ? (body as { id: unknown }).id
    : null;
}

/** Where this function is reached: its host, over https (the local front door says http). */
function baseUrlOf(request: HttpRequest): string {
  const proto = request.headers["x-forwarded-proto"] ?? "https";
  return `${proto}://${request.headers.host ?? "localhost"}`;
}
