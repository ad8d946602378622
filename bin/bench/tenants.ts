import { ulid } from "ulid";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { topology } from "../../lib/infra/project";
import type { Topology } from "../../lib/infra/topology";
import { tenantConversationId } from "../../schemas/ids";
import type { Latency } from "./local-bounds";
import { percentiles } from "./local-probe";
import { fmt, fmtInt } from "./stats";

/**
 * `npm run bench` section 3, tenants: one tenant's reply latency through the front door (HTTP,
 * message posted -> reply delivered), alone and while another tenant's burst of messages over
 * many conversations is in flight, on the stack as deployed (the support groups keyed by tenant
 * lane: `tenantConcurrency`, lib/infra/README.md) and, in the same run, on a second stack whose
 * groups are keyed by order key alone (no per-tenant bound), to show what the lanes change.
 */

/** One stack's figures: tenant B alone, B during A's burst, and how long A's burst took. */
export interface TenantRun {
  readonly quiet: Latency;
  readonly underBurst: Latency;
  /** The samples, in the order they were taken (ms). */
  readonly quietMs: readonly number[];
  readonly underBurstMs: readonly number[];
  /** From A's first post until A's last reply was delivered, in seconds. */
  readonly burstSeconds: number;
}

export interface TenantsResult {
  /** The stack as deployed: the support groups keyed by tenant lane. */
  readonly lanes: TenantRun;
  /** The same groups keyed by order key alone (absent when the stack has no front door). */
  readonly orderKeys?: TenantRun;
  readonly burstMessages: number;
}

const SAMPLES = 3;
const BURST_CONVERSATIONS = 40;
/** How far apart B's messages during the burst are posted. */
const BURST_SAMPLE_SPACING_MS = 1000;

type Out = (line?: string) => void;

/** The project's topology with every group keyed by order key alone (no tenant lanes). */
export function withoutTenantLanes(given: Topology): Topology {
  return {
    ...given,
    groups: given.groups.map(({ tenantConcurrency: _, ...group }) => group),
  };
}

/** The groups of a topology that bound a tenant's concurrency, as `name (n of m)`. */
function laneGroups(given: Topology): string {
  return given.groups
    .filter((g) => g.tenantConcurrency !== undefined)
    .map((g) => `${g.name} (${g.tenantConcurrency} of ${g.maxConcurrency})`)
    .join(", ");
}

/**
 * Measure on `env` (the stack as deployed), then bring up a second stack without tenant lanes
 * (`track` registers it, so an interrupted run stops it) and measure the same there.
 */
export async function measureTenants(
  env: LocalEnvironment,
  delivered: Map<string, number>,
  out: Out,
  track: (env: LocalEnvironment | undefined) => void,
): Promise<TenantsResult | undefined> {
  if (!env.frontDoor) return undefined;
  const lanes = await measureRun(env, delivered);
  printRun(out, `tenant lanes in ${laneGroups(topology)}`, lanes);
  const plain = new Map<string, number>();
  const other = await startLocal({
    topology: withoutTenantLanes(topology),
    onDelivery: (d) => {
      if (!plain.has(d.conversationId)) plain.set(d.conversationId, performance.now());
    },
  });
  track(other);
  try {
    const orderKeys = await measureRun(other, plain);
    printRun(out, "the same groups keyed by order key alone (a second stack)", orderKeys);
    out(
      `  tenant B during the burst, median: ${fmtInt(lanes.underBurst.p50)} ms with tenant lanes, ${fmtInt(orderKeys.underBurst.p50)} ms without (${fmt(orderKeys.underBurst.p50 / lanes.underBurst.p50, 1)}×); tenant A's burst took ${fmt(lanes.burstSeconds, 1)} s and ${fmt(orderKeys.burstSeconds, 1)} s`,
    );
    return { lanes, orderKeys, burstMessages: BURST_CONVERSATIONS };
  } finally {
    track(undefined);
    await other.stop();
  }
}

function printRun(out: Out, label: string, run: TenantRun): void {
  const list = (samples: readonly number[], l: Latency) =>
    `${samples.map((ms) => fmtInt(ms)).join(", ")} ms (median ${fmtInt(l.p50)})`;
  out(
    `tenants, ${label}: tenant B's message posted to the front door until its reply is delivered, alone ${list(run.quietMs, run.quiet)}; during tenant A's burst of ${BURST_CONVERSATIONS} conversations ${list(run.underBurstMs, run.underBurst)}, ${fmt(run.underBurst.p50 / run.quiet.p50, 1)}× alone; A's burst answered in ${fmt(run.burstSeconds, 1)} s`,
  );
}

/** Tenant A's and B's tokens, and a POST of a message to the stack's front door. */
async function clientsOf(env: LocalEnvironment) {
  const door = env.frontDoor;
  if (!door) throw new Error("tenants bench: the stack has no front door");
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
  return { post, tokens };
}

/** B alone SAMPLES times one after another, then SAMPLES times while A's burst goes through. */
async function measureRun(
  env: LocalEnvironment,
  delivered: Map<string, number>,
): Promise<TenantRun> {
  const { post, tokens } = await clientsOf(env);
  /** Tenant B's message, posted -> its reply delivered, in ms. */
  const tenantB = async () => {
    const conversation = `conv_${ulid()}`;
    const started = performance.now();
    await post(tokens.b, conversation, "Where is my order 123?");
    const key = tenantConversationId("tenant-b", conversation);
    await until(() => delivered.has(key), 120_000);
    return (delivered.get(key) ?? 0) - started;
  };

  await env.runtime.idle();
  const quiet: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    quiet.push(await tenantB());
    await env.runtime.idle();
  }
  const burstIds = Array.from({ length: BURST_CONVERSATIONS }, () => `conv_${ulid()}`);
  const burstStarted = performance.now();
  const burst = Promise.all(
    burstIds.map((id) => post(tokens.a, id, "Has the refund for order 123 gone through?")),
  );
  // B's messages go out 0, 1 and 2 s into the burst, each in a conversation of its own, so each
  // meets A's backlog at its largest (one after another, the later ones met its tail only).
  const underBurst = await Promise.all(
    Array.from({ length: SAMPLES }, async (_, i) => {
      await new Promise((r) => setTimeout(r, i * BURST_SAMPLE_SPACING_MS));
      return tenantB();
    }),
  );
  await burst;
  // Deliveries name the conversation as stored: keyed by the tenant and the client's id.
  const burstKeys = burstIds.map((id) => tenantConversationId("tenant-a", id));
  await until(() => burstKeys.every((key) => delivered.has(key)), 300_000);
  const lastReply = Math.max(...burstKeys.map((key) => delivered.get(key) ?? 0));
  await env.runtime.idle();
  return {
    quiet: percentiles(quiet),
    underBurst: percentiles(underBurst),
    quietMs: quiet,
    underBurstMs: underBurst,
    burstSeconds: (lastReply - burstStarted) / 1000,
  };
}

async function until(done: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error("tenants bench: a reply never came");
    await new Promise((r) => setTimeout(r, 50));
  }
}
