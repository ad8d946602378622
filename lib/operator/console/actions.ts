import {
  SEND_RESOLUTIONS,
  type SendResolution,
} from "../../../functions/roles/customer-support/events/conversation";
import type { ActionOutcome, OpsActions } from "../actions";
import type { StepDecision, StepDecisionFields } from "../agent-actions";
import type { ReviewDecision } from "../support-actions";
import { parseOutput, type RunRequest } from "../workflow-actions";
import type { StartRequest } from "../workflows";
import type { FlashMessages } from "./flash";
import { formOf, reasonOf, textOf } from "./form-data";
import { SEND_RESOLVE_PATH } from "./forms";
import { runHref } from "./html";
import { type ConsolePage, requestErrorPage } from "./page";
import { postAddressProblem, tokenMatches } from "./post-guard";
import { tenantParam } from "./tenant-filter";
import { INPUT_FIELD_PREFIX, TYPE_FIELD_PREFIX, workflowHref } from "./workflows";

/**
 * The console's POSTs (the forms of ./forms): the request must be addressed to the console and
 * carry its form token, else 403 and nothing is done; a form it can read becomes an action on the
 * stack (./ops/actions, the CLI's checks and commands), and the browser is sent back (303) to the
 * page the form was on, which shows what was sent or why nothing was. Bad input sends nothing.
 */

export type ConsoleAction =
  | { readonly kind: "run"; readonly runId: string; readonly request: RunRequest }
  | {
      readonly kind: "review";
      readonly taskId: string;
      readonly decision: ReviewDecision;
      readonly text?: string;
    }
  | { readonly kind: "send"; readonly key: string; readonly resolution: SendResolution }
  | {
      readonly kind: "step";
      readonly runId: string;
      /** The call decided on; none for a run's `answer`. */
      readonly callId?: string;
      readonly decision: StepDecision;
      readonly output?: unknown;
      /** Since when the call's wait the form showed has waited (./agent-waits). */
      readonly waitingSince?: string;
    }
  | { readonly kind: "redrive"; readonly group: string; readonly from: "queue" | "buffer" }
  | { readonly kind: "start"; readonly request: StartRequest }
  | { readonly kind: "tenant"; readonly tenant: string; readonly verb: "stop" | "resume" };

/**
 * A form read: where to go back to, and the action with its reason (empty where the form's reason
 * is optional and none was given) or why there is none.
 */
export type ParsedPost = { readonly back: string } & (
  | { readonly action: ConsoleAction; readonly reason: string }
  | { readonly problem: string }
);

const RUN_PATH = /^\/runs\/([^/]+)\/(cancel|reset|resolve|rerun|confirm)$/;
const REPLY_PATH = /^\/replies\/([^/]+)\/review$/;
const REDRIVE_PATH = /^\/dead-letters\/([^/]+)\/redrive$/;
const AGENT_PATH = /^\/agent-runs\/([^/]+)\/decide$/;
const START_PATH = /^\/workflows\/([^/]+)\/start$/;
const TENANT_PATH = /^\/tenants\/([^/]+)\/(stop|resume)$/;
const CALL_DECISIONS: readonly (string | null)[] = ["approve", "reject", "applied", "not_applied"];

