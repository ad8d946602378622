import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { PutEventsCommand } from "@aws-sdk/client-eventbridge";
import { Template } from "aws-cdk-lib/assertions";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RoleModule } from "../../functions/core/role-module";
import { auditModule } from "../../functions/roles/audit/module";
import { ROLE_MODULES } from "../../functions/roles/modules";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { waitUntil } from "../../lib/dev/local/scenario/customer-support";
import { AgentBusStack } from "../../lib/infra/agentbus-stack";
import { defineTopology, groupOf } from "../../lib/infra/topology";
import { type EventRegistry, registry } from "../../schemas";
import { testApp } from "../cdk/synth";
import { emulator } from "../support/aws";

/**
 * "Your first role" (functions/roles/README.md), as written: its code blocks are copied into place (under names
 * of their own, which .gitignore keeps out of the repository, so a run never touches a team's
 * real `feedback-triage`), its test runs, its module is synthesized into the stack (queues,
 * grants, alarms), and the role is driven end to end on the local stack.
 */

const ROOT = join(import.meta.dirname, "..", "..");
/** The walk-through lives beside the roles (the top-level README points to it). */
const README = readFileSync(join(ROOT, "functions", "roles", "README.md"), "utf8");
const GROUP = "feedback-triage";
/** A copied file, imported by URL: it exists only while the test runs. */
const fileUrl = (path: string) => pathToFileURL(join(ROOT, path)).href;
const STAGE = `fr-${Date.now().toString(36)}`;

/** Where each README path is copied to: the same depth, so its relative imports hold. */
const COPY_OF: Readonly<Record<string, string>> = {
  "functions/roles/feedback-triage/": "functions/roles/first-role-copy/",
  "schemas/events/feedback.ts": "schemas/events/first-role-copy.ts",
  "test/roles/feedback-triage.test.ts": "test/roles/first-role-copy.test.ts",
};
const copied = (text: string) =>
  Object.entries(COPY_OF).reduce((out, [from, to]) => out.replaceAll(from, to), text);

/** The README's `<!-- first-role:<path> -->` blocks, by path. */
function exampleBlocks(): Map<string, string> {
  const blocks = new Map<string, string>();
  for (const match of README.matchAll(/<!-- first-role:(\S+) -->\s*```ts\n([\s\S]*?)```/g)) {
    blocks.set(match[1] as string, match[2] as string);
  }
  return blocks;
}

/** The line the README has the reader add to schemas/index.ts, for the copied test to run. */
const REGISTERED = `import { registry } from "../../schemas";
import { defineFeedbackEvents } from "../../schemas/events/first-role-copy";
defineFeedbackEvents(registry);
`;

