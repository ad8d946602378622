import { tenantOf } from "../../schemas";
import { tenantConversationId } from "../../schemas/ids";
import type { Clock, EventStore } from "../core/ports";
import type {
  ConversationTurn,
  ConversationView,
} from "../roles/customer-support/conversation-projection/conversation-projection";
import { ALL_FEATURES, type Feature } from "../roles/features";
import { runAgui } from "./agui-run";
import { type AguiPorts, aguiPositionOf, conversationAgui } from "./agui-stream";
import {
  CONVERSATION_VIEW,
  conversationOf,
  idParam,
  mayReadConversation,
  methodsOf,
  storedRunAnswer,
  turnsOf,
} from "./api";
import { fail, type HttpRequest, matchPath, pathMatches } from "./http";
import type { Caller } from "./identity";
import { checkServed } from "./served";
import { loadStoredRun } from "./stored-run";

/**
 * What happens, pushed to the client: server-sent events (`text/event-stream`) of a conversation's
 * turns and of a run's progress, read from the projections the GET routes answer from (the
 * conversation view, the run's state), which the consumer groups keep from the events they
 * consume. The stream polls the one state item every `pollMs` and sends what changed:
 *
 * - `event: conversation`: `{conversation_id, revision, turns}` with each turn that is new or
 *   changed since the last event (a turn is the same object `GET /v1/conversations/{id}` shows;
 *   apply it by `task_id`);
 * - `event: run`: the run as `GET /v1/runs/{id}` shows it; then `event: end` once the run is no
 *   longer RUNNING, and the stream closes (a start the orchestrator refused: the run REJECTED,
 *   with why, then its end: ./stored-run.ts);
 * - `: keep-alive` comments every `heartbeatSeconds`, so idle connections stay open.
 *
 * Every event's `id` is the state item's revision, which only grows. A client that reconnects
 * sends it back as `Last-Event-ID` (EventSource does so by itself): if nothing changed since, the
 * stream sends nothing until something does; if something did, it sends every turn once (applying
 * a turn twice changes nothing). A stream lasts at most `maxSeconds` (a function URL's response
 * may last 15 minutes), then closes; the client reconnects and resumes.
 *
 * A conversation that has no view yet (the message was posted a moment ago) is waited for. The
 * id is the caller's tenant's own (schemas/ids.ts `tenantConversationId`), and a view that names
 * another tenant all the same is 404, as on the GET routes, before or after it appears; so is
 * another customer's conversation to a user (./api.ts `conversationOf`), and another tenant's
 * run.
 *
 * The `/agui` routes send the same conversation and run as AG-UI events read from the event
 * store, each message's id a position in the stored streams (./agui-stream.ts).
 */

export interface StreamRoute {
  readonly method: "GET";
  readonly path: string;
  readonly operationId: string;
  readonly summary: string;
  readonly of: "conversation" | "run";
  /**
   * What it sends: the front door's own events (below), or AG-UI events from the event store
   * (./agui-stream.ts). @default "front-door"
   */
  readonly format?: "front-door" | "ag-ui";
  /** The feature it serves: a stack without it answers 404 `not_served` (./served.ts). */
  readonly feature: Feature;
}

export const STREAM_ROUTES: readonly StreamRoute[] = [
  {
    method: "GET",
    path: "/v1/conversations/{conversation_id}/stream",
    operationId: "streamConversation",
    summary: "A conversation's turns as they change (server-sent events)",
    of: "conversation",
    feature: "conversations",
  },
  {
    method: "GET",
    path: "/v1/runs/{run_id}/stream",
    operationId: "streamRun",
    summary: "A workflow run's progress until it ends (server-sent events)",
    of: "run",
    feature: "runs",
  },
  {
    method: "GET",
    path: "/v1/conversations/{conversation_id}/agui",
    operationId: "streamConversationAgui",
    summary: "A conversation's stored facts as AG-UI events, resumable (server-sent events)",
    of: "conversation",
    format: "ag-ui",
    feature: "conversations",
  },
  {
    method: "GET",
    path: "/v1/runs/{run_id}/agui",
    operationId: "streamRunAgui",
    summary: "A workflow run's stored facts as AG-UI events until it ends, resumable",
    of: "run",
    format: "ag-ui",
    feature: "runs",
  },
];

