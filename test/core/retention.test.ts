import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
// The reference applications' event types (their modules define them), as npm run schemas reads them.
import "../../functions/roles/modules";
import { buildHeartbeat } from "../../functions/core/emit";
import { consume } from "../../functions/core/pipeline";
import type { InboxRecord } from "../../functions/core/ports";
import {
  RETENTION,
  retentionPlaces,
  retentionProblem,
  unreachableByErasure,
  withinRetention,
} from "../../functions/core/retention";
import { audit } from "../../functions/roles/audit/audit";
import {
  PERSONAL_DATA_MARKERS,
  personalDataSection,
  personalDataSectionOf,
  withPersonalDataSection,
} from "../../lib/dev/personal-data-table";
import { registry } from "../../schemas";
import { feedback, makeDeps, newTaskId } from "./fixtures";

const DAY = 24 * 3600;
const README = readFileSync(
  join(import.meta.dirname, "..", "..", "functions", "roles", "README.md"),
  "utf8",
);

describe("the retention declaration (functions/core/retention.ts)", () => {
  it("holds the defaults AgentBus keeps data for", () => {
    expect({
      archive: RETENTION.archive.days,
      deadLetterQueues: RETENTION.deadLetterQueues.days,
      queues: RETENTION.queues.days,
      auditMessages: RETENTION.auditMessages.days,
      heartbeats: RETENTION.heartbeats.days,
      inboxRows: RETENTION.inboxRows.days,
      functionLogs: RETENTION.functionLogs.days,
      accessLog: RETENTION.accessLog.days,
      acceptedRequests: RETENTION.acceptedRequests.days,
      backups: RETENTION.backups.days,
    }).toEqual({
      archive: 30,
      deadLetterQueues: 14,
      queues: 4,
      auditMessages: 30,
      heartbeats: 1,
      inboxRows: 7,
      functionLogs: 30,
      accessLog: 30,
      acceptedRequests: 1,
      backups: 35,
    });
  });

  it("says, for every place that holds personal data, what erasure does to it; an expiring place has days", () => {
    for (const place of retentionPlaces()) {
      if (place.holds === undefined) {
        expect(place.erasure, place.name).toBeUndefined();
        expect(place.days, place.name).toBeGreaterThan(0);
      } else expect(place.erasure, place.name).toBeDefined();
      if (place.erasure === "expires") expect(place.days, place.name).toBeGreaterThan(0);
      if (place.maxDays !== undefined)
        expect(place.days ?? 0, place.name).toBeLessThanOrEqual(place.maxDays);
    }
  });

  it("lists what erasure cannot reach, with when each expires", () => {
    // The buses' copies are sealed: erasure reaches them; a client's own plain message it cannot.
    expect(unreachableByErasure().map((p) => [p.name, p.days])).toEqual([
      ["clientMessages", 30],
      ["backups", 35],
      ["functionLogs", 30],
      ["accessLog", 30],
    ]);
    const deployed = unreachableByErasure({ backups: 7 });
    expect(deployed.find((p) => p.name === "backups")?.days).toBe(7);
    expect(deployed.find((p) => p.name === "functionLogs")?.days).toBe(30);
  });

  it("lets a deployer set whole days within the service's limit, and names a bad value", () => {
    expect(retentionProblem("archive", 7)).toBeUndefined();
    expect(retentionProblem("deadLetterQueues", 14)).toBeUndefined();
    expect(retentionProblem("deadLetterQueues", 15)).toMatch(
      /deadLetterQueues must be a whole number of days from 1 to 14, not 15/,
    );
    expect(retentionProblem("archive", 0)).toMatch(/not 0/);
    expect(retentionProblem("archive", 1.5)).toMatch(/not 1.5/);
    expect(retentionProblem("eventStore", 30)).toMatch(/retention of eventStore cannot be set/);
  });
});