describe("README: your first role", () => {
  const written: string[] = [];
  let module: RoleModule;

  beforeAll(async () => {
    const blocks = exampleBlocks();
    expect([...blocks.keys()].sort()).toEqual([
      "functions/roles/feedback-triage/handler.ts",
      "functions/roles/feedback-triage/module.ts",
      "schemas/events/feedback.ts",
      "test/roles/feedback-triage.test.ts",
    ]);
    for (const [path, code] of blocks) {
      const target = join(ROOT, copied(path));
      mkdirSync(dirname(target), { recursive: true });
      const text = copied(code);
      writeFileSync(target, path.startsWith("test/") ? REGISTERED + text : text);
      written.push(target);
    }
    const events = (await import(fileUrl("schemas/events/first-role-copy.ts"))) as {
      defineFeedbackEvents(registry: EventRegistry): unknown;
    };
    events.defineFeedbackEvents(registry);
    const copy = (await import(fileUrl("functions/roles/first-role-copy/module.ts"))) as {
      feedbackTriageModule: RoleModule;
    };
    module = copy.feedbackTriageModule;
  });

  afterAll(() => {
    rmSync(join(ROOT, "functions/roles/first-role-copy"), { recursive: true, force: true });
    for (const file of written) rmSync(file, { force: true });
  });

  it("its test passes as written", () => {
    const output = execFileSync("npx", ["vitest", "run", "test/roles/first-role-copy.test.ts"], {
      cwd: ROOT,
      encoding: "utf8",
      env: { ...process.env, TEST_WORKERS: "1" },
    });
    expect(output).toMatch(/1 passed/);
  }, 120_000);

  it("one line in the module list gives it a group: queues, consumer, grants, alarms", () => {
    const topology = defineTopology({
      topics: ["commands", "events", "audit"],
      groups: [...ROLE_MODULES, module].map(groupOf),
    });
    const app = testApp();
    const stack = new AgentBusStack(app, "AgentBus-first-role", { topology });
    const template = Template.fromJSON(app.synth().getStackByName(stack.stackName).template);
    const resources = Object.values(
      template.toJSON().Resources as Record<
        string,
        { Type: string; Properties?: unknown; Metadata?: Record<string, unknown> }
      >,
    );
    const named = (type: string, fragment: string) =>
      resources.filter((r) => r.Type === type && JSON.stringify(r.Properties).includes(fragment));

    const queues = named("AWS::SQS::Queue", GROUP).map((q) => JSON.stringify(q.Properties));
    // Buffer, buffer DLQ, FIFO queue, FIFO DLQ; the FIFO queue dead-letters after 3 receives.
    expect(queues).toHaveLength(4);
    expect(queues.some((q) => q.includes('"maxReceiveCount":3'))).toBe(true);
    expect(named("AWS::Events::Rule", "task.feedback.received").length).toBeGreaterThan(1);
    // Its consumer runs the copied entry (its dispatch function carries the group name too).
    const consumer = named("AWS::Lambda::Function", `"GROUP_NAME":"${GROUP}"`).filter(
      (f) => f.Metadata?.["agentbus:entry"] === copied(module.entry),
    );
    expect(consumer).toHaveLength(1);
    expect(named("AWS::CloudWatch::Alarm", GROUP).length).toBeGreaterThan(0);
    const policies = named("AWS::IAM::Policy", "dynamodb:").map((p) => JSON.stringify(p));
    const own = policies.filter((p) => p.includes("FeedbackTriage"));
    expect(own.length).toBeGreaterThan(0);
    // It declares no model: no Bedrock grant.
    expect(own.some((p) => p.includes("bedrock:"))).toBe(false);
  });

  describe("on the local stack", () => {
    let env: LocalEnvironment;
    const taskId = "task_01KB0Q3V9X7T2M4N6P8R0S1W3Y";

    beforeAll(async () => {
      const topology = defineTopology({
        topics: ["commands", "events", "audit"],
        groups: [groupOf(module), groupOf(auditModule)],
      });
      env = await startLocal({ endpoint: emulator().endpoint, stage: STAGE, topology });
    }, 240_000);

    afterAll(async () => {
      await env?.stop();
    });

    it("a client's poor rating is escalated once, and the escalation is on the role's stream", async () => {
      const feedback = (eventId: string, rating: number) => ({
        EventBusName: env.buses.events,
        Source: "agentbus.client",
        DetailType: "task.feedback.received",
        Detail: JSON.stringify({
          event_id: eventId,
          event_type: "task.feedback.received",
          schema_version: 1,
          occurred_at: new Date().toISOString(),
          correlation_id: `corr_${eventId}`,
          causation_id: null,
          task_id: taskId,
          aggregate: { type: "task", id: taskId, version: 0 },
          producer: "client",
          payload: { rating },
        }),
      });
      const ref = { type: "feedback_triage", id: taskId };
      // Messages from outside a stream have no order between them: the second is sent once the
      // first is counted, so which rating is escalated is known.
      const counted = (ratings: number) =>
        waitUntil(
          `${ratings} rating(s) counted`,
          async () => {
            const { state } = await env.store.load({ state: ref });
            const data = state?.data as { ratings?: number } | undefined;
            return data?.ratings === ratings ? data : undefined;
          },
          60_000,
        );
      const put = (eventId: string, rating: number) =>
        env.clients.eventbridge.send(
          new PutEventsCommand({ Entries: [feedback(eventId, rating)] }),
        );
      await put("01KB0Q3V9X7T2M4N6P8R0S1W40", 1);
      await counted(1);
      await put("01KB0Q3V9X7T2M4N6P8R0S1W41", 2);
      const state = await counted(2);
      expect(state).toEqual({ ratings: 2, escalated: true });
      const stream = await env.store.readStream(ref, 1, 10);
      expect(stream.map((e) => [e.event_type, e.aggregate.version, e.payload])).toEqual([
        ["feedback.escalated", 1, { rating: 1 }],
      ]);
    }, 90_000);
  });
});
