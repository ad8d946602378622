/**
 * A CloudFormation template as the CDK synthesizes it, and the intrinsic functions the local
 * deployer needs to resolve (Ref, Fn::GetAtt, Fn::Join, Fn::Sub, Fn::Select, Fn::Split and the
 * pseudo parameters). The emulators cannot run CloudFormation faithfully (moto's support misses
 * TTL, Ref to custom buses, FIFO names, and would try to run Lambda), so the local runtime
 * deploys the same template resource by resource through the service APIs instead.
 */
export interface TemplateResource {
  readonly Type: string;
  readonly Properties?: Record<string, unknown>;
  readonly Metadata?: Record<string, unknown>;
  readonly DependsOn?: string | string[];
  readonly Condition?: string;
}

export interface Template {
  readonly Resources: Record<string, TemplateResource>;
  readonly Outputs?: Record<string, { Value: unknown; Description?: string }>;
}

export interface Physical {
  /** What `Ref` returns. */
  readonly ref: string;
  /** What `Fn::GetAtt` returns, by attribute name. */
  readonly attributes: Record<string, string>;
}

export interface ResolveContext {
  readonly region: string;
  readonly accountId: string;
  readonly stackName: string;
  readonly physical: ReadonlyMap<string, Physical>;
}

/** Logical ids a value refers to (Ref, GetAtt, ${X} in Sub). */
export function references(value: unknown, out = new Set<string>()): Set<string> {
  if (Array.isArray(value)) {
    for (const v of value) references(v, out);
  } else if (value && typeof value === "object") {
    const obj = value as Record<string, unknown>;
    if (typeof obj.Ref === "string" && !obj.Ref.startsWith("AWS::")) out.add(obj.Ref);
    const getAtt = obj["Fn::GetAtt"];
    if (Array.isArray(getAtt) && typeof getAtt[0] === "string") out.add(getAtt[0]);
    if (typeof getAtt === "string") out.add(getAtt.split(".")[0] ?? getAtt);
    const sub = obj["Fn::Sub"];
    const subText =
      typeof sub === "string"
        ? sub
        : Array.isArray(sub) && typeof sub[0] === "string"
          ? sub[0]
          : undefined;
    if (subText) {
      for (const m of subText.matchAll(/\$\{([^}!]+)\}/g)) {
        const name = (m[1] ?? "").split(".")[0] ?? "";
        if (!name.startsWith("AWS::")) out.add(name);
      }
    }
    for (const v of Object.values(obj)) references(v, out);
  }
  return out;
}

/** Resources in an order where every resource comes after the ones it refers to. */
export function deploymentOrder(template: Template, include: (type: string) => boolean): string[] {
  const ids = Object.keys(template.Resources).filter((id) =>
    include(template.Resources[id]?.Type ?? ""),
  );
  const wanted = new Set(ids);
  const order: string[] = [];
  const state = new Map<string, "visiting" | "done">();
  const visit = (id: string, path: string[]) => {
    if (state.get(id) === "done") return;
    if (state.get(id) === "visiting")
      throw new Error(`reference cycle: ${[...path, id].join(" -> ")}`);
    state.set(id, "visiting");
    const resource = template.Resources[id];
    const deps = references(resource?.Properties ?? {});
    for (const d of [resource?.DependsOn ?? []].flat()) deps.add(d);
    for (const dep of deps) if (wanted.has(dep)) visit(dep, [...path, id]);
    state.set(id, "done");
    order.push(id);
  };
  for (const id of ids.sort()) visit(id, []);
  return order;
}

export class UnresolvedReference extends Error {}

/** Resolve intrinsic functions in a value, given the resources deployed so far. */
export function resolve(value: unknown, ctx: ResolveContext): unknown {
  if (Array.isArray(value)) return value.map((v) => resolve(v, ctx));
  if (!value || typeof value !== "object") return value;
  const obj = value as Record<string, unknown>;
  const keys = Object.keys(obj);
  if (keys.length === 1) {
    const [key] = keys as [string];
    const arg = obj[key];
    switch (key) {
      case "Ref":
        return refOf(String(arg), ctx);
      case "Fn::GetAtt": {
        const [id, attr] = Array.isArray(arg) ? (arg as string[]) : String(arg).split(/\.(.*)/);
        return getAtt(String(id), String(attr), ctx);
      }
      case "Fn::Join": {
        const [sep, parts] = arg as [string, unknown[]];
        return (resolve(parts, ctx) as unknown[]).map(String).join(sep);
      }
      case "Fn::Select": {
        const [index, list] = arg as [unknown, unknown];
        const items = resolve(list, ctx) as unknown[];
        return items[Number(resolve(index, ctx))];
      }
      case "Fn::Split": {
        const [sep, text] = arg as [string, unknown];
        return String(resolve(text, ctx)).split(sep);
      }
      case "Fn::Sub": {
        const [text, vars] = Array.isArray(arg)
          ? (arg as [string, Record<string, unknown>])
          : [String(arg), {}];
        return text.replace(/\$\{([^}!]+)\}/g, (_m, name: string) => {
          if (name in vars) return String(resolve(vars[name], ctx));
          const [id, attr] = name.split(/\.(.*)/);
          return String(attr ? getAtt(id ?? "", attr, ctx) : refOf(name, ctx));
        });
      }
      default:
        if (key.startsWith("Fn::"))
          throw new UnresolvedReference(`intrinsic ${key} is not supported by the local deployer`);
    }
  }
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) out[k] = resolve(v, ctx);
  return out;
}

function refOf(name: string, ctx: ResolveContext): string {
  switch (name) {
    case "AWS::Region":
      return ctx.region;
    case "AWS::AccountId":
      return ctx.accountId;
    case "AWS::Partition":
      return "aws";
    case "AWS::URLSuffix":
      return "amazonaws.com";
    case "AWS::StackName":
      return ctx.stackName;
    case "AWS::NoValue":
      return "";
  }
  const physical = ctx.physical.get(name);
  if (!physical) throw new UnresolvedReference(`Ref ${name}: not deployed locally`);
  return physical.ref;
}

function getAtt(id: string, attr: string, ctx: ResolveContext): string {
  const physical = ctx.physical.get(id);
  const value = physical?.attributes[attr];
  if (value === undefined)
    throw new UnresolvedReference(`Fn::GetAtt ${id}.${attr}: not available locally`);
  return value;
}