export interface StreamPorts {
  readonly store: Pick<EventStore, "load">;
  /**
   * The event store's streams and the vault, for the AG-UI routes (absent: not served), and where
   * a refused start says why and whose it was (absent: shown without its reason).
   */
  readonly events?: Omit<AguiPorts, "store">;
  readonly clock: Clock;
  /** Wait `ms`, or less when the client went away. */
  sleep(ms: number): Promise<void>;
}

export interface StreamSettings {
  readonly pollMs: number;
  readonly maxSeconds: number;
  readonly heartbeatSeconds: number;
  /** The stack's features (functions/roles/features.ts). @default every feature */
  readonly features?: readonly Feature[];
}

/** Where the stream goes: the response's head once, then its text as it comes. */
export interface StreamSink {
  write(text: string): void;
  /** Whether the client went away (nothing more need be read). */
  closed(): boolean;
}

export const STREAM_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  "x-accel-buffering": "no",
} as const;

/** One server-sent event. */
export function sseFrame(event: string, data: unknown, id?: number): string {
  return `${id === undefined ? "" : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

/**
 * The stream route a request names, with its parameters: 404 when none has its path, 405 with
 * `Allow` for a method other than GET or HEAD (HEAD: the head of the stream, no events), 400 when
 * a parameter is not percent-encoded UTF-8.
 */
export function streamRouteOf(request: Pick<HttpRequest, "method" | "path">): {
  route: StreamRoute;
  params: Record<string, string>;
} {
  const route = STREAM_ROUTES.find((r) => pathMatches(r.path, request.path));
  if (!route) fail("not_found", `no stream ${request.path}`);
  const allowed = methodsOf(route);
  if (!allowed.includes(request.method))
    fail("method_not_allowed", `${request.path} takes ${allowed.join(", ")}`, {
      headers: { allow: allowed.join(", ") },
    });
  return { route, params: matchPath(route.path, request.path) ?? {} };
}

/**
 * Check what a stream request names (400 on a bad id, 404 on another tenant's or on a route the
 * stack does not serve), before anything is sent; then `run` sends the stream to `sink`.
 */
export async function openStream(
  request: Pick<HttpRequest, "method" | "path" | "headers">,
  caller: Caller,
  ports: StreamPorts,
  settings: StreamSettings,
): Promise<{ run(sink: StreamSink): Promise<void> }> {
  const { route, params } = streamRouteOf(request);
  checkServed(route, settings.features ?? ALL_FEATURES, request.path);
  if (route.format === "ag-ui") return openAgui(route, params, request, caller, ports, settings);
  const since = lastEventIdOf(request.headers["last-event-id"]);
  if (route.of === "conversation") {
    const id = idParam(params, "conversation_id");
    // A conversation without a view yet has its customer checked once it has one.
    const checked = (await conversationOf(ports, caller, id)) !== undefined;
    return {
      run: (sink) => streamConversation(ports, settings, caller, { id, checked }, since, sink),
    };
  }
  const id = idParam(params, "run_id");
  const run = await loadStoredRun(runReads(ports), id, caller.tenantId);
  if (run.kind === "not_found") fail("not_found", `no run ${id}`);
  return { run: (sink) => streamRun(ports, settings, caller, id, since, sink) };
}

/** An AG-UI stream: what it names checked, then its polls until done or the time is up. */
async function openAgui(
  route: StreamRoute,
  params: Record<string, string>,
  request: Pick<HttpRequest, "path" | "headers">,
  caller: Caller,
  ports: StreamPorts,
  settings: StreamSettings,
): Promise<{ run(sink: StreamSink): Promise<void> }> {
  if (!ports.events)
    fail("not_served", `${request.path}: this deployment's stream function reads no event store`);
  const aguiPorts: AguiPorts = { store: ports.store, ...ports.events };
  const position = aguiPositionOf(request.headers["last-event-id"]);
  const poll =
    route.of === "conversation"
      ? await conversationAgui(aguiPorts, caller, idParam(params, "conversation_id"), position)
      : await runAgui(aguiPorts, caller, idParam(params, "run_id"), position);
  return { run: (sink) => pollUntilDone(ports, settings, sink, () => poll(sink)) };
}

