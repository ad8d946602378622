import { outputExample } from "../output-example";
import type { HeldReplyView, RunNodeView, RunView } from "../views";
import { attr, escapeHtml } from "./html";

/**
 * The console's action forms: plain HTML forms that POST (no JavaScript), each with the console's
 * form token and a required reason. The paths they post to are read by ./actions.
 */

/** What a page needs to draw forms: the console's form token. */
export interface FormContext {
  readonly token: string;
}

export const runActionPath = (runId: string, verb: string): string =>
  `/runs/${encodeURIComponent(runId)}/${verb}`;
export const replyActionPath = (taskId: string): string =>
  `/replies/${encodeURIComponent(taskId)}/review`;
export const SEND_RESOLVE_PATH = "/sends/resolve";
export const redrivePath = (group: string): string =>
  `/dead-letters/${encodeURIComponent(group)}/redrive`;
export const agentDecisionPath = (runId: string): string =>
  `/agent-runs/${encodeURIComponent(runId)}/decide`;
export const tenantStopPath = (tenant: string, verb: "stop" | "resume"): string =>
  `/tenants/${encodeURIComponent(tenant)}/${verb}`;

const REASON = `<label class="reason">Reason <input type="text" name="reason" required maxlength="1000" placeholder="why (kept in the audit trail)"></label>`;
/** The reason field of a form whose reason may be left out (as the CLI's `--reason`). */
export const OPTIONAL_REASON = `<label class="reason">Reason (optional) <input type="text" name="reason" maxlength="1000" placeholder="why (kept on the command)"></label>`;

export function button(label: string, value?: { name: string; value: string }): string {
  const named = value ? `${attr("name", value.name)}${attr("value", value.value)}` : "";
  return `<button type="submit"${named}>${escapeHtml(label)}</button>`;
}

/** A form posting to `path` with the console's token, `fields`, a reason and `buttons`. */
export function actionForm(
  ctx: FormContext,
  path: string,
  attrs: string,
  fields: string,
  buttons: string,
  reason = REASON,
): string {
  return `<form method="post"${attr("action", path)} class="action"${attrs}>
<input type="hidden" name="csrf"${attr("value", ctx.token)}>
${fields}${reason}
<div class="buttons">${buttons}</div>
</form>`;
}

export function textArea(name: string, label: string, value: string, rows: number): string {
  return `<label class="area">${escapeHtml(label)}<textarea${attr("name", name)} rows="${rows}" spellcheck="false">${escapeHtml(value)}</textarea></label>\n`;
}

function failedNodeForms(runId: string, node: RunNodeView, ctx: FormContext): string {
  const nodeField = `<input type="hidden" name="node"${attr("value", node.id)}>\n`;
  const example = JSON.stringify(outputExample(node.role) ?? {}, null, 2);
  const data = (verb: string) => `${attr("data-action", verb)}${attr("data-node", node.id)}`;
  return `<h3>Node <code>${escapeHtml(node.id)}</code> (${escapeHtml(node.role)}) FAILED</h3>
<div class="forms">
${actionForm(ctx, runActionPath(runId, "reset"), data("reset"), nodeField, button("Reset: run it and the nodes below it again"))}
${actionForm(ctx, runActionPath(runId, "resolve"), data("resolve"), `${nodeField}${textArea("output", "Output (JSON, checked against the role's output schema)", example, 8)}`, button("Resolve with this output"))}
</div>`;
}

/** Confirm or refuse what the agent of a BLOCKED node waits for (the reason goes to the agent). */
function blockedNodeForm(runId: string, node: RunNodeView, ctx: FormContext): string {
  const nodeField = `<input type="hidden" name="node"${attr("value", node.id)}>\n`;
  // The answer is to the wait shown, not to one the node may wait for by the time it is sent.
  const since = node.agent?.since;
  const sinceField =
    since === undefined ? "" : `<input type="hidden" name="since"${attr("value", since)}>\n`;
  const question = `<p class="muted">${escapeHtml(node.agent?.question ?? "")}</p>\n`;
  const data = `${attr("data-action", "confirm")}${attr("data-node", node.id)}`;
  const buttons = `${button("Confirm: the agent resumes", { name: "answer", value: "confirmed" })} ${button("Refuse: the node fails", { name: "answer", value: "refused" })}`;
  return `<h3>Node <code>${escapeHtml(node.id)}</code> (${escapeHtml(node.role)}) BLOCKED</h3>
${actionForm(ctx, runActionPath(runId, "confirm"), data, `${nodeField}${sinceField}${question}`, buttons)}`;
}

