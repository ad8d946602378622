import { randomUUID } from "node:crypto";
import { SendMessageRequest } from "@a2a-js/sdk";
import { A2AError, ERROR_INFO_TYPE } from "@a2a-js/sdk/errors";
import { JsonRpcTransportHandler } from "@a2a-js/sdk/server";
import { admitStart } from "../admission";
import { PROBLEMS, type Problem, ProblemError } from "../http";
import { type A2aAgentContext, type AdmittedTask, runInputOf } from "./run-agent";
import { runIdOfTask } from "./task";

/**
 * A message that starts a task goes through the front door's admission (../admission.ts) before
 * the SDK is handed the call, as `POST /v1/workflows/{name}/runs` does before anything is put: the
 * workflow's declared input, the tenant's stop and model calls, the backlog of the groups a run
 * enters, its requests per minute and its runs in flight. The task's id is given here (a UUID, as
 * the SDK would give it) so that its run is counted by its id; the SDK is handed the message on
 * that task, which the executor starts (./run-agent.ts).
 *
 * A refusal is a JSON-RPC error, not a task in state `rejected`: nothing was started, so there is
 * no task for `GetTask` to read, and `rejected` ends a task for good where a limit says "not now".
 * A2A v1.0 has no error for a limit, so a refusal that may pass later takes a code of JSON-RPC's
 * implementation-defined server errors (REFUSED_NOW), and input that does not fit, the spec's
 * invalid params (-32602). Its `data` carries google.rpc details as A2A's own errors do: an
 * `ErrorInfo` (the front door's problem code as `reason`), a `RetryInfo` with the seconds to wait
 * where waiting helps, a `BadRequest` naming each problem of the input.
 */

/** The JSON-RPC code of a start refused for now (a limit, a backlog, a stopped tenant). */
export const REFUSED_NOW = -32029;
const INVALID_PARAMS = -32602;
const INTERNAL_ERROR = -32603;
export const ERROR_DOMAIN = "agentbus.dev";

export interface JsonRpcErrorObject {
  readonly code: number;
  readonly message: string;
  readonly data?: readonly Record<string, unknown>[];
}

const STARTS = new Set(["SendMessage", "SendStreamingMessage"]);

/**
 * Admit the task a JSON-RPC call starts, if it starts one: the call as the SDK is to be handed it
 * (the message on the admitted task) and the task; or the error to answer. A call that starts
 * nothing (another method, a message on a task), or whose message the SDK will refuse as
 * malformed, is handed on as it came.
 */
export async function admitNewTask(
  agent: A2aAgentContext,
  call: Record<string, unknown>,
): Promise<
  | { readonly call: Record<string, unknown>; readonly admitted?: AdmittedTask }
  | { readonly error: JsonRpcErrorObject }
> {
  const params = call.params as Record<string, unknown> | undefined;
  const raw = params?.message as Record<string, unknown> | undefined;
  if (!STARTS.has(String(call.method)) || typeof raw !== "object" || raw === null) return { call };
  let parsed: SendMessageRequest;
  try {
    parsed = SendMessageRequest.fromJSON(params);
  } catch {
    return { call };
  }
  // A message on a task (however its JSON spells `taskId`: the SDK reads `task_id` too) answers
  // that task; it must not start another.
  if (!parsed.message || parsed.message.taskId) return { call };
  try {
    const request = runInputOf(parsed.message, agent.offered);
    const taskId = randomUUID();
    const run = {
      runId: runIdOfTask(taskId) ?? "",
      since: agent.ports.clock.now().toISOString(),
    };
    const { admission } = agent.ports;
    await admitStart(admission, agent.settings.limits, agent.caller, {
      workflow: agent.offered.workflow,
      input: request,
      run,
    });
    // The task's context is its own, as every task of this server has (a run has no other).
    const message = { ...raw, taskId, contextId: taskId };
    return {
      call: { ...call, params: { ...params, message } },
      admitted: { taskId, request, run },
    };
  } catch (error) {
    if (error instanceof ProblemError) return { error: rpcErrorOfProblem(error.problem) };
    if (error instanceof A2AError)
      return { error: JsonRpcTransportHandler.mapToJSONRPCError(error) };
    throw error;
  }
}

/** The JSON-RPC error a refused start is answered (see top). */
export function rpcErrorOfProblem(problem: Problem): JsonRpcErrorObject {
  const status = PROBLEMS[problem.code];
  const code =
    status === 400
      ? INVALID_PARAMS
      : status === 429 || status === 403
        ? REFUSED_NOW
        : INTERNAL_ERROR;
  const retryAfter = problem.headers?.["retry-after"];
  return {
    code,
    message: problem.detail,
    data: [
      {
        "@type": ERROR_INFO_TYPE,
        reason: problem.code.toUpperCase(),
        domain: ERROR_DOMAIN,
        ...(retryAfter ? { metadata: { retry_after_seconds: retryAfter } } : {}),
      },
      ...(retryAfter
        ? [{ "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: `${retryAfter}s` }]
        : []),
      ...(problem.errors && problem.errors.length > 0
        ? [
            {
              "@type": "type.googleapis.com/google.rpc.BadRequest",
              fieldViolations: problem.errors.map((e) => ({
                field: e.path,
                description: e.message,
              })),
            },
          ]
        : []),
    ],
  };
}
