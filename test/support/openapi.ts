import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fromJSONSchema } from "zod";

/**
 * Whether an answer of the front door is one its OpenAPI document (functions/front-door/
 * openapi.json) describes: the operation's response for the status, with the content type the
 * answer has and a body that fits its schema, and the headers it declares required. A path no
 * operation has is answered 404, and a method its path does not take 405 with `Allow`, both as the
 * document's `Problem`. HEAD is described by the path's GET (no body).
 */

type Schema = Record<string, unknown>;
interface Response {
  readonly content?: Record<string, { schema?: Schema }>;
  readonly headers?: Record<string, { required?: boolean }>;
}
interface Operation {
  readonly responses: Record<string, Response>;
}
interface Document {
  readonly paths: Record<string, Record<string, Operation>>;
  readonly components: { readonly schemas?: Record<string, Schema> };
}

const path = join(import.meta.dirname, "..", "..", "functions", "front-door", "openapi.json");
const doc = JSON.parse(readFileSync(path, "utf8")) as Document;

/** An answer as a client got it over HTTP. */
export interface Answer {
  readonly method: string;
  /** The URL's path, e.g. `/v1/conversations/conv_1`. */
  readonly path: string;
  readonly status: number;
  readonly headers: Headers;
  /** The body as sent. */
  readonly text: string;
}

/** What the document does not say of `answer` (none when it describes it). */
export function undocumented(answer: Answer): string[] {
  const template = Object.keys(doc.paths).find((t) => matches(t, answer.path));
  const method = answer.method === "HEAD" ? "get" : answer.method.toLowerCase();
  const operation = template === undefined ? undefined : doc.paths[template]?.[method];
  if (operation) return fits(answer, operation.responses[String(answer.status)]);
  const problems = fits(answer, {
    content: { "application/problem+json": { schema: { $ref: "#/components/schemas/Problem" } } },
  });
  if (template === undefined)
    return answer.status === 404 ? problems : [`no route ${answer.path}, yet ${answer.status}`];
  const methods = Object.keys(doc.paths[template] ?? {}).filter((m) => m !== "servers");
  const allowed = methods.map((m) => m.toUpperCase());
  if (allowed.includes("GET")) allowed.push("HEAD");
  const allow = (answer.headers.get("allow") ?? "").split(/,\s*/).sort();
  return [
    ...(answer.status === 405 ? [] : [`${answer.method} ${template}: 405, not ${answer.status}`]),
    ...(allow.join() === allowed.sort().join() ? [] : [`Allow ${allow}, not ${allowed}`]),
    ...problems,
  ];
}

/** Whether the path fits a path template of the document (`{name}`: one segment or more characters). */
function matches(template: string, path: string): boolean {
  const want = template.split("/");
  const got = path.split("/");
  return (
    want.length === got.length &&
    want.every((segment, i) => (segment.startsWith("{") ? got[i] !== "" : segment === got[i]))
  );
}

function fits(answer: Answer, response: Response | undefined): string[] {
  const where = `${answer.method} ${answer.path} ${answer.status}`;
  if (!response) return [`${where}: no such response`];
  const type = (answer.headers.get("content-type") ?? "").split(";")[0]?.trim() ?? "";
  const missing = Object.entries(response.headers ?? {})
    .filter(([name, header]) => header.required && !answer.headers.has(name))
    .map(([name]) => `${where}: no ${name} header`);
  if (answer.method === "HEAD") return [...missing, ...(answer.text ? [`${where}: a body`] : [])];
  const content = response.content?.[type];
  if (!content) return [...missing, `${where}: ${type || "no content type"} is not its content`];
  if (!content.schema || type === "text/event-stream") return missing;
  let body: unknown;
  try {
    body = JSON.parse(answer.text);
  } catch {
    return [...missing, `${where}: the body is not JSON`];
  }
  const parsed = fromJSONSchema(resolved(content.schema) as Schema).safeParse(body);
  return parsed.success
    ? missing
    : [...missing, ...parsed.error.issues.map((i) => `${where}: ${i.path.join(".")} ${i.message}`)];
}

/** The schema with each `$ref` to the document's components replaced by what it names. */
function resolved(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(resolved);
  if (typeof schema !== "object" || schema === null) return schema;
  const ref = (schema as { $ref?: string }).$ref;
  if (ref?.startsWith("#/components/schemas/")) {
    const target = doc.components.schemas?.[ref.slice("#/components/schemas/".length)];
    if (!target) throw new Error(`the OpenAPI document has no ${ref}`);
    return resolved(target);
  }
  return Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, resolved(v)]));
}
