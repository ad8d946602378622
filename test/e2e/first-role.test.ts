import { execFileSync, spawnSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { PutEventsCommand } from "@aws-sdk/client-eventbridge";
import { Template } from "aws-cdk-lib/assertions";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RoleModule } from "../../functions/core/role-module";
import type * as LocalEnvironmentModule from "../../lib/dev/local/environment";
import type { LocalEnvironment } from "../../lib/dev/local/environment";
import { waitUntil } from "../../lib/dev/local/scenario/customer-support";
import type * as StackModule from "../../lib/infra/agentbus";
import type * as ProjectModule from "../../lib/infra/project";
import type * as TopologyModule from "../../lib/infra/topology";
import { testApp } from "../cdk/synth";
import { emulator } from "../support/aws";
import { SLOW_STEP_TIMEOUT_MS } from "../support/timeouts";

/**
 * "Your first role" (functions/roles/README.md), followed as a reader follows it, in a copy of
 * this checkout: its files written where it says, its edits of `schemas/index.ts` and
 * `functions/roles/modules.ts` made, its commands run (`npm run schemas`), then the tests a change
 * of the registry and the module list concerns run there (the reader's own, the schema export and
 * compatibility, the model schemas, the personal-data table, the module entries), Biome checks
 * the files as written, the copy's stack is synthesized with the role's group, and the role is
 * driven end to end on the local stack, all from the copy. The checkout itself is never touched;
 * one where the walk-through was already followed is copied as it is (an edit already made is
 * not made twice).
 */

const ROOT = join(import.meta.dirname, "..", "..");
const README = readFileSync(join(ROOT, "functions", "roles", "README.md"), "utf8");
const GROUP = "feedback-triage";
const STAGE = `fr-${Date.now().toString(36)}`;

/** The README's `<!-- first-role<kind>:<path> -->` blocks of one kind, by path. */
function blocks(kind: "" | "-edit", language: string): Map<string, string> {
  const found = new Map<string, string>();
  const pattern = new RegExp(
    `<!-- first-role${kind}:(\\S+) -->\\s*\`\`\`${language}\\n([\\s\\S]*?)\`\`\``,
    "g",
  );
  for (const match of README.matchAll(pattern)) found.set(match[1] as string, match[2] as string);
  return found;
}

