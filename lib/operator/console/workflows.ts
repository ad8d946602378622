import {
  itemsLabel,
  type NodeDefinition,
  type WorkflowDefinition,
} from "../../../functions/core/dag/definition";
import type { InputField, RunInputSpec } from "../../../functions/core/dag/input";
import { startNameOf } from "../../../functions/roles/orchestrator/catalog";
import { edgeViews, nodeKindOf } from "../runs";
import type { RunNodeView, WorkflowSummary, WorkflowView } from "../views";
import { scopeText } from "../workflows";
import { layoutDag, MAX_LINE_CHARS } from "./dag-layout";
import { renderDagSvg } from "./dag-svg";
import { actionForm, button, type FormContext, textArea } from "./forms";
import { attr, escapeHtml, href, link } from "./html";
import { fact, renderTable } from "./page";

/**
 * The workflows pages: every workflow a start may name (given to the stack, registered
 * for every tenant, each tenant's own: an operator's view, or one tenant's with `?tenant=`), and
 * one workflow's version: its graph before any run, its versions, its declared input, and a form
 * made from that input that starts a run (./actions `start`). A refused start comes back to the
 * form filled in as it was sent, the refusal beside it.
 */

export const workflowHref = (name: string, query: Record<string, string> = {}): string =>
  href(`/workflows/${encodeURIComponent(name)}`, query);
export const startPath = (name: string): string => `/workflows/${encodeURIComponent(name)}/start`;

/** The form's field of a declared property, and of its type (what the value is read as). */
export const INPUT_FIELD_PREFIX = "input.";
export const TYPE_FIELD_PREFIX = "type.";

const SCOPE_CELLS: Readonly<Record<WorkflowSummary["scope"], string>> = {
  stack: "given to the stack",
  tenant: "a tenant's own",
  shared: "every tenant",
};

/** The address of a listed workflow's page: a tenant's own is found by that tenant's starts. */
const listedHref = (w: WorkflowSummary) =>
  workflowHref(startNameOf(w), w.tenant === undefined ? {} : { tenant: w.tenant });

/**
 * The list of workflows, each linked to its page, with its scope and tenant: every tenant's own,
 * or `tenant`'s only when the list was read for it.
 */
export function renderWorkflowList(list: readonly WorkflowSummary[], tenant?: string): string {
  const rows = list.map((w) => [
    link(listedHref(w), startNameOf(w)),
    escapeHtml(SCOPE_CELLS[w.scope]),
    escapeHtml(w.tenant ?? "—"),
    escapeHtml(w.versions.at(-1) ?? "—"),
    escapeHtml(w.versions.join(", ")),
  ]);
  const attrs = (i: number) =>
    `${attr("data-workflow", list[i] && startNameOf(list[i]))}${attr("data-scope", list[i]?.scope)}${attr("data-tenant", list[i]?.tenant)}`;
  const note =
    tenant === undefined
      ? "<p class=\"muted\">Every tenant's own workflows are listed; a tenant's id in the box above lists what its starts find.</p>"
      : "";
  return `<h1>Workflows</h1>
${note}
${renderTable(["workflow", "scope", "tenant", "newest", "versions"], rows, "No workflow is known.", attrs)}`;
}

/** The lines a node of a definition shows: id, what carries it out, its kind, its details. */
function definitionLines(node: RunNodeView, definition: WorkflowDefinition): readonly string[] {
  const def = definition.nodes.find((n) => n.id === node.id);
  const cut = (s: string) => (s.length > MAX_LINE_CHARS ? `${s.slice(0, MAX_LINE_CHARS - 1)}…` : s);
  return [cut(node.id), cut(node.role), (node.kind ?? "task").toUpperCase(), cut(detailOf(def))];
}

function detailOf(node: NodeDefinition | undefined): string {
  if (!node) return "";
  if (node.map) {
    const { items, concurrency } = node.map;
    return `over ${itemsLabel(items)}, ${concurrency} at once`;
  }
  if (node.workflow) return node.workflow.version ? `v${node.workflow.version}` : "newest version";
  if (node.join !== "all") return `join ${node.join}${node.quorum ? ` ${node.quorum}` : ""}`;
  return node.degrade === "empty" ? "degrades to {}" : "";
}

