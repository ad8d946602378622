import { describe, expect, it } from "vitest";
import { layoutDag } from "../../lib/operator/console/dag-layout";
import { edgePath, STATE_PAINT } from "../../lib/operator/console/dag-svg";
import { formatTime } from "../../lib/operator/console/format";
import { escapeHtml } from "../../lib/operator/console/html";
import { refreshSeconds, routeRequest } from "../../lib/operator/console/routes";
import { describeOutcome } from "../../lib/operator/console/trace";
import type { RunView, TraceView } from "../../lib/operator/views";
import {
  at,
  CORRELATION_ID,
  contentRun,
  deadLetters,
  EVENT_IDS,
  failingSource,
  fakeSource,
  overview,
  RUN_ID,
  supportTrace,
  TASK_ID,
} from "./fixtures";
import { closest, type El, find, findAll, parseHtml, textOf, withAttr } from "./html-tree";

const HOSTILE = `<script>alert("x")</script><img src=x onerror='alert(1)'>&amp;`;

async function get(target: string, source = fakeSource()) {
  const page = await routeRequest(source, "GET", target);
  return { status: page.status, html: page.html, doc: parseHtml(page.html) };
}

/** The `<li data-event-id>` of an event and the details (outcomes, side effects, DLQs) beside it. */
function eventItem(doc: El, eventId: string) {
  const li = find(doc, withAttr("data-event-id", eventId));
  const details = find(li, (e) => e.attrs.class === "details");
  return { li, details };
}

describe("escapeHtml", () => {
  it("escapes the five characters that end text or an attribute", () => {
    expect(escapeHtml(`<a href="x" title='y'>&</a>`)).toBe(
      "&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;",
    );
  });

  it("leaves plain text alone and shows nothing for null or undefined", () => {
    expect(escapeHtml("reply.generated v3 — ok")).toBe("reply.generated v3 — ok");
    expect(escapeHtml(42)).toBe("42");
    expect(escapeHtml(undefined)).toBe("");
    expect(escapeHtml(null)).toBe("");
  });

  it("escapes an ampersand once, so an entity in the data is shown as typed", () => {
    expect(escapeHtml("&lt;")).toBe("&amp;lt;");
  });
});

describe("hostile values from the stack never become markup", () => {
  const hostileTrace = (): TraceView => {
    const base = supportTrace("");
    const [root] = base.roots;
    if (!root) throw new Error("fixture has a root");
    const outcome = {
      group: `g"${HOSTILE}`,
      outcome: "discarded" as const,
      reason: HOSTILE,
      at: HOSTILE,
    };
    return {
      ...base,
      roots: [
        {
          ...root,
          event: { ...root.event, eventType: HOSTILE, producer: HOSTILE },
          outcomes: [outcome],
        },
      ],
    };
  };
  const hostileRun = (): RunView => {
    const run = contentRun();
    return {
      ...run,
      runId: RUN_ID,
      workflow: { name: HOSTILE, version: 1 },
      status: HOSTILE,
      nodes: run.nodes.map((n, i) =>
        i === 0 ? { ...n, id: HOSTILE, role: HOSTILE, state: HOSTILE } : n,
      ),
      edges: [{ from: HOSTILE, to: "fact_check", condition: HOSTILE }, ...run.edges.slice(1)],
      timeline: [{ at: HOSTILE, event: HOSTILE, nodeId: HOSTILE, cause: HOSTILE }],
    };
  };
  const source = fakeSource({
    traces: [hostileTrace()],
    runs: [hostileRun()],
    deadLetters: deadLetters().map((d) => ({ ...d, reason: HOSTILE, eventType: HOSTILE })),
    overview: {
      ...overview(),
      runs: [{ kind: "run", id: HOSTILE, status: HOSTILE, updatedAt: HOSTILE, label: HOSTILE }],
    },
  });

  it.each([
    ["trace", `/trace?id=${encodeURIComponent(CORRELATION_ID)}`],
    ["run", `/runs/${RUN_ID}`],
    ["dead letters", "/dead-letters"],
    ["overview", "/"],
  ])("the %s page shows them as text", async (_name, target) => {
    const { status, html, doc } = await get(target, source);
    expect(status).toBe(200);
    expect(html).not.toMatch(/<script|<img/i);
    expect(html).toContain("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;");
    expect(textOf(doc)).toContain(`<script>alert("x")</script><img src=x onerror='alert(1)'>&amp;`);
  });

  it("keeps them inside the data attributes they were put in", async () => {
    const { doc } = await get(`/trace?id=${CORRELATION_ID}`, source);
    const li = find(doc, withAttr("data-event-type", HOSTILE));
    expect(li.attrs["data-event-id"]).toBe(EVENT_IDS.clientMessage);
    const outcome = find(li, withAttr("data-outcome", "discarded"));
    expect(outcome.attrs["data-reason"]).toBe(HOSTILE);
    expect(outcome.attrs["data-group"]).toBe(`g"${HOSTILE}`);
    const run = await get(`/runs/${RUN_ID}`, source);
    const g = find(run.doc, withAttr("data-node-id", HOSTILE));
    expect(g.attrs["data-state"]).toBe(HOSTILE);
  });

  it("escapes the search text it echoes, and a 404's id", async () => {
    const { status, html, doc } = await get(`/trace?id=${encodeURIComponent(HOSTILE)}`);
    expect(status).toBe(404);
    expect(html).not.toMatch(/<script|<img/i);
    expect(find(doc, (e) => e.tag === "input").attrs.value).toBe(HOSTILE);
  });
});

