import type { ModelControls } from "../core/model-guard";
import type { Clock, StateReader } from "../core/ports";
import type { Feature } from "../roles/features";
import type { BacklogGate } from "./backlog";
import { fail, type ProblemCode } from "./http";
import type { Caller } from "./identity";
import { capsOf, type TenantLimitOverrides, type TenantLimits, tenantRefusal } from "./limits";
import { admitRun, type CountedRun, type RunsInFlight } from "./runs-in-flight";
import { checkRunInput, type FrontDoorWorkflows, tenantWorkflow } from "./workflows";

/**
 * The front door's admission of new work, one home for every door that starts it (the HTTP API's
 * `POST /v1/workflows/{name}/runs` and message route: ./api.ts; an A2A message that starts a
 * task: ./a2a): a stopped tenant is refused (403 `tenant_stopped`), a tenant over its model calls
 * per minute, or work whose consumer groups are backed up, is told when to come back (429), then
 * the request counts against its tenant's requests per minute (./limits.ts) and a run's start
 * against its runs in flight (./runs-in-flight.ts). A refusal is a problem (./http.ts `fail`)
 * with `Retry-After` where waiting helps, and nothing refused is counted or put anywhere.
 */

export interface AdmissionPorts {
  /** Each tenant's cap on the requests that put something on the bus. */
  readonly limits: TenantLimits;
  /** The operator's stops and each tenant's model calls (./limits.ts, `tenantRefusal`). */
  readonly controls: Pick<ModelControls, "read">;
  /** Each tenant's runs in flight. */
  readonly runs: RunsInFlight;
  /** The runs' states, read when a tenant is at its cap (which of its runs have ended). */
  readonly states: StateReader;
  /** The backlog of the groups new work enters (./backlog.ts); absent: none is looked at. */
  readonly backlog?: Pick<BacklogGate, "refusal">;
  readonly clock: Clock;
}

/** The stack's limits, and tenants' own (./limits.ts). */
export interface AdmissionSettings {
  readonly requestsPerMinute: number;
  readonly runsInFlight: number;
  readonly tenantLimits?: TenantLimitOverrides;
}

/** The caller's tenant's limits: its own where the stack gives them, else the stack's. */
function tenantCaps(settings: AdmissionSettings, caller: Caller) {
  return capsOf(caller.tenantId, settings, settings.tenantLimits);
}

/** A refusal with the seconds to wait, as the problem the caller is answered. */
function refuse(code: ProblemCode, detail: string, retryAfterSeconds?: number): never {
  return fail(code, detail, {
    ...(retryAfterSeconds === undefined
      ? {}
      : { headers: { "retry-after": String(retryAfterSeconds) } }),
  });
}

/**
 * Refuse a stopped tenant (403) or one over its model calls per minute (429), then work whose
 * groups are backed up (429 `backlog`: ./backlog.ts), then count the request against its
 * tenant's requests per minute (its own or the stack's: 429 with `Retry-After` beyond). A request
 * refused before the count is not counted.
 */
export async function takeRequest(
  ports: AdmissionPorts,
  settings: AdmissionSettings,
  caller: Caller,
  feature: Feature,
): Promise<void> {
  const refusal =
    (await tenantRefusal(ports.controls, caller.tenantId, ports.clock.now())) ??
    (await ports.backlog?.refusal(feature));
  if (refusal)
    refuse(
      refusal.code,
      refusal.detail,
      "retryAfterSeconds" in refusal ? refusal.retryAfterSeconds : undefined,
    );
  const perMinute = tenantCaps(settings, caller).requestsPerMinute;
  const limited = await ports.limits.take(caller.tenantId, ports.clock.now(), perMinute);
  if ("retryAfterSeconds" in limited)
    refuse(
      "too_many_requests",
      `tenant ${caller.tenantId} is over its ${perMinute} requests per minute`,
      limited.retryAfterSeconds,
    );
}

/**
 * Count a run's start against its tenant's runs in flight: undefined when counted, else the 429
 * it would be answered (`refuse` throws it), left to the caller so that a retry of a request
 * accepted before may pass (./api.ts, an Idempotency-Key's).
 */
export async function countRun(
  ports: AdmissionPorts,
  settings: AdmissionSettings,
  caller: Caller,
  run: CountedRun,
): Promise<{ readonly refuse: () => never } | undefined> {
  const cap = tenantCaps(settings, caller).runsInFlight;
  const admitted = await admitRun(ports, caller.tenantId, run, cap, ports.clock.now());
  if ("ok" in admitted) return undefined;
  return {
    refuse: () =>
      refuse(
        "too_many_requests",
        `tenant ${caller.tenantId} has ${cap} workflow runs in flight`,
        admitted.retryAfterSeconds,
      ),
  };
}

/**
 * The whole admission of a run's start with no Idempotency-Key: the workflow the tenant may start
 * by that name (404 when none), its declared input (400 naming every problem), the request, the
 * run in flight. Once it answers, the run is counted: a start that is then not put on the bus
 * is taken out again (`ports.runs.remove`) by the caller.
 */
export async function admitStart(
  ports: AdmissionPorts & { readonly workflows?: FrontDoorWorkflows },
  settings: AdmissionSettings,
  caller: Caller,
  start: { readonly workflow: string; readonly input: unknown; readonly run: CountedRun },
): Promise<void> {
  const { definition } = await tenantWorkflow(ports.workflows, caller.tenantId, start.workflow);
  checkRunInput(definition, start.input);
  await takeRequest(ports, settings, caller, "runs");
  const refused = await countRun(ports, settings, caller, start.run);
  refused?.refuse();
}