function lastEventIdOf(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const revision = Number(value);
  if (!Number.isSafeInteger(revision) || revision < 0)
    fail(
      "invalid_request",
      `Last-Event-ID ${JSON.stringify(value)} is not an event id of this stream`,
    );
  return revision;
}

/** Poll `read` until the stream's time is up or the client left; heartbeats in between. */
async function pollUntilDone(
  ports: StreamPorts,
  settings: StreamSettings,
  sink: StreamSink,
  read: () => Promise<"more" | "done">,
): Promise<void> {
  const started = ports.clock.now().getTime();
  let lastWrite = started;
  sink.write(`retry: ${Math.max(1000, settings.pollMs)}\n\n`);
  while (!sink.closed() && ports.clock.now().getTime() - started < settings.maxSeconds * 1000) {
    if ((await read()) === "done") return;
    const now = ports.clock.now().getTime();
    if (now - lastWrite >= settings.heartbeatSeconds * 1000) {
      sink.write(": keep-alive\n\n");
      lastWrite = now;
    }
    await ports.sleep(settings.pollMs);
  }
}

async function streamConversation(
  ports: StreamPorts,
  settings: StreamSettings,
  caller: Caller,
  conversation: { readonly id: string; readonly checked: boolean },
  since: number | undefined,
  sink: StreamSink,
): Promise<void> {
  const conversationId = conversation.id;
  const key = tenantConversationId(caller.tenantId, conversationId);
  // A conversation's customer, once checked, is not read again: it never changes.
  let checked = conversation.checked;
  let revision = -1;
  const sent = new Map<string, string>();
  await pollUntilDone(ports, settings, sink, async () => {
    const loaded = await ports.store.load({ state: { type: CONVERSATION_VIEW, id: key } });
    const stored = loaded.state;
    if (!stored || stored.revision === revision) return "more";
    const view = stored.data as ConversationView | null;
    const readable =
      view !== null &&
      tenantOf(view) === caller.tenantId &&
      (checked || (await mayReadConversation(ports, caller, key)));
    if (!readable) {
      sink.write(
        sseFrame("error", { code: "not_found", detail: `no conversation ${conversationId}` }),
      );
      return "done";
    }
    checked = true;
    const turns = turnsOf(view);
    // The client saw this revision already: what it has is what the view has.
    const seen = revision === -1 && since === stored.revision;
    const changed = turns.filter((turn) => sent.get(turn.task_id) !== JSON.stringify(turn));
    for (const turn of turns) sent.set(turn.task_id, JSON.stringify(turn));
    revision = stored.revision;
    if (!seen && changed.length > 0)
      sink.write(conversationFrame(conversationId, revision, changed));
    return "more";
  });
}

function conversationFrame(conversationId: string, revision: number, turns: ConversationTurn[]) {
  return sseFrame("conversation", { conversation_id: conversationId, revision, turns }, revision);
}

async function streamRun(
  ports: StreamPorts,
  settings: StreamSettings,
  caller: Caller,
  runId: string,
  since: number | undefined,
  sink: StreamSink,
): Promise<void> {
  let revision = since ?? -1;
  await pollUntilDone(ports, settings, sink, async () => {
    const run = await loadStoredRun(runReads(ports), runId, caller.tenantId);
    if (run.kind === "unstored") return "more";
    if (run.kind === "not_found") {
      sink.write(sseFrame("error", { code: "not_found", detail: `no run ${runId}` }));
      return "done";
    }
    // A refused start is a run that ended refused: its answer, then its end.
    const answer = storedRunAnswer(runId, run);
    if (run.revision !== revision) sink.write(sseFrame("run", answer, run.revision));
    revision = run.revision;
    if (answer.status === "RUNNING") return "more";
    sink.write(sseFrame("end", { run_id: runId, status: answer.status }));
    return "done";
  });
}

/** What a run is read from: its state, and its stream where a refused start says why. */
function runReads(ports: StreamPorts) {
  return { store: ports.store, streams: ports.events };
}