describe("the trace page", () => {
  it("nests each event under the event that caused it", async () => {
    const { status, doc } = await get(`/trace?id=${TASK_ID}`);
    expect(status).toBe(200);
    const parentOf = (id: string) =>
      closest(find(doc, withAttr("data-event-id", id)), withAttr("data-event-id"))?.attrs[
        "data-event-id"
      ];
    expect(parentOf(EVENT_IDS.clientMessage)).toBeUndefined();
    expect(parentOf(EVENT_IDS.routed)).toBe(EVENT_IDS.clientMessage);
    expect(parentOf(EVENT_IDS.orderLookup)).toBe(EVENT_IDS.clientMessage);
    expect(parentOf(EVENT_IDS.firstReply)).toBe(EVENT_IDS.routed);
    expect(parentOf(EVENT_IDS.secondReply)).toBe(EVENT_IDS.routed);
    const tree = find(doc, (e) => e.attrs.class === "tree");
    expect(tree.tag).toBe("ul");
    expect(tree.children.map((li) => li.attrs["data-event-id"])).toEqual([EVENT_IDS.clientMessage]);
  });

  it("shows an event's type, aggregate, version or 'unsequenced', producer and time", async () => {
    const { doc } = await get(`/trace?id=${CORRELATION_ID}`);
    const root = textOf(eventItem(doc, EVENT_IDS.clientMessage).li.children[0] as El);
    expect(root).toContain("client.message.received");
    expect(root).toContain("conversation/ conv_01J9Z3QW8Y");
    expect(root).toContain("unsequenced");
    expect(root).toContain("by channel-api");
    expect(root).toContain("2026-05-04 09:15:00.000Z");
    const reply = textOf(eventItem(doc, EVENT_IDS.secondReply).li);
    expect(reply).toContain("v3");
    expect(reply).not.toContain("unsequenced");
  });

  it("puts each group's outcome beside its own event, not its children", async () => {
    const { doc } = await get(`/trace?id=${EVENT_IDS.routed}`);
    const first = eventItem(doc, EVENT_IDS.firstReply).details;
    const superseded = find(first, withAttr("data-group", "sender"));
    expect(superseded.attrs["data-outcome"]).toBe("discarded");
    expect(textOf(superseded)).toContain("discarded: superseded");
    const routed = eventItem(doc, EVENT_IDS.routed).details;
    expect(findAll(routed, withAttr("data-outcome")).map((e) => e.attrs["data-group"])).toEqual([
      "reply-generation",
      "audit",
    ]);
    expect(textOf(find(routed, withAttr("data-group", "audit")))).toContain(
      "retrying (3 attempt(s), last error THROTTLED: Rate exceeded)",
    );
    expect(textOf(find(routed, withAttr("data-group", "reply-generation")))).toContain(
      "applied (gap repair)",
    );
  });

  it("shows side-effect records and dead-letter queue membership", async () => {
    const { doc } = await get(`/trace?id=${CORRELATION_ID}`);
    const effect = find(
      eventItem(doc, EVENT_IDS.secondReply).details,
      withAttr("data-side-effect-key"),
    );
    expect(effect.attrs["data-side-effect-key"]).toBe("send#conv_01J9Z3QW8Y#3");
    expect(effect.attrs["data-state"]).toBe("succeeded");
    expect(textOf(effect)).toContain("1 attempt(s)");
    const lookup = eventItem(doc, EVENT_IDS.orderLookup).details;
    expect(textOf(find(lookup, withAttr("data-outcome", "dead-lettered")))).toContain(
      "dead-lettered: poison (5 attempt(s), INVALID_PAYLOAD: order_id is not a string)",
    );
    const dlq = find(lookup, (e) => e.attrs.class === "dead-letter");
    expect(dlq.attrs["data-queue"]).toBe("agentbus-order-lookup-dlq.fifo");
    expect(findAll(eventItem(doc, EVENT_IDS.firstReply).details, withAttr("data-queue"))).toEqual(
      [],
    );
  });

  it("words every outcome kind", () => {
    const at = "2026-05-04T09:15:00.000Z";
    expect(describeOutcome({ group: "g", outcome: "applied", at })).toBe("applied");
    expect(describeOutcome({ group: "g", outcome: "rejected", reason: "expired", at })).toBe(
      "rejected: expired",
    );
    expect(describeOutcome({ group: "g", outcome: "retrying", at })).toBe("retrying");
    expect(describeOutcome({ group: "g", outcome: "dead-lettered", at })).toBe(
      "dead-lettered: no reason recorded",
    );
  });

  it("asks for an id when none is given", async () => {
    const { status, doc } = await get("/trace?id=%20");
    expect(status).toBe(200);
    expect(textOf(doc)).toContain("Type an event, task or correlation id");
  });
});