function decoded(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

type Read = ConsoleAction | { readonly problem: string };

function runRequestOf(verb: string, form: URLSearchParams, reason: string): RunRequest | string {
  if (verb === "cancel") return { kind: "cancel", reason };
  const nodeId = form.get("node")?.trim();
  if (!nodeId) return "no node was given; nothing sent";
  if (verb === "rerun") return { kind: "rerun", nodeId, reason };
  if (verb === "reset") return { kind: "reset", nodeId, reason };
  if (verb === "confirm") {
    const answer = form.get("answer");
    if (answer !== "confirmed" && answer !== "refused")
      return `${JSON.stringify(answer)} is not an answer (confirmed or refused); nothing sent`;
    const since = form.get("since")?.trim();
    return {
      kind: "confirm",
      nodeId,
      answer,
      note: reason,
      ...(since ? { waitingSince: since } : {}),
    };
  }
  const output = parseOutput(textOf(form, "output") ?? "", "the output");
  return typeof output === "string" ? output : { kind: "resolve", nodeId, output, reason };
}

function reviewOf(taskId: string, form: URLSearchParams): Read {
  const decision = form.get("decision");
  if (decision !== "approve" && decision !== "reject")
    return {
      problem: `${JSON.stringify(decision)} is not a decision (approve or reject); nothing sent`,
    };
  if (decision === "reject") return { kind: "review", taskId, decision: "rejected" };
  const text = textOf(form, "text");
  if (text !== undefined && !text.trim())
    return { problem: "the reply's text is empty (approve sends the text shown); nothing sent" };
  // The draft as it was: only a changed text is sent as an edit.
  const edited = text !== undefined && text !== textOf(form, "draft") ? { text } : {};
  return { kind: "review", taskId, decision: "approved", ...edited };
}

function sendOf(form: URLSearchParams): Read {
  const key = form.get("key") ?? "";
  const as = form.get("as");
  if (!(SEND_RESOLUTIONS as readonly (string | null)[]).includes(as))
    return {
      problem: `${JSON.stringify(as)} is not a resolution (delivered, resend or abandon); nothing sent`,
    };
  return { kind: "send", key, resolution: as as SendResolution };
}

/** The JSON of the form's `output`, or why there is none (`missing` when it is empty). */
function outputOf(
  form: URLSearchParams,
  label: string,
  missing: string,
): { readonly problem: string } | { readonly output: unknown } {
  const text = (textOf(form, "output") ?? "").trim();
  if (!text) return { problem: `${missing}; nothing sent` };
  try {
    return { output: JSON.parse(text) };
  } catch (error) {
    return { problem: `${label} is not JSON (${(error as Error).message}); nothing sent` };
  }
}

/**
 * A person's answer to an agent run: the call, the decision, and an applied write's output; or,
 * with no call, the run's own answer (JSON), checked by the CLI's check before it is sent.
 */
function stepOf(runId: string, form: URLSearchParams): Read {
  const decision = form.get("decision");
  if (decision === "answer") {
    const answer = outputOf(form, "the answer", "an answer needs the run's answer (JSON)");
    return "problem" in answer ? answer : { kind: "step", runId, decision, ...answer };
  }
  const callId = form.get("step")?.trim();
  if (!callId) return { problem: "no tool call was given; nothing sent" };
  if (!CALL_DECISIONS.includes(decision))
    return {
      problem: `${JSON.stringify(decision)} is not a decision (approve, reject, applied, not_applied or answer); nothing sent`,
    };
  const since = form.get("since")?.trim();
  const step = {
    kind: "step",
    runId,
    callId,
    decision: decision as StepDecision,
    ...(since ? { waitingSince: since } : {}),
  } as const;
  if (decision !== "applied") return step;
  const applied = outputOf(
    form,
    "the output",
    "applied needs the output the outside system gave (JSON)",
  );
  return "problem" in applied ? applied : { ...step, ...applied };
}

/** A declared property's value as the form sent it, read as its type says (empty: left out). */
function typedValue(type: string | null, text: string): unknown {
  if (type === "number" || type === "integer") {
    const n = Number(text);
    return text.trim() !== "" && Number.isFinite(n) ? n : text;
  }
  if (type === "boolean") return text === "true" ? true : text === "false" ? false : text;
  return text;
}

/**
 * A start form: each declared property (`input.<name>`, read as `type.<name>` says), merged over
 * the JSON object of `input_json`, and the run's tenant. The input is checked against the
 * workflow's declared input when the start is carried out, not here.
 */
function startOf(name: string, form: URLSearchParams): Read {
  const text = (textOf(form, "input_json") ?? "").trim();
  let more: unknown = {};
  try {
    more = text ? JSON.parse(text) : {};
  } catch (error) {
    return { problem: `the input is not JSON (${(error as Error).message}); nothing sent` };
  }
  if (more === null || typeof more !== "object" || Array.isArray(more))
    return { problem: "the input is not a JSON object; nothing sent" };
  const input: Record<string, unknown> = { ...(more as Record<string, unknown>) };
  for (const [field, value] of form) {
    if (!field.startsWith(INPUT_FIELD_PREFIX) || value === "") continue;
    const property = field.slice(INPUT_FIELD_PREFIX.length);
    input[property] = typedValue(form.get(`${TYPE_FIELD_PREFIX}${property}`), value);
  }
  const tenant = tenantParam(form);
  if ("problem" in tenant) return { problem: `${tenant.problem} Nothing sent.` };
  return {
    kind: "start",
    request: { name, input, ...(tenant.tenant === undefined ? {} : { tenant: tenant.tenant }) },
  };
}

function readAction(path: string, form: URLSearchParams, reason: string): Read | undefined {
  const run = RUN_PATH.exec(path);
  if (run) {
    const runId = decoded(run[1] ?? "");
    if (runId === undefined) return { problem: "the run id could not be read; nothing sent" };
    const request = runRequestOf(run[2] ?? "", form, reason);
    return typeof request === "string" ? { problem: request } : { kind: "run", runId, request };
  }
  const reply = REPLY_PATH.exec(path);
  if (reply) {
    const taskId = decoded(reply[1] ?? "");
    return taskId === undefined
      ? { problem: "the task id could not be read; nothing sent" }
      : reviewOf(taskId, form);
  }
  if (path === SEND_RESOLVE_PATH) return sendOf(form);
  const agent = AGENT_PATH.exec(path);
  if (agent) {
    const runId = decoded(agent[1] ?? "");
    return runId === undefined
      ? { problem: "the run id could not be read; nothing sent" }
      : stepOf(runId, form);
  }
  const start = START_PATH.exec(path);
  if (start) {
    const name = decoded(start[1] ?? "");
    return name === undefined
      ? { problem: "the workflow's name could not be read; nothing sent" }
      : startOf(name, form);
  }
  const tenant = TENANT_PATH.exec(path);
  if (tenant) {
    const id = decoded(tenant[1] ?? "");
    return id === undefined
      ? { problem: "the tenant could not be read; nothing recorded" }
      : { kind: "tenant", tenant: id, verb: tenant[2] === "resume" ? "resume" : "stop" };
  }
  const redrive = REDRIVE_PATH.exec(path);
  if (!redrive) return undefined;
  const group = decoded(redrive[1] ?? "");
  if (group === undefined) return { problem: "the group could not be read; nothing moved" };
  return { kind: "redrive", group, from: form.get("queue") === "buffer" ? "buffer" : "queue" };
}

/** Where a form's answer is shown: the page the form is on (a start's, for the run's tenant). */
function backOf(path: string, form: URLSearchParams): string | undefined {
  const run = RUN_PATH.exec(path);
  if (run) return runHref(decoded(run[1] ?? "") ?? "");
  if (REPLY_PATH.test(path) || path === SEND_RESOLVE_PATH || AGENT_PATH.test(path)) return "/";
  const start = START_PATH.exec(path);
  if (start) {
    const tenant = tenantParam(form);
    const query: Record<string, string> =
      "tenant" in tenant && tenant.tenant !== undefined ? { tenant: tenant.tenant } : {};
    return workflowHref(decoded(start[1] ?? "") ?? "", query);
  }
  const tenant = TENANT_PATH.exec(path);
  if (tenant) return `/?tenant=${encodeURIComponent(decoded(tenant[1] ?? "") ?? "")}`;
  return REDRIVE_PATH.test(path) ? "/dead-letters" : undefined;
}

/** The action a form posted to `path` asks for; undefined when no form posts there. */
export function parseAction(path: string, form: URLSearchParams): ParsedPost | undefined {
  const back = backOf(path, form);
  if (back === undefined) return undefined;
  // An agent run's decision, a start and a resume, as in the CLI, may go without a reason.
  const optional = AGENT_PATH.test(path) || START_PATH.test(path) || path.endsWith("/resume");
  const reason = reasonOf(form, optional);
  if ("problem" in reason) return { back, problem: reason.problem };
  const read = readAction(path, form, reason.reason);
  if (!read) return undefined;
  return "problem" in read ? { back, problem: read.problem } : { back, action: read, ...reason };
}

/** Carry out an action; an error of the stack is reported, not thrown. */
export async function performAction(
  actions: OpsActions,
  action: ConsoleAction,
  reason: string,
): Promise<ActionOutcome> {
  try {
    switch (action.kind) {
      case "run":
        return await actions.run(action.runId, action.request);
      case "review":
        return await actions.review(action.taskId, action.decision, { text: action.text, reason });
      case "send":
        return await actions.resolveSend(action.key, action.resolution, reason);
      case "redrive":
        return await actions.redrive(action.group, action.from, reason);
      case "start":
        return await actions.start(action.request);
      case "tenant":
        return await actions.stopOrResume(
          action.verb,
          { scope: "tenant", id: action.tenant },
          reason,
        );
      case "step": {
        // The wait the form showed goes with the decision to the check (./agent-actions).
        const fields: Omit<StepDecisionFields, "requestedBy"> = {
          ...(reason ? { reason } : {}),
          ...(action.output === undefined ? {} : { output: action.output }),
          ...(action.waitingSince === undefined ? {} : { waitingSince: action.waitingSince }),
        };
        return await actions.decideStep(action.runId, action.callId, action.decision, fields);
      }
    }
  } catch (error) {
    const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    return { kind: "failed", message: `the action failed: ${message}` };
  }
}

/** A POST as the console received it. */
export interface PostRequest {
  readonly path: string;
  readonly host?: string;
  readonly origin?: string;
  readonly contentType?: string;
  readonly body: string;
}

export interface ActionContext {
  readonly actions: OpsActions;
  readonly flashes: FlashMessages;
  /** The console's own address, `127.0.0.1:<port>`. */
  readonly own: string;
  readonly token: string;
}

/** A redirect to the page with the action's answer, or a page refusing the request itself. */
export type PostAnswer = { readonly status: 303; readonly location: string } | ConsolePage;

const TOKEN_REFUSED =
  "The form's token is missing or is not this console's (it changes each time the console starts): reload the page and send the form again. Nothing was sent.";

/** Answer a POST: refuse it (403, 404, 415), or act and send the browser back to the page. */
export async function answerPost(context: ActionContext, post: PostRequest): Promise<PostAnswer> {
  const address = postAddressProblem(context.own, post);
  if (address) return requestErrorPage(403, `${address}. Nothing was sent.`);
  const form = formOf(post.contentType, post.body);
  if (!form) return requestErrorPage(415, "The console reads only URL-encoded forms.");
  if (!tokenMatches(context.token, form.get("csrf"))) return requestErrorPage(403, TOKEN_REFUSED);
  const parsed = parseAction(post.path, form);
  if (!parsed) return requestErrorPage(404, `No form posts to ${post.path}.`);
  const outcome =
    "problem" in parsed
      ? { kind: "refused" as const, message: parsed.problem }
      : await performAction(context.actions, parsed.action, parsed.reason);
  // A started run is shown on its own page; any other answer on the form's page, and a refused
  // start with what its form sent.
  const page = "next" in outcome && outcome.next !== undefined ? outcome.next : parsed.back;
  const typed = START_PATH.test(post.path) && outcome.kind !== "sent" ? typedOf(form) : undefined;
  const flash = context.flashes.put(typed ? { ...outcome, typed } : outcome);
  return { status: 303, location: `${page}${page.includes("?") ? "&" : "?"}flash=${flash}` };
}

/** What a form sent, but its token. */
function typedOf(form: URLSearchParams): Record<string, string> {
  return Object.fromEntries([...form].filter(([name]) => name !== "csrf"));
}
