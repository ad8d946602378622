import { ulid } from "ulid";
import type { LocalEnvironment } from "../../lib/dev/local/environment";
import type { Latency } from "./local-bounds";
import { percentiles } from "./local-probe";
import { fmt, fmtInt } from "./stats";

/**
 * `npm run bench` section 3, tenants: one tenant's reply latency through the front door (HTTP,
 * message posted -> reply delivered), alone and while another tenant's burst of messages over
 * many conversations is in flight, in the same run. What is shared is the support groups' FIFO
 * queues: each conversation is its own message group, so a burst of one tenant's conversations
 * competes with another tenant's conversation group by group, not tenant by tenant.
 */

export interface TenantsResult {
  readonly quiet: Latency;
  readonly underBurst: Latency;
  readonly burstMessages: number;
}

const SAMPLES = 3;
const BURST_CONVERSATIONS = 40;

type Out = (line?: string) => void;

export async function measureTenants(
  env: LocalEnvironment,
  delivered: Map<string, number>,
  out: Out,
): Promise<TenantsResult | undefined> {
  const door = env.frontDoor;
  if (!door) return undefined;
  const tokens = {
    a: await door.issuer.token({ tenant_id: "tenant-a", sub: "bench-a" }),
    b: await door.issuer.token({ tenant_id: "tenant-b", sub: "bench-b" }),
  };
  const post = async (token: string, conversation: string, text: string) => {
    const response = await fetch(`${door.url}/conversations/${conversation}/messages`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ text }),
    });
    if (response.status !== 202)
      throw new Error(`the front door answered ${response.status}: ${await response.text()}`);
  };
  /** Tenant B's message, posted -> its reply delivered, in ms. */
  const tenantB = async () => {
    const conversation = `conv_${ulid()}`;
    const started = performance.now();
    await post(tokens.b, conversation, "Where is my order 123?");
    await until(() => delivered.has(conversation), 120_000);
    return (delivered.get(conversation) ?? 0) - started;
  };

  const quiet: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    quiet.push(await tenantB());
    await env.runtime.idle();
  }
  const burstIds = Array.from({ length: BURST_CONVERSATIONS }, () => `conv_${ulid()}`);
  const burst = Promise.all(
    burstIds.map((id) => post(tokens.a, id, "Has the refund for order 123 gone through?")),
  );
  const underBurst: number[] = [];
  for (let i = 0; i < SAMPLES; i++) underBurst.push(await tenantB());
  await burst;
  await until(() => burstIds.every((id) => delivered.has(id)), 300_000);
  await env.runtime.idle();

  const result = {
    quiet: percentiles(quiet),
    underBurst: percentiles(underBurst),
    burstMessages: burstIds.length,
  };
  out(
    `tenants: tenant B's message posted to the front door until its reply is delivered, alone ${quiet.map((ms) => fmtInt(ms)).join(", ")} ms (median ${fmtInt(result.quiet.p50)}), during tenant A's burst of ${burstIds.length} conversations ${underBurst.map((ms) => fmtInt(ms)).join(", ")} ms (median ${fmtInt(result.underBurst.p50)}, ${fmt(result.underBurst.p50 / result.quiet.p50, 1)}× alone)`,
  );
  return result;
}

async function until(done: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error("tenants bench: a reply never came");
    await new Promise((r) => setTimeout(r, 50));
  }
}