describe("the run page", () => {
  it("draws one <g data-node-id> per node with the node's state", async () => {
    const { status, doc } = await get(`/runs/${RUN_ID}`);
    expect(status).toBe(200);
    const svg = find(doc, (e) => e.tag === "svg");
    const groups = findAll(svg, withAttr("data-node-id"));
    expect(groups.map((g) => [g.attrs["data-node-id"], g.attrs["data-state"]])).toEqual([
      ["topic_selection", "COMPLETED"],
      ["fact_check", "COMPLETED"],
      ["writing", "FAILED"],
      ["review", "CANCELLED"],
    ]);
    for (const g of groups) {
      const rect = find(g, (e) => e.tag === "rect");
      expect(rect.attrs.fill).toBe(STATE_PAINT[g.attrs["data-state"] ?? ""]?.fill);
    }
  });

  it("labels a node with id, role, state, attempt and duration", async () => {
    const { doc } = await get(`/runs/${RUN_ID}`);
    const writing = find(doc, withAttr("data-node-id", "writing"));
    const lines = findAll(writing, (e) => e.tag === "text").map(textOf);
    expect(lines).toEqual(["writing", "writing", "FAILED", "attempt 3 · 45.8 s"]);
    expect(textOf(find(writing, (e) => e.tag === "title"))).toContain(
      "MODEL_TIMEOUT: the model did not answer within 15 s",
    );
    const review = findAll(find(doc, withAttr("data-node-id", "review")), (e) => e.tag === "text");
    expect(review.map(textOf)).toEqual(["review", "review", "CANCELLED", "attempt 0 · —"]);
  });

  it("draws every edge with an arrowhead and the condition on the conditional one", async () => {
    const { doc } = await get(`/runs/${RUN_ID}`);
    const edges = findAll(doc, (e) => e.attrs.class === "edge");
    expect(edges).toHaveLength(4);
    for (const edge of edges) {
      const path = find(edge, (e) => e.tag === "path");
      expect(path.attrs["marker-end"]).toBe("url(#arrow)");
      expect(path.attrs.d).toMatch(/^M[\d.]+,[\d.]+ .*L[\d.]+,[\d.]+$/);
    }
    const conditional = edges.filter((e) => e.attrs["data-condition"]);
    expect(conditional.map((e) => [e.attrs["data-from"], e.attrs["data-to"], textOf(e)])).toEqual([
      ["fact_check", "review", 'verdict = "pass"'],
    ]);
  });

  it("lays the DAG out left to right, parallel nodes one above the other", () => {
    const run = contentRun();
    const dag = layoutDag(run.nodes, run.edges, () => "1 s");
    const placed = (id: string) =>
      dag.nodes.find((n) => n.node.id === id) ?? expect.fail(`${id} was not placed`);
    const [topic, fact, writing, review] = [
      placed("topic_selection"),
      placed("fact_check"),
      placed("writing"),
      placed("review"),
    ];
    expect(topic.x).toBeLessThan(fact.x);
    expect(fact.x).toBe(writing.x);
    expect(fact.y).not.toBe(writing.y);
    expect(writing.x).toBeLessThan(review.x);
    expect(dag.width).toBeGreaterThanOrEqual(review.x + review.width / 2);
  });

  it("leaves out an edge whose end is not a node, and says so", async () => {
    const run = {
      ...contentRun(),
      edges: [...contentRun().edges, { from: "writing", to: "publish" }],
    };
    const { doc } = await get(`/runs/${RUN_ID}`, fakeSource({ runs: [run] }));
    expect(findAll(doc, (e) => e.attrs.class === "edge")).toHaveLength(4);
    expect(textOf(doc)).toContain(
      "Edges not drawn (an end is not a node of this run): writing → publish",
    );
  });

  it("rounds an edge's bends through the midpoints", () => {
    expect(
      edgePath([
        { x: 0, y: 0 },
        { x: 10, y: 0 },
        { x: 10, y: 10 },
      ]),
    ).toBe("M0.0,0.0 Q10.0,0.0 10.0,5.0 L10.0,10.0");
    expect(edgePath([])).toBe("");
  });

  it("has a legend and a timeline with offsets from the first step", async () => {
    const { doc } = await get(`/runs/${RUN_ID}`);
    const legend = find(doc, (e) => e.attrs.class === "legend");
    expect(textOf(legend)).toContain("NEEDS_HUMAN");
    expect(textOf(legend)).toContain("CANCELLED / SKIPPED");
    const steps = findAll(doc, (e) => e.attrs.class === "timeline-step").map((tr) =>
      tr.children.map(textOf),
    );
    expect(steps[0]).toEqual(["+0.000 s", "run.started", "", "1", "content request accepted"]);
    expect(steps[6]).toEqual([
      "+48.000 s",
      "node.failed",
      "writing",
      "1",
      "MODEL_TIMEOUT after 3 attempts",
    ]);
  });

  it("says a run without nodes has none", async () => {
    const run = { ...contentRun(), nodes: [], edges: [] };
    const { doc } = await get(`/runs/${RUN_ID}`, fakeSource({ runs: [run] }));
    expect(findAll(doc, (e) => e.tag === "svg")).toEqual([]);
    expect(textOf(doc)).toContain("This run has no nodes.");
  });
});

