import type { Envelope, EventRegistry } from "../../schemas";
import { PrincipalArn } from "../../schemas/events/operator";
import type { DataSubject, ErasureRecord } from "../core/personal-data/customer-keys";
import { type ErasureReport, erasureRecordId } from "../core/personal-data/erase";
import type { Clock, EventPublisher } from "../core/ports";
import { unreachableByErasure } from "../core/retention";
import { fail, type HttpResponse, json } from "./http";

/**
 * `POST /v1/tenants/{tenant_id}/customers/{customer_id}/erasure`: a service (signed with AWS
 * credentials, for the tenant its path names) erases a customer, as `agentbus erase` does
 * (functions/core/personal-data/erase.ts). 200 with what was done and what erasure cannot reach
 * (with the days it keeps it), also when the customer was erased already (nothing changes then); 404 when nothing of the customer is recorded. The
 * erasure is recorded on the audit topic as `operator.action.recorded` (`customer.erase`, the
 * signing principal as who asked, its ARN as `principal`), where the audit group keeps it.
 */

export interface CustomerErasure {
  erase(subject: DataSubject, erasure: ErasureRecord): Promise<ErasureReport>;
}

export interface ErasurePorts {
  readonly erasure?: CustomerErasure;
  readonly publisher: EventPublisher;
  readonly registry: EventRegistry;
  readonly clock: Clock;
}

export async function eraseForService(
  ports: ErasurePorts,
  subject: DataSubject,
  principal: string,
  reason: string | undefined,
): Promise<HttpResponse> {
  if (!ports.erasure) fail("unavailable", "this stack keeps no customer keys: nothing to erase");
  const by = requesterOf(principal);
  const report = await ports.erasure.erase(subject, {
    at: ports.clock.now().toISOString(),
    by,
    ...(reason === undefined ? {} : { reason }),
  });
  if (report.outcome === "unknown")
    fail(
      "not_found",
      `no personal data of customer ${subject.customer} is recorded for tenant ${subject.tenant}`,
    );
  if (report.erasure)
    await record(ports, subject, { ...report.erasure, principal }, report.overwritten);
  return json(200, {
    tenant_id: subject.tenant,
    customer_id: subject.customer,
    outcome: report.outcome,
    ...(report.erasure ? { erased_at: report.erasure.at, erased_by: report.erasure.by } : {}),
    conversations: report.conversations,
    overwritten: report.overwritten,
    unreachable: unreachableByErasure().map(({ where, days }) => ({ where, days })),
  });
}

/** An operator name of the principal (the audit record's `requested_by`: no spaces or @). */
function requesterOf(principal: string): string {
  return principal.replace(/[\s@]+/g, "_").slice(-128) || "unknown";
}

/**
 * The erasure's audit record, under its own id (erasureRecordId): kept once however often sent.
 * It names the signer's ARN as the principal that acted (one that is no ARN is left out).
 */
async function record(
  ports: ErasurePorts,
  subject: DataSubject,
  erasure: ErasureRecord & { readonly principal: string },
  overwritten: number,
): Promise<void> {
  const principal = PrincipalArn.safeParse(erasure.principal);
  const id = erasureRecordId(subject, erasure);
  const parsed = ports.registry.parse({
    event_id: id,
    event_type: "operator.action.recorded",
    schema_version: 1,
    occurred_at: erasure.at,
    correlation_id: `corr_${id}`,
    causation_id: null,
    task_id: `task_${id}`,
    tenant_id: subject.tenant,
    aggregate: { type: "operator_action", id: `opact_${id}`, version: 0 },
    order_key: `opact_${id}`,
    producer: "front-door",
    payload: {
      action: "customer.erase",
      target: `customer/${subject.tenant}/${subject.customer}`,
      requested_by: erasure.by,
      ...(principal.success ? { principal: principal.data } : {}),
      via: "front-door",
      ...(erasure.reason === undefined ? {} : { reason: erasure.reason }),
      outcome: { count: overwritten, event_ids: [], failed: 0 },
    },
  });
  if (!parsed.ok)
    throw new Error(`the front door built an invalid erasure record: ${parsed.message}`);
  const failures = await ports.publisher.publish(parsed.definition.topic, [
    parsed.envelope as Envelope,
  ]);
  // The erasure stands whatever becomes of its record: a retry finds it done and sends it again.
  if (failures.length > 0)
    fail(
      "unavailable",
      `the customer was erased but the record was not put on the bus; send it again`,
    );
}
