import { ulid } from "ulid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { appendToStream } from "../../functions/core/producer";
import { systemClock, ulidSource } from "../../functions/core/runtime";
import { longForm } from "../../functions/roles/content-agents/workflows";
import type { TaskView } from "../../functions/roles/task-projection/task-projection";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { putOnBus } from "../../lib/dev/local/put-on-bus";
import { waitUntil } from "../../lib/dev/local/scenario/customer-support";
import { runCommand, waitForRunEnd } from "../../lib/dev/local/scenario/workflow";
import { traceOf } from "../../lib/operator/source";
import type { TraceNode } from "../../lib/operator/views";
import { type Envelope, registry } from "../../schemas";
import { emulator } from "../support/aws";
import { groupOutcome } from "../support/outcomes";

/**
 * Schema evolution end to end on the local runtime: events written in an older schema version (a
 * client that still sends v1, a v1 event in the event store) are read at the newest version by
 * the roles that consume them and by the trace.
 */
const TIMEOUT = 180_000;

function flatten(nodes: readonly TraceNode[]): TraceNode[] {
  return nodes.flatMap((n) => [n, ...flatten(n.children)]);
}

describe("schema evolution on the local runtime", () => {
  let env: LocalEnvironment;

  beforeAll(async () => {
    env = await startLocal({
      endpoint: emulator().endpoint,
      stage: `se${ulid().slice(-6).toLowerCase()}`,
    });
  }, 240_000);

  afterAll(async () => {
    await env?.stop();
  });

  it(
    "a client that still sends workflow.start.requested v1 gets its run, started from the v2 shape",
    async () => {
      const runId = `run_${ulid()}`;
      const command = runCommand("workflow.start.requested", runId, `corr_${ulid()}`, {
        workflow_name: "long-form",
        request: { topic_hint: "tidal power" },
      });
      const v1 = {
        ...command,
        schema_version: 1,
        payload: { run_id: runId, workflow: "long-form", request: { topic_hint: "tidal power" } },
      } as Envelope;
      expect(registry.parse(v1)).toMatchObject({ ok: true, upcastFrom: 1 });
      await putOnBus(env, "commands", [v1]);
      const ended = await waitForRunEnd(env, runId, TIMEOUT);
      expect(ended.run.status).toBe("COMPLETED");
      expect(ended.run.workflow).toEqual({
        name: "content.long-form",
        version: longForm.version,
      });
      const outcome = await groupOutcome(env.store, "orchestrator", v1);
      expect(outcome).toMatchObject({ outcome: "applied" });
    },
    TIMEOUT,
  );

  it(
    "a v1 plan.created in the event store reaches the task projection and the trace as v2",
    async () => {
      const taskId = `task_${ulid()}`;
      const correlationId = `corr_${ulid()}`;
      const deps = { store: env.store, registry, clock: systemClock, ids: ulidSource() };
      const [accepted] = await appendToStream(deps, {
        aggregate: { type: "task", id: taskId },
        producer: "task-api",
        correlationId,
        taskId,
        decide: () => ({
          state: { n: 1 },
          emit: [{ type: "task.accepted", payload: { title: "An older producer's task" } }],
        }),
      });
      // What a producer deployed before plan.created v2 wrote: schema version 1, bare titles.
      const plan = {
        ...accepted,
        event_id: ulid(),
        event_type: "plan.created",
        schema_version: 1,
        causation_id: accepted?.event_id,
        aggregate: { type: "task", id: taskId, version: 2 },
        payload: { steps: ["outline", "draft"] },
      } as Envelope;
      await env.store.commit({ append: [plan] });

      const view = await waitUntil(
        "the task view with its plan",
        async () => {
          const loaded = await env.store.load({ state: { type: "task_view", id: taskId } });
          const data = loaded.state?.data as TaskView | undefined;
          return data?.plan ? data : undefined;
        },
        TIMEOUT,
      );
      expect(view).toMatchObject({ status: "planned", plan_steps: 2, plan: ["outline", "draft"] });

      const trace = await traceOf(env.ops, taskId);
      const node = flatten(trace?.roots ?? []).find((n) => n.event.eventId === plan.event_id);
      expect(node?.event).toMatchObject({ eventType: "plan.created", storedSchemaVersion: 1 });
    },
    TIMEOUT,
  );
});