describe("the overview and dead-letters pages", () => {
  it("lists runs with their status, what waits for a person and the queues", async () => {
    const { doc } = await get("/");
    const run = find(
      doc,
      (e) => e.attrs["data-item-kind"] === "run" && e.attrs["data-item-id"] === RUN_ID,
    );
    expect(run.attrs["data-status"]).toBe("FAILED");
    expect(find(run, (e) => e.tag === "a").attrs.href).toBe(`/runs/${RUN_ID}`);
    // id, status, tenant, what, started (the lists' order), updated.
    const cells = run.children.map(textOf);
    expect(cells.slice(4)).toEqual([formatTime(at(47_010)), formatTime(at(48_010))]);
    const held = find(doc, withAttr("data-item-id", "conv_01J9Z3HELD"));
    expect(textOf(held)).toContain(`waiting since ${formatTime(at(4_500))}`);
    const task = find(doc, withAttr("data-item-kind", "task"));
    expect(find(task, (e) => e.tag === "a").attrs.href).toBe(`/trace?id=${TASK_ID}`);
    const waiting = (name: string) => find(doc, withAttr("data-waiting", name)).attrs["data-count"];
    expect([
      waiting("held-replies"),
      waiting("unknown-side-effects"),
      waiting("needs-human"),
      waiting("failed-runs"),
      waiting("handed-off"),
    ]).toEqual(["1", "1", "0", "1", "1"]);
    const handedOff = find(doc, withAttr("data-waiting", "handed-off"));
    expect(textOf(handedOff)).toContain("conv_01J9Z3HANDOFF");
    const facts = find(doc, (e) => e.tag === "ul" && e.attrs.class === "facts");
    expect(textOf(facts)).toContain(`last sweep: ${formatTime(at(9_000))}`);
    const lookup = find(doc, (e) => e.tag === "tr" && e.attrs["data-group"] === "order-lookup");
    expect(lookup.attrs.class).toBe("alert");
    expect(lookup.children.map(textOf)).toEqual(["order-lookup", "0", "0", "—", "1", "0", "0"]);
  });

  it("on a stack without the reference applications' roles, leaves their parts out and says why", async () => {
    const { status, doc } = await get("/", fakeSource({ features: [] }));
    expect(status).toBe(200);
    const headings = findAll(doc, (e) => e.tag === "h2").map(textOf);
    expect(headings).toEqual(["Waiting for a person", "Queues by consumer group"]);
    const cards = findAll(doc, (e) => e.attrs["data-waiting"] !== undefined);
    expect(cards.map((c) => c.attrs["data-waiting"])).toEqual([
      "awaiting-approval",
      "unknown-side-effects",
      "needs-human",
    ]);
    const facts = textOf(find(doc, (e) => e.tag === "ul" && e.attrs.class === "facts"));
    expect(facts).not.toMatch(/runs:|last sweep|failed nodes/);
    const lacking = findAll(doc, (e) => e.attrs["data-lacking"] !== undefined);
    expect(lacking.map((li) => [li.attrs["data-lacking"], textOf(li)])).toEqual([
      [
        "conversations",
        "this deployment has no customers' conversations: none of its roles takes conversation.message.received",
      ],
      [
        "runs",
        "this deployment has no workflow runs: none of its roles takes workflow.start.requested",
      ],
      ["tasks", "this deployment has no task views: none of its roles takes task.accepted"],
    ]);
    // The groups are the stack's, whatever its roles.
    expect(findAll(doc, (e) => e.tag === "tr" && e.attrs["data-group"] !== undefined).length).toBe(
      overview().status.groups.length,
    );
  });

  it("with every feature, says nothing is left out; with runs only, shows their parts alone", async () => {
    const every = await get("/");
    expect(findAll(every.doc, (e) => e.attrs["data-lacking-features"] !== undefined)).toEqual([]);
    const { doc } = await get("/", fakeSource({ features: ["runs"] }));
    const headings = findAll(doc, (e) => e.tag === "h2").map(textOf);
    expect(headings).toEqual(["Waiting for a person", "Queues by consumer group", "Recent runs"]);
    expect(find(doc, withAttr("data-waiting", "failed-runs")).attrs["data-count"]).toBe("1");
    expect(findAll(doc, withAttr("data-waiting", "held-replies"))).toEqual([]);
  });

  it("a run's page on a stack that runs no workflows says so", async () => {
    const { status, doc } = await get(`/runs/${RUN_ID}`, fakeSource({ features: ["tasks"] }));
    expect(status).toBe(404);
    expect(textOf(find(doc, (e) => e.attrs["data-not-found"] !== undefined))).toBe(
      "There are no runs to show: this deployment has no workflow runs: none of its roles takes workflow.start.requested.",
    );
  });

  it("lists each dead letter with a link to its event's trace", async () => {
    const { doc } = await get("/dead-letters");
    const row = find(doc, withAttr("data-event-id", EVENT_IDS.orderLookup));
    expect(row.attrs["data-group"]).toBe("order-lookup");
    expect(textOf(row)).toContain("order.lookup.requested");
    expect(textOf(row)).toContain("poison");
    expect(find(row, (e) => e.tag === "a").attrs.href).toBe(`/trace?id=${EVENT_IDS.orderLookup}`);
    const empty = await get("/dead-letters", fakeSource({ deadLetters: [] }));
    expect(textOf(empty.doc)).toContain("No dead letters");
  });

  it("adds a meta refresh only for ?refresh=N with N from 1 to 3600", async () => {
    const refresh = (doc: El) =>
      findAll(doc, withAttr("http-equiv", "refresh")).map((e) => e.attrs.content);
    expect(refresh((await get("/?refresh=5")).doc)).toEqual(["5"]);
    expect(refresh((await get("/?refresh=0")).doc)).toEqual([]);
    expect(refresh((await get(`/runs/${RUN_ID}?refresh=10`)).doc)).toEqual(["10"]);
    expect(refreshSeconds(new URLSearchParams("refresh=5%22%3E"))).toBeUndefined();
    expect(refreshSeconds(new URLSearchParams("refresh=3601"))).toBeUndefined();
  });

  it("puts the search box on every page", async () => {
    for (const target of [
      "/",
      "/dead-letters",
      `/runs/${RUN_ID}`,
      `/trace?id=${TASK_ID}`,
      "/nope",
    ]) {
      const form = find((await get(target)).doc, (e) => e.tag === "form");
      expect(form.attrs.action).toBe("/trace");
      expect(find(form, (e) => e.tag === "input").attrs.name).toBe("id");
    }
  });
});

