import type { AgentWaitView } from "../views";
import { formatTime } from "./format";
import {
  actionForm,
  agentDecisionPath,
  button,
  type FormContext,
  OPTIONAL_REASON,
  textArea,
} from "./forms";
import { attr, escapeHtml, link, traceHref } from "./html";

/**
 * What an agent run waits for, shown under its line in the overview's lists: the tool call with
 * the input the model gave it, read from the run's journal, and where the console acts the forms
 * that answer it (./actions reads them): approve or reject a call awaiting approval, say whether a
 * write whose outcome could not be learnt was applied, give the answer of a run handed over for
 * good. A call's forms name the wait they show (its `since`). The reason is optional, as in the CLI.
 */

const code = (text: string | undefined) => `<code>${escapeHtml(text ?? "?")}</code>`;

function callLine(wait: AgentWaitView, what: string): string {
  const call = wait.toolCallId ? ` (call ${code(wait.toolCallId)})` : "";
  return `<p><strong>${escapeHtml(what)}</strong> ${code(wait.tool)}${call} · task ${link(traceHref(wait.taskId), wait.taskId)}</p>`;
}

function inputBlock(wait: AgentWaitView): string {
  if (wait.input === undefined) return "";
  const json = JSON.stringify(wait.input, null, 2);
  return `<pre class="json" data-tool-input>${escapeHtml(json)}</pre>\n`;
}

/**
 * The call decided on, and the wait shown by its `since`: a model may give each turn's calls the
 * same ids, and the decision is for the call shown, not one of that id the run waits on later.
 */
const stepField = (wait: AgentWaitView) =>
  `<input type="hidden" name="step"${attr("value", wait.toolCallId)}>
<input type="hidden" name="since"${attr("value", wait.since)}>\n`;

const formAttrs = (wait: AgentWaitView, action: string) =>
  `${attr("data-action", action)}${attr("data-run", wait.runId)}${attr("data-step", wait.toolCallId)}`;

function approvalForm(wait: AgentWaitView, ctx: FormContext): string {
  const buttons = `${button("Approve: the call runs", { name: "decision", value: "approve" })} ${button("Reject: the model is told", { name: "decision", value: "reject" })}`;
  const path = agentDecisionPath(wait.runId);
  return actionForm(
    ctx,
    path,
    formAttrs(wait, "agent-approval"),
    stepField(wait),
    buttons,
    OPTIONAL_REASON,
  );
}

function outcomeForm(wait: AgentWaitView, ctx: FormContext): string {
  const output = textArea(
    "output",
    "Output, if applied (JSON: what the outside system gave, as the tool's output)",
    "",
    5,
  );
  const buttons = `${button("Applied, with this output", { name: "decision", value: "applied" })} ${button("Not applied", { name: "decision", value: "not_applied" })}`;
  const form = actionForm(
    ctx,
    agentDecisionPath(wait.runId),
    formAttrs(wait, "agent-outcome"),
    `${stepField(wait)}${output}`,
    buttons,
    OPTIONAL_REASON,
  );
  return `<details${attr("data-agent-resolve", wait.runId)}><summary>Resolve</summary>\n${form}\n</details>`;
}

function approvalDetails(wait: AgentWaitView, forms?: FormContext): string {
  const deadline = wait.deadline ? ` · decide by ${escapeHtml(formatTime(wait.deadline))}` : "";
  return `${callLine(wait, "Proposed:")}
${inputBlock(wait)}<p class="muted">${escapeHtml(wait.reason)}${deadline}</p>
${forms && wait.toolCallId ? approvalForm(wait, forms) : ""}`;
}

function outcomeDetails(wait: AgentWaitView, forms?: FormContext): string {
  return `${callLine(wait, "Outcome unknown:")}
<p class="muted">key ${code(wait.key)} · ${escapeHtml(wait.reason)}</p>
${inputBlock(wait)}${forms && wait.toolCallId ? outcomeForm(wait, forms) : ""}`;
}

/**
 * The run's own answer, as JSON in the agent's answer schema (the CLI's `resolve <run> --as answer
 * --output JSON`); an example of its shape is shown beside it, not filled in, since the answer
 * ends the run and what it says is reported (the refund agent tells the customer its reason).
 */
function answerForm(wait: AgentWaitView, ctx: FormContext): string {
  const example = wait.answerExample
    ? `<p class="muted">An answer of its shape (from the agent's answer schema: placeholders in &lt;&gt;, a choice's first option):</p>
<pre class="json" data-answer-example>${escapeHtml(JSON.stringify(wait.answerExample, null, 2))}</pre>\n`
    : "";
  const answer = textArea(
    "output",
    "Answer (JSON: the agent's answer, checked as the model's would be)",
    "",
    6,
  );
  const form = actionForm(
    ctx,
    agentDecisionPath(wait.runId),
    formAttrs(wait, "agent-answer"),
    `${example}${answer}`,
    button("Answer: the run ends with it", { name: "decision", value: "answer" }),
    OPTIONAL_REASON,
  );
  return `<details${attr("data-agent-resolve", wait.runId)}><summary>Answer</summary>\n${form}\n</details>`;
}

function answerDetails(wait: AgentWaitView, forms?: FormContext): string {
  return `<p><strong>Handed over:</strong> the run waits for a person's answer · task ${link(traceHref(wait.taskId), wait.taskId)}</p>
<p class="muted">${escapeHtml(wait.reason)}</p>
${forms ? answerForm(wait, forms) : ""}`;
}

/** The details of one waiting agent run. */
export function renderAgentWait(wait: AgentWaitView, forms?: FormContext): string {
  const body =
    wait.kind === "approval"
      ? approvalDetails(wait, forms)
      : wait.kind === "outcome"
        ? outcomeDetails(wait, forms)
        : answerDetails(wait, forms);
  return `<div class="agent-wait"${attr("data-agent-run", wait.runId)}${attr("data-wait", wait.kind)}>\n${body}\n</div>`;
}
