import { describe, expect, it } from "vitest";
import { FlashMessages } from "../../lib/operator/console/flash";
import { type PageContext, routeRequest } from "../../lib/operator/console/routes";
import type { RunView } from "../../lib/operator/views";
import { contentRun, deadLetters, fakeSource, overview, RUN_ID, TASK_ID } from "./fixtures";
import { type El, find, findAll, parseHtml, textOf, withAttr } from "./html-tree";

/** The action forms the pages carry when the console acts (and only then). */

const TOKEN = `tok"en<&>`;
const HOSTILE = `<script>alert("x")</script>&amp;`;

async function get(target: string, source = fakeSource(), context: PageContext = {}) {
  const page = await routeRequest(source, "GET", target, context);
  return { status: page.status, html: page.html, doc: parseHtml(page.html) };
}

const acting: PageContext = { forms: { token: TOKEN } };

/** The POST form with `data-action` = `action` (and `data-node` = `node`), checked for the token and reason. */
function actionForm(doc: El, action: string, node?: string): El {
  const form = find(
    doc,
    (e) =>
      e.tag === "form" &&
      e.attrs["data-action"] === action &&
      (node === undefined || e.attrs["data-node"] === node),
  );
  expect(form.attrs.method).toBe("post");
  expect(find(form, withAttr("name", "csrf")).attrs).toMatchObject({
    type: "hidden",
    value: TOKEN,
  });
  expect(find(form, withAttr("name", "reason")).attrs).toHaveProperty("required");
  return form;
}

const forms = (doc: El) => findAll(doc, (e) => e.tag === "form" && e.attrs.method === "post");

describe("the run page's actions", () => {
  it("offers reset and resolve for a FAILED node and re-run for an ended run", async () => {
    const run: RunView = contentRun();
    const { doc } = await get(`/runs/${RUN_ID}`, fakeSource({ runs: [run] }), acting);
    expect(actionForm(doc, "reset", "writing").attrs.action).toBe(`/runs/${RUN_ID}/reset`);
    const resolve = actionForm(doc, "resolve", "writing");
    expect(resolve.attrs.action).toBe(`/runs/${RUN_ID}/resolve`);
    expect(find(resolve, withAttr("name", "node")).attrs.value).toBe("writing");
    const example = JSON.parse(textOf(find(resolve, (e) => e.tag === "textarea")));
    expect(example).toEqual({ title: "<title>", body: "<body>" });
    const rerun = actionForm(doc, "rerun");
    const options = findAll(rerun, (e) => e.tag === "option").map((o) => o.attrs.value);
    expect(options).toEqual(run.nodes.map((n) => n.id));
    expect(findAll(doc, withAttr("data-action", "cancel"))).toEqual([]);
    expect(forms(doc)).toHaveLength(3);
  });

  it("offers cancel for a running run, and nothing without the console's actions", async () => {
    const running: RunView = {
      ...contentRun(),
      status: "RUNNING",
      nodes: contentRun().nodes.map((n) => ({
        ...n,
        state: n.state === "FAILED" ? "RUNNING" : n.state,
      })),
    };
    const { doc } = await get(`/runs/${RUN_ID}`, fakeSource({ runs: [running] }), acting);
    expect(actionForm(doc, "cancel").attrs.action).toBe(`/runs/${RUN_ID}/cancel`);
    expect(forms(doc)).toHaveLength(1);
    const readOnly = await get(`/runs/${RUN_ID}`);
    expect(forms(readOnly.doc)).toEqual([]);
    expect(readOnly.html).not.toContain("<h2>Actions</h2>");
  });

  it("shows the answer of the last action above the page", async () => {
    const flashes = new FlashMessages();
    const id = flashes.put({ kind: "refused", message: HOSTILE });
    const { doc, html } = await get(`/runs/${RUN_ID}?flash=${id}`, fakeSource(), {
      ...acting,
      flashes,
    });
    const flash = find(doc, withAttr("data-flash", "refused"));
    expect(flash.attrs.role).toBe("alert");
    expect(textOf(flash)).toBe(`Refused: ${HOSTILE}`);
    expect(html).not.toContain("<script>");
  });
});

describe("the overview's and the dead-letters page's actions", () => {
  it("offers approve / reject for each held reply and resolve for each unknown send", async () => {
    const view = {
      ...overview(),
      heldDrafts: [
        {
          taskId: "task_01J9Z3HELD00000000000000001",
          conversationId: "conv_01J9Z3HELD",
          reason: "model.requires_human_review",
          draft: HOSTILE,
        },
      ],
    };
    const { doc, html } = await get("/", fakeSource({ overview: view }), acting);
    const review = actionForm(doc, "review");
    expect(review.attrs.action).toBe("/replies/task_01J9Z3HELD00000000000000001/review");
    expect(textOf(find(review, (e) => e.tag === "textarea"))).toBe(HOSTILE);
    expect(find(review, withAttr("name", "draft")).attrs.value).toBe(HOSTILE);
    const decisions = findAll(review, (e) => e.tag === "button").map((b) => b.attrs.value);
    expect(decisions).toEqual(["approve", "reject"]);
    expect(html).not.toContain("<script>");
    const send = actionForm(doc, "send-resolve");
    expect(find(send, withAttr("name", "key")).attrs.value).toBe(`${TASK_ID}:reply:2`);
    const resolutions = findAll(send, (e) => e.tag === "button").map((b) => b.attrs.value);
    expect(resolutions).toEqual(["delivered", "resend", "abandon"]);
  });

  it("offers one redrive per group and queue that holds dead letters", async () => {
    const [letter] = deadLetters();
    if (!letter) throw new Error("the fixture has a dead letter");
    const letters = [
      letter,
      { ...letter, messageId: "m2" },
      { ...letter, messageId: "m3", queue: "buffer" as const },
    ];
    const { doc } = await get("/dead-letters", fakeSource({ deadLetters: letters }), acting);
    const redrives = findAll(doc, withAttr("data-action", "redrive"));
    expect(redrives.map((f) => [f.attrs["data-group"], f.attrs["data-queue"]])).toEqual([
      ["order-lookup", "queue"],
      ["order-lookup", "buffer"],
    ]);
    const queue = actionForm(doc, "redrive");
    expect(queue.attrs.action).toBe("/dead-letters/order-lookup/redrive");
    expect(textOf(queue)).toContain("Redrive order-lookup: 2 dead letter(s) back to its queue");
    const none = await get("/dead-letters", fakeSource({ deadLetters: [] }), acting);
    expect(forms(none.doc)).toEqual([]);
  });
});