/** The definition's graph, laid out as a run's DAG is, before any run. */
export function renderDefinitionGraph(definition: WorkflowDefinition): string {
  const nodes: RunNodeView[] = definition.nodes.map((n) => {
    const { kind, role } = nodeKindOf(n);
    return { id: n.id, role, kind, state: "PENDING", attempt: 0 };
  });
  const lines = (node: RunNodeView) => definitionLines(node, definition);
  const dag = layoutDag(nodes, edgeViews(definition.edges), () => "", lines);
  return `<div class="dag" data-graph="${escapeHtml(definition.name)}">${renderDagSvg(dag, () => "", lines, `The graph of ${definition.name} v${definition.version}`)}</div>
<p class="muted">A map runs its role once per item (a stack of cards); a wait has a dotted border; a child run a double one; a loop's way back is dashed.</p>`;
}

/** The declared input as a table: each property, its type and bounds, required or not. */
export function renderInputSpec(spec: RunInputSpec | undefined): string {
  if (!spec)
    return '<p class="none" data-input-spec="any">This workflow declares no input: a start may give any JSON object.</p>';
  const rows = Object.entries(spec.properties).map(([name, field]) => [
    `<code>${escapeHtml(name)}</code>`,
    escapeHtml(field.type),
    spec.required.includes(name) ? "required" : "optional",
    escapeHtml(boundsOf(field)),
    escapeHtml(field.description ?? ""),
  ]);
  const extra =
    spec.additionalProperties === false
      ? "No other property is taken."
      : "Other properties are taken and travel along.";
  return `<div data-input-spec="declared">${renderTable(["property", "type", "", "values", "description"], rows, "No properties.")}
<p class="muted">${escapeHtml(extra)}</p></div>`;
}

function boundsOf(field: InputField): string {
  const parts: string[] = [];
  if (field.enum) parts.push(`one of ${field.enum.map((v) => JSON.stringify(v)).join(", ")}`);
  const characters = (n: number) => `${n} character${n === 1 ? "" : "s"}`;
  if (field.minLength !== undefined) parts.push(`at least ${characters(field.minLength)}`);
  if (field.maxLength !== undefined) parts.push(`at most ${characters(field.maxLength)}`);
  if (field.minimum !== undefined) parts.push(`≥ ${field.minimum}`);
  if (field.maximum !== undefined) parts.push(`≤ ${field.maximum}`);
  return parts.join(", ");
}

/**
 * What a refused start sent, to fill its form in again (field name -> value, as posted), and why
 * it was refused.
 */
export interface RefusedStart {
  readonly typed: Readonly<Record<string, string>>;
  readonly message: string;
}

/** One property's control: a choice for an enum or a boolean, a number box, a text box. */
function inputControl(
  name: string,
  field: InputField,
  required: boolean,
  typed: RefusedStart["typed"] | undefined,
): string {
  const control = `${attr("name", `${INPUT_FIELD_PREFIX}${name}`)}${required ? " required" : ""}`;
  const typedType = `<input type="hidden"${attr("name", `${TYPE_FIELD_PREFIX}${name}`)}${attr("value", field.type)}>`;
  const label = `${escapeHtml(field.title ?? name)}${required ? "" : " (optional)"}`;
  const help = field.description ? `<small>${escapeHtml(field.description)}</small>` : "";
  const sent = typed?.[`${INPUT_FIELD_PREFIX}${name}`];
  const value = sent ?? (field.default === undefined ? undefined : String(field.default));
  let input: string;
  if (field.enum || field.type === "boolean") {
    const values = field.enum ?? [true, false];
    const empty = required ? "" : '<option value="">(none)</option>';
    const options = values.map(
      (v) =>
        `<option${attr("value", String(v))}${value === String(v) ? " selected" : ""}>${escapeHtml(String(v))}</option>`,
    );
    input = `<select${control}>${empty}${options.join("")}</select>`;
  } else if (field.type === "string") {
    const bounds = `${attr("minlength", field.minLength)}${attr("maxlength", field.maxLength)}`;
    input = `<input type="text"${control}${bounds}${attr("value", value)}>`;
  } else {
    const step = field.type === "integer" ? ' step="1"' : ' step="any"';
    const bounds = `${attr("min", field.minimum)}${attr("max", field.maximum)}`;
    input = `<input type="number"${control}${step}${bounds}${attr("value", value)}>`;
  }
  return `<label${attr("data-input", name)}>${label} ${input}${help}</label>${typedType}\n`;
}