describe("errors", () => {
  it.each([
    [
      "an unknown trace id",
      "/trace?id=evt_nobody_knows",
      'Nothing is known of id "evt_nobody_knows"',
    ],
    ["an unknown run id", "/runs/run_nobody_knows", 'Nothing is known of run "run_nobody_knows"'],
    ["an unknown path", "/admin", "There is no page at /admin"],
  ])("answers 404 for %s, saying so", async (_name, target, message) => {
    const { status, doc } = await get(target);
    expect(status).toBe(404);
    expect(textOf(find(doc, withAttr("data-not-found")))).toContain(message);
  });

  it.each(["/", `/trace?id=${TASK_ID}`, `/runs/${RUN_ID}`, "/dead-letters"])(
    "answers 500 with the source's message, escaped, when reading %s fails",
    async (target) => {
      const { status, html, doc } = await get(
        target,
        failingSource("table <b>agentbus-state</b> not found"),
      );
      expect(status).toBe(500);
      expect(html).not.toContain("<b>");
      expect(textOf(find(doc, withAttr("data-error")))).toBe(
        "Error: table <b>agentbus-state</b> not found",
      );
    },
  );

  it("refuses writes and malformed addresses", async () => {
    expect((await routeRequest(fakeSource(), "POST", "/")).status).toBe(405);
    expect((await routeRequest(fakeSource(), "GET", "/runs/%E0%A4%A")).status).toBe(400);
  });
});