describe("the README's personal-data table (functions/roles/README.md)", () => {
  it("is the one the declaration makes (npm run schemas writes it)", () => {
    expect(personalDataSectionOf(README)).toBe(personalDataSection(registry));
  });

  it("says the audit rows of client messages expire, and lists every declared personal field", () => {
    const section = personalDataSection(registry);
    const auditRow = section.split("\n").find((l) => l.includes(RETENTION.auditMessages.where));
    expect(auditRow).toMatch(/\| 30 days \(`agentbus:retention:auditMessages`\) +\|/);
    expect(section).not.toMatch(/never expire/);
    for (const d of registry.definitions())
      for (const field of d.personal ?? [])
        expect(section).toMatch(new RegExp(`\`${d.type}\` +\\|.*\`${field}\``));
  });

  it("a README whose table drifted from the declaration fails the check, and the writer restores it", () => {
    const drifted = README.replace("| 30 days ", "| 31 days ");
    expect(drifted).not.toBe(README);
    expect(personalDataSectionOf(drifted)).not.toBe(personalDataSection(registry));
    const rewritten = withPersonalDataSection(drifted, personalDataSection(registry));
    expect(rewritten).toBe(README);
    expect(() => withPersonalDataSection("# no markers\n", "x")).toThrow(
      PERSONAL_DATA_MARKERS.start,
    );
  });
});

describe("how long the audit group keeps a message from outside a stream", () => {
  const keptRow = async (store: ReturnType<typeof makeDeps>["store"], eventId: string) =>
    (await store.inboxRecords("audit", [eventId]))[0];
  // The audit group takes no heartbeat (the run it reports on keeps it); a group that keeps
  // messages and takes heartbeats keeps each a day, as `heartbeats` says.
  const beatKeeper = {
    ...audit,
    subscriptions: [...audit.subscriptions, "node.heartbeat", "node.started"],
  };

  it("a client's message: 30 days, then the trace reads its outcome without the message", async () => {
    const { deps, store, clock } = makeDeps();
    const message = feedback(newTaskId(), 5);
    const receivedAt = Math.floor(clock.now().getTime() / 1000);
    expect((await consume(message, audit, deps)).status).toBe("applied");
    expect(await keptRow(store, message.event_id)).toMatchObject({
      expiresAt: receivedAt + 30 * DAY,
      envelope: message,
    });
    clock.advance(29 * DAY * 1000);
    // Still its record: a redelivery is a duplicate.
    expect((await consume(message, audit, deps)).status).toBe("duplicate");
    clock.advance(DAY * 1000);
    const past = await keptRow(store, message.event_id);
    expect(past).toMatchObject({ eventId: message.event_id, outcome: "applied" });
    expect(past).not.toHaveProperty("envelope");
    // A trace finds the row by its correlation (by task only through the task's stored events).
    const [traced] = await store.outcomesByCorrelation(message.correlation_id);
    expect(traced).toMatchObject({ eventId: message.event_id, outcome: "applied" });
    expect(traced).not.toHaveProperty("envelope");
  });

  it("as long as the group's setting says (KEPT_MESSAGE_DAYS), a heartbeat a day whatever it says", async () => {
    const { deps, store, clock } = makeDeps();
    const message = feedback(newTaskId(), 5);
    const at = Math.floor(clock.now().getTime() / 1000);
    await consume(message, audit, deps, { keptMessageTtlSeconds: 7 * DAY });
    expect((await keptRow(store, message.event_id))?.expiresAt).toBe(at + 7 * DAY);
    const beat = buildHeartbeat(
      {
        type: "node.heartbeat",
        payload: { run_id: "run_abc", node_id: "n", generation: 0, lease_seconds: 60 },
        aggregate: { type: "dag_run", id: "run_abc" },
      },
      message,
      "writing",
      deps,
      1,
    );
    await consume(beat, beatKeeper, deps, { keptMessageTtlSeconds: 7 * DAY });
    expect((await keptRow(store, beat.event_id))?.expiresAt).toBe(at + DAY);
  });

  it("a heartbeat carries expires_at a day on, and a group that keeps messages keeps it a day", async () => {
    const { deps, store, clock } = makeDeps();
    const cause = feedback(newTaskId(), 5);
    const beat = buildHeartbeat(
      {
        type: "node.heartbeat",
        payload: { run_id: "run_abc", node_id: "n", generation: 0, lease_seconds: 60 },
        aggregate: { type: "dag_run", id: "run_abc" },
      },
      cause,
      "writing",
      deps,
      1,
    );
    const now = clock.now().getTime();
    expect(beat.expires_at).toBe(new Date(now + DAY * 1000).toISOString());
    expect((await consume(beat, beatKeeper, deps)).status).toBe("applied");
    expect((await keptRow(store, beat.event_id))?.expiresAt).toBe(now / 1000 + DAY);
  });

  it("a heartbeat past its expiry is discarded, and its row still goes within a day", async () => {
    const { deps, store, clock } = makeDeps();
    const beat = buildHeartbeat(
      {
        type: "node.started",
        payload: {
          run_id: "run_abc",
          node_id: "n",
          generation: 0,
          attempt: 1,
          agent: "writing",
          lease_seconds: 60,
        },
        aggregate: { type: "dag_run", id: "run_abc" },
      },
      feedback(newTaskId(), 5),
      "writing",
      deps,
      1,
    );
    clock.advance((DAY + 1) * 1000);
    expect((await consume(beat, beatKeeper, deps)).steps[0]?.reason).toBe("expired");
    const row = await keptRow(store, beat.event_id);
    expect(row?.outcome).toBe("discarded");
    expect(row?.expiresAt).toBe(clock.now().getTime() / 1000 + DAY);
  });
});

