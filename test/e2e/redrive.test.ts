import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { appendToStream } from "../../functions/core/producer";
import { systemClock, ulidSource } from "../../functions/core/runtime";
import { traceIdOf } from "../../functions/core/trace-context";
import { audit } from "../../functions/roles/audit/audit";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { waitUntil } from "../../lib/dev/local/scenario/customer-support";
import { defineTopology } from "../../lib/infra/topology";
import { listDeadLetters } from "../../lib/operator/dead-letters";
import { type Envelope, registry } from "../../schemas";
import { auditedOutcomes } from "../support/audit";
import { emulator } from "../support/aws";
import { localCli } from "../support/cli";
import {
  BUGGY_GROUP,
  BUGGY_VIEW,
  type BuggyView,
  bug,
  buggyProjection,
} from "../support/handlers/buggy-projection";

const STAGE = `rd-${Date.now().toString(36)}`;

/**
 * Dead-letter redrive on the local stack, the real case: a projection fails for good on version 2
 * of a stream (a bug), version 3 follows it into the dead-letter queue; after the fix one
 * `agentbus dlq redrive` applies 2 then 3, once each, and says so in the audit trail.
 */
describe("agentbus dlq redrive", () => {
  let env: LocalEnvironment;
  let stream: Envelope[];

  const cli = localCli(() => env, STAGE, { AGENTBUS_OPERATOR: "ops-oncall" });

  const view = async (): Promise<BuggyView | undefined> => {
    const ref = { type: BUGGY_VIEW, id: stream[0]?.aggregate.id ?? "" };
    const { state } = await env.store.load({ state: ref });
    return state?.data as BuggyView | undefined;
  };
  const applied = async () => (await view())?.applied;
  const deadLetters = () => listDeadLetters(env.ops, { group: BUGGY_GROUP });

  beforeAll(async () => {
    const topology = defineTopology({
      topics: ["commands", "events", "audit"],
      groups: [
        {
          name: BUGGY_GROUP,
          role: buggyProjection,
          handler: "test/support/handlers/buggy-projection.ts",
        },
        {
          name: "audit",
          role: audit,
          handler: "functions/roles/audit/handler.ts",
          ordering: "none",
        },
      ],
    });
    env = await startLocal({ endpoint: emulator().endpoint, stage: STAGE, topology });
    bug.failOn = new Set([2]);
    const taskId = `task_${ulid()}`;
    const deps = { store: env.store, registry, clock: systemClock, ids: ulidSource() };
    stream = [];
    for (const type of ["task.accepted", "plan.created", "answer.generated"] as const) {
      const payload =
        type === "task.accepted"
          ? { title: "Refund status" }
          : type === "plan.created"
            ? { steps: [{ title: "look up" }] }
            : { answer_ref: "ans_1" };
      stream.push(
        ...(await appendToStream(deps, {
          aggregate: { type: "task", id: taskId },
          producer: "task-api",
          correlationId: `corr_${ulid()}`,
          taskId,
          cause: stream.at(-1),
          decide: () => ({ state: { n: stream.length + 1 }, emit: [{ type, payload }] }),
        })),
      );
    }
    // A delivery repeated upstream (a relay retry) may dead-letter a version twice: wait for both.
    await waitUntil(
      "versions 2 and 3 in the dead-letter queue",
      async () => {
        const ids = new Set((await deadLetters()).map((l) => l.eventId));
        return ids.has(stream[1]?.event_id) && ids.has(stream[2]?.event_id) ? true : undefined;
      },
      120_000,
    );
  }, 240_000);

  afterAll(async () => {
    await env?.stop();
  });

  it("before the fix: version 1 applied, versions 2 and 3 dead-lettered with the bug's code", async () => {
    expect(await applied()).toEqual([1]);
    const letters = await deadLetters();
    expect(letters.map((l) => [l.eventId, l.code])).toEqual(
      expect.arrayContaining([
        [stream[1]?.event_id, "projection.bug"],
        [stream[2]?.event_id, "projection.bug"],
      ]),
    );
  });

  it("refuses bad input with exit code 2 and moves nothing", async () => {
    const unknown = await cli("dlq", "redrive", "no-such-group");
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("no consumer group no-such-group");
    const badId = await cli("dlq", "redrive", BUGGY_GROUP, "--event-id", "nope");
    expect(badId.code).toBe(2);
    const dry = await cli("dlq", "redrive", BUGGY_GROUP, "--dry-run");
    expect(dry.code).toBe(0);
    const held = (await deadLetters()).length;
    expect(held).toBeGreaterThanOrEqual(2);
    expect(dry.stdout).toContain(`would move ${held} dead letter(s)`);
    expect(await deadLetters()).toHaveLength(held);
  }, 240_000);

  it("after the fix, one redrive applies 2 then 3, once each; a second redrive changes nothing", async () => {
    bug.failOn = new Set();
    const before = (await deadLetters()).length;
    const result = await cli("dlq", "redrive", BUGGY_GROUP, "--reason", "projection bug fixed");
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain(`moved ${before} dead letter(s)`);
    const lines = result.stdout.split("\n");
    expect(lines.findIndex((l) => l.includes(stream[1]?.event_id ?? "?"))).toBeLessThan(
      lines.findIndex((l) => l.includes(stream[2]?.event_id ?? "?")),
    );
    await waitUntil("versions 2 and 3 applied", async () =>
      (await applied())?.length === 3 ? true : undefined,
    );
    await env.runtime.idle();
    expect(await applied()).toEqual([1, 2, 3]);
    // The redriven messages continue the trace their stream began.
    const traceId = traceIdOf(stream[0] as Envelope);
    expect(stream.map(traceIdOf)).toEqual([traceId, traceId, traceId]);
    expect((await view())?.traceIds).toEqual([traceId, traceId, traceId]);
    expect(await deadLetters()).toEqual([]);
    const recorded = /operator\.action\.recorded ([0-9A-Z]{26})/.exec(result.stdout)?.[1] ?? "";
    await waitUntil("the audit record", async () => {
      const [row] = (await env.ops.groups.includes("audit"))
        ? await auditedOutcomes(env.store, [recorded])
        : [];
      return row;
    });
    const again = await cli("dlq", "redrive", BUGGY_GROUP);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain("moved 0 dead letter(s)");
    await env.runtime.idle();
    expect(await applied()).toEqual([1, 2, 3]);
  }, 240_000);
});