function rerunForm(run: RunView, ctx: FormContext): string {
  const options = run.nodes
    .map((n) => `<option${attr("value", n.id)}>${escapeHtml(`${n.id} (${n.state})`)}</option>`)
    .join("");
  const select = `<label>From node <select name="node" required>${options}</select></label>\n`;
  return `<h3>Re-run</h3>
${actionForm(ctx, runActionPath(run.runId, "rerun"), attr("data-action", "rerun"), select, button("Re-run from this node"))}`;
}

/**
 * The run page's actions: cancel a running run, reset or resolve a FAILED node, confirm or refuse
 * a BLOCKED one, re-run an ended one.
 */
export function renderRunForms(run: RunView, ctx: FormContext): string {
  const parts: string[] = [];
  if (run.status === "RUNNING")
    parts.push(
      actionForm(
        ctx,
        runActionPath(run.runId, "cancel"),
        attr("data-action", "cancel"),
        "",
        button("Cancel the run"),
      ),
    );
  for (const node of run.nodes)
    if (node.state === "FAILED") parts.push(failedNodeForms(run.runId, node, ctx));
    else if (node.agent?.state === "BLOCKED") parts.push(blockedNodeForm(run.runId, node, ctx));
  if (run.status !== "RUNNING" && run.nodes.length > 0) parts.push(rerunForm(run, ctx));
  return parts.length > 0
    ? parts.join("\n")
    : '<p class="none">No action applies to this run now.</p>';
}

/** A held reply's draft with approve (the text as edited) and reject. */
export function renderHeldReplyForm(held: HeldReplyView, ctx: FormContext): string {
  const draft = held.draft ?? "";
  const fields = `<p class="muted">${escapeHtml(held.reason ?? "held for review")}</p>
<input type="hidden" name="draft"${attr("value", draft)}>
${textArea("text", "Reply (approve sends it as edited here)", draft, 4)}`;
  const buttons = `${button("Approve and send", { name: "decision", value: "approve" })} ${button("Reject", { name: "decision", value: "reject" })}`;
  return `<details${attr("data-held-task", held.taskId)}><summary><code>${escapeHtml(held.taskId)}</code></summary>
${actionForm(ctx, replyActionPath(held.taskId), attr("data-action", "review"), fields, buttons)}
</details>`;
}

/** Resolve an unknown send outcome: delivered, resend under the same key, or abandon. */
export function renderSendResolveForm(key: string, ctx: FormContext): string {
  const fields = `<input type="hidden" name="key"${attr("value", key)}>\n`;
  const buttons = (["delivered", "resend", "abandon"] as const)
    .map((as) => button(`As ${as}`, { name: "as", value: as }))
    .join(" ");
  return `<details${attr("data-send-key", key)}><summary>Resolve</summary>
${actionForm(ctx, SEND_RESOLVE_PATH, attr("data-action", "send-resolve"), fields, buttons)}
</details>`;
}

/** Redrive every dead letter of a group's queue (or its dispatcher's buffer). */
export function renderRedriveForm(
  group: string,
  queue: "queue" | "buffer",
  count: number,
  ctx: FormContext,
): string {
  const fields = `<input type="hidden" name="queue"${attr("value", queue)}>\n`;
  const where = queue === "buffer" ? "the buffer queue" : "its queue";
  const label = `Redrive ${group}: ${count} dead letter(s) back to ${where}`;
  const attrs = `${attr("data-action", "redrive")}${attr("data-group", group)}${attr("data-queue", queue)}`;
  return actionForm(ctx, redrivePath(group), attrs, fields, button(label));
}

/**
 * The kill switch of a tenant (lib/operator/stops.ts): stop it (no model or tool call starts for
 * it, its workflow runs in flight are cancelled, the front door refuses its new work), or resume
 * it. Shown on the overview filtered to that tenant.
 */
export function renderTenantStopForms(tenant: string, ctx: FormContext): string {
  const data = (verb: string) => `${attr("data-action", verb)}${attr("data-tenant", tenant)}`;
  return `<div class="forms tenant-stop" data-tenant-stop>
${actionForm(ctx, tenantStopPath(tenant, "stop"), data("stop-tenant"), "", button(`Stop tenant ${tenant}`))}
${actionForm(ctx, tenantStopPath(tenant, "resume"), data("resume-tenant"), "", button(`Resume tenant ${tenant}`), OPTIONAL_REASON)}
</div>`;
}