describe("a heartbeat's expiry", () => {
  const spec = (expiresAt?: string) => ({
    type: "node.heartbeat",
    payload: { run_id: "run_abc", node_id: "n", generation: 0, lease_seconds: 60 },
    aggregate: { type: "dag_run", id: "run_abc" },
    ...(expiresAt ? { expiresAt } : {}),
  });

  it("is the spec's when it comes sooner, never later than a day", () => {
    const { deps } = makeDeps("2026-09-01T10:00:00.000Z");
    const cause = feedback(newTaskId(), 5);
    const soon = "2026-09-01T10:05:00.000Z";
    expect(buildHeartbeat(spec(soon), cause, "writing", deps, 1).expires_at).toBe(soon);
    expect(
      buildHeartbeat(spec("2026-09-09T10:00:00.000Z"), cause, "writing", deps, 1).expires_at,
    ).toBe("2026-09-02T10:00:00.000Z");
  });

  it("only a registered heartbeat type is a heartbeat", () => {
    const { deps } = makeDeps();
    expect(() =>
      buildHeartbeat(
        { ...spec(), type: "task.feedback.received", payload: { rating: 5 } },
        feedback(newTaskId(), 5),
        "writing",
        deps,
        1,
      ),
    ).toThrow(/registered heartbeat type.*not task.feedback.received/);
  });
});

describe("withinRetention", () => {
  const row = (expiresAt: number, envelope?: InboxRecord["envelope"]): InboxRecord => ({
    group: "audit",
    eventId: "01J8ZK4Q0R3V9W6X2Y5Z7A8B9C",
    eventType: "task.feedback.received",
    outcome: "applied",
    aggregate: { type: "task", id: "task_1" },
    version: 0,
    correlationId: "corr_1",
    taskId: "task_1",
    producer: "web-client",
    occurredAt: "2026-09-01T10:00:00.000Z",
    recordedAt: "2026-09-01T10:00:00.000Z",
    expiresAt,
    ...(envelope ? { envelope } : {}),
  });
  const now = new Date("2026-09-01T10:00:00.000Z");
  const at = now.getTime() / 1000;
  const envelope = feedback("task_1", 5);

  it("keeps a live row's message, drops an expired row's, leaves rows without one as they are", () => {
    expect(withinRetention(row(at + 1, envelope), now).envelope).toBe(envelope);
    expect(withinRetention(row(at, envelope), now)).toEqual(row(at));
    expect(withinRetention(row(at - 1), now)).toEqual(row(at - 1));
    expect(withinRetention(row(Number.MAX_SAFE_INTEGER, envelope), now).envelope).toBe(envelope);
  });
});