/** The commands of the README's `<!-- first-role-run -->` block, without their comments. */
function commands(): string[] {
  const block = /<!-- first-role-run -->\s*```sh\n([\s\S]*?)```/.exec(README)?.[1] ?? "";
  return block
    .split("\n")
    .map((line) => line.replace(/#.*/, "").trim())
    .filter(Boolean);
}

/**
 * A diff block applied as a reader applies it: in each hunk (hunks are split by `@@`), the lines
 * marked ` ` are found together in the file, and those marked `+` are put among them. A hunk
 * whose lines are already there is left alone; one whose context is not there fails, naming it.
 */
function applyEdit(path: string, text: string, diff: string): string {
  let lines = text.split("\n");
  for (const hunk of diff.trimEnd().split(/^@@$/m)) {
    const marked = hunk.split("\n").filter((line) => line !== "");
    const before = marked.filter((l) => l.startsWith(" ")).map((l) => l.slice(1));
    const after = marked.map((l) => l.slice(1));
    const at = (wanted: string[]) =>
      lines.findIndex((_, i) => wanted.every((w, j) => lines[i + j] === w));
    if (at(after) >= 0) continue;
    const start = at(before);
    if (start < 0) throw new Error(`the README's edit of ${path} no longer fits it:\n${hunk}`);
    lines = [...lines.slice(0, start), ...after, ...lines.slice(start + before.length)];
  }
  return lines.join("\n");
}

/** A copy of the checkout as it is (tracked files and new ones, not ignored ones), node_modules linked. */
function copyOfCheckout(): string {
  const copy = mkdtempSync(join(tmpdir(), "agentbus-first-role-"));
  const files = execFileSync(
    "git",
    ["ls-files", "-z", "--cached", "--others", "--exclude-standard"],
    {
      cwd: ROOT,
      encoding: "utf8",
    },
  );
  for (const file of files.split("\0").filter(Boolean)) {
    if (!existsSync(join(ROOT, file))) continue; // deleted, not yet committed
    mkdirSync(dirname(join(copy, file)), { recursive: true });
    cpSync(join(ROOT, file), join(copy, file));
  }
  symlinkSync(join(ROOT, "node_modules"), join(copy, "node_modules"));
  return copy;
}

describe("README: your first role, followed in a copy of the checkout", () => {
  let copy: string;
  /** A command in the copy, as the reader runs it there; its output, or an error that shows it. */
  const run = (command: string, args: string[], env: NodeJS.ProcessEnv = {}) => {
    const result = spawnSync(command, args, {
      cwd: copy,
      encoding: "utf8",
      env: { ...process.env, FORCE_COLOR: undefined, NO_COLOR: "1", ...env },
      timeout: SLOW_STEP_TIMEOUT_MS,
    });
    const output = `${result.stdout}${result.stderr}`;
    if (result.status !== 0)
      throw new Error(`${[command, ...args].join(" ")} failed (${result.status}):\n${output}`);
    return output;
  };
  const fromCopy = <T>(path: string) => import(pathToFileURL(join(copy, path)).href) as Promise<T>;
  /** What the reader wrote or edited, for Biome. */
  const touched: string[] = [];

  beforeAll(() => {
    copy = copyOfCheckout();
    const files = blocks("", "ts");
    expect([...files.keys()].sort()).toEqual([
      "functions/roles/feedback-triage/handler.ts",
      "functions/roles/feedback-triage/module.ts",
      "schemas/events/feedback.ts",
      "test/roles/feedback-triage.test.ts",
    ]);
    for (const [path, code] of files) {
      mkdirSync(dirname(join(copy, path)), { recursive: true });
      writeFileSync(join(copy, path), code);
      touched.push(path);
    }
    const edits = blocks("-edit", "diff");
    expect([...edits.keys()].sort()).toEqual(["functions/roles/modules.ts", "schemas/index.ts"]);
    for (const [path, diff] of edits) {
      const file = join(copy, path);
      writeFileSync(file, applyEdit(path, readFileSync(file, "utf8"), diff));
      touched.push(path);
    }
    const steps = commands();
    expect(steps.at(-1), "the walk-through ends with npm test").toBe("npm test");
    for (const step of steps.slice(0, -1)) run("bash", ["-euo", "pipefail", "-c", step]);
  }, SLOW_STEP_TIMEOUT_MS);

  afterAll(() => {
    if (copy) rmSync(copy, { recursive: true, force: true });
  });

  it(
    "Biome passes the files as written and edited",
    () => {
      run("npx", ["biome", "check", "--vcs-enabled=false", ...touched]);
    },
    SLOW_STEP_TIMEOUT_MS,
  );

  it(
    "its test, and the tests of the registry and the module list, pass as written",
    () => {
      const output = run(
        "npx",
        [
          "vitest",
          "run",
          "test/roles/feedback-triage.test.ts",
          "test/core/schemas.test.ts",
          "test/core/schema-compat.test.ts",
          "test/core/model-schemas.test.ts",
          "test/core/retention.test.ts",
          "test/handlers/module-entries.test.ts",
        ],
        // The emulator of this worker: the copy's run starts none of its own.
        { TEST_WORKERS: "1", AWS_ENDPOINT_URL: emulator().endpoint },
      );
      expect(output).toMatch(/Test Files {2}6 passed/);
    },
    SLOW_STEP_TIMEOUT_MS,
  );

  it(
    "one line in the module list gives it a group: queues, consumer, grants, alarms",
    async () => {
      const { AgentBus } = await fromCopy<typeof StackModule>("lib/infra/agentbus.ts");
      const { PROJECT_STACK } = await fromCopy<typeof ProjectModule>("lib/infra/project.ts");
      const app = testApp();
      const stack = new AgentBus(app, "AgentBus-first-role", PROJECT_STACK);
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
      // Its consumer runs the README's entry (its dispatch function carries the group name too).
      const consumer = named("AWS::Lambda::Function", `"GROUP_NAME":"${GROUP}"`).filter(
        (f) => f.Metadata?.["agentbus:entry"] === "functions/roles/feedback-triage/handler.ts",
      );
      expect(consumer).toHaveLength(1);
      expect(named("AWS::CloudWatch::Alarm", GROUP).length).toBeGreaterThan(0);
      const policies = named("AWS::IAM::Policy", "dynamodb:").map((p) => JSON.stringify(p));
      const own = policies.filter((p) => p.includes("FeedbackTriage"));
      expect(own.length).toBeGreaterThan(0);
      // It declares no model: no Bedrock grant.
      expect(own.some((p) => p.includes("bedrock:"))).toBe(false);
    },
    SLOW_STEP_TIMEOUT_MS,
  );

  describe("on the local stack", () => {
    let env: LocalEnvironment;
    const taskId = "task_01KB0Q3V9X7T2M4N6P8R0S1W3Y";

    beforeAll(async () => {
      const { startLocal } = await fromCopy<typeof LocalEnvironmentModule>(
        "lib/dev/local/environment.ts",
      );
      const { defineTopology, groupOf } =
        await fromCopy<typeof TopologyModule>("lib/infra/topology.ts");
      const { ROLE_MODULES } = await fromCopy<{ ROLE_MODULES: readonly RoleModule[] }>(
        "functions/roles/modules.ts",
      );
      const groups = ROLE_MODULES.map(groupOf).filter((g) => [GROUP, "audit"].includes(g.name));
      const topology = defineTopology({ topics: ["commands", "events", "audit"], groups });
      env = await startLocal({ endpoint: emulator().endpoint, stage: STAGE, topology });
    }, SLOW_STEP_TIMEOUT_MS);

    afterAll(async () => {
      await env?.stop();
    });

    it(
      "a client's poor rating is escalated once, and the escalation is on the role's stream",
      async () => {
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
      },
      SLOW_STEP_TIMEOUT_MS,
    );
  });
});