/**
 * The start form: one control per declared property, a JSON object for what else the run takes
 * (the whole input when none is declared), and the run's tenant; after a refusal, filled in as
 * it was sent, the refusal beside it.
 */
export function renderStartForm(
  view: WorkflowView,
  ctx: FormContext,
  tenant?: string,
  refused?: RefusedStart,
): string {
  const spec = view.definition.input;
  const typed = refused?.typed;
  const fields = spec
    ? Object.entries(spec.properties).map(([name, field]) =>
        inputControl(name, field, spec.required.includes(name), typed),
      )
    : [];
  const more =
    spec?.additionalProperties === false
      ? ""
      : textArea(
          "input_json",
          spec ? "More input (a JSON object, optional)" : "Input (a JSON object)",
          typed?.input_json ?? "{}",
          4,
        );
  const scoped = typed?.tenant ?? (view.scope === "tenant" ? view.tenant : tenant);
  const tenantField = `<label>Tenant (optional: the default tenant) <input type="text" name="tenant" maxlength="64"${attr("value", scoped)}></label>\n`;
  const error = refused
    ? `<p class="flash flash-refused" role="alert" data-start-refused>${escapeHtml(refused.message)}</p>\n`
    : "";
  const newest = view.versions.at(-1);
  const pinned =
    newest !== undefined && newest !== view.version
      ? `<p class="muted" data-start-version>A start runs the newest version, v${escapeHtml(newest)}.</p>\n`
      : "";
  return actionForm(
    ctx,
    startPath(startNameOf(view)),
    attr("data-action", "start"),
    `${error}${pinned}${fields.join("")}${more}${tenantField}`,
    button(`Start a run of ${startNameOf(view)}`),
    "",
  );
}

/**
 * A workflow's page: facts, versions, graph, declared input and (with `forms`) the start form,
 * filled in again after a refused start.
 */
export function renderWorkflow(
  view: WorkflowView,
  forms?: FormContext,
  tenant?: string,
  refused?: RefusedStart,
): string {
  const query: Record<string, string> = tenant === undefined ? {} : { tenant };
  const versions = view.versions
    .map((v) =>
      v === view.version
        ? `<strong>v${escapeHtml(v)}</strong>`
        : link(workflowHref(startNameOf(view), { ...query, version: String(v) }), `v${v}`),
    )
    .join(" ");
  const start = forms
    ? `\n<h2>Start a run</h2>\n${renderStartForm(view, forms, tenant, refused)}`
    : "";
  return `<h1>Workflow <code>${escapeHtml(startNameOf(view))}</code> v${escapeHtml(view.version)}</h1>
<ul class="facts">
${fact("definition", `<code>${escapeHtml(view.definition.name)}</code>`)}
${fact("scope", `<span data-workflow-scope>${escapeHtml(scopeText(view))}</span>`)}
${fact("versions", `<span data-versions>${versions}</span>`)}
</ul>
<h2>Graph</h2>
${renderDefinitionGraph(view.definition)}
<h2>Input</h2>
${renderInputSpec(view.definition.input)}${start}
<h2>Definition</h2>
<details><summary>JSON</summary><pre class="json" data-definition>${escapeHtml(JSON.stringify(view.definition, null, 2))}</pre></details>`;
}
