import { mkdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { build } from "esbuild";
import { synthesize } from "../../lib/dev/local/synth";
import { esbuildOptions, FUNCTION_BUNDLING } from "../../lib/infra/constructs/bundling";
import { METADATA, REPO_ROOT } from "../../lib/infra/constructs/function";
import { PROJECT_STACK } from "../../lib/infra/project";

/**
 * The bundles of every function of the stack, built as the CDK construct builds them (the same
 * `FUNCTION_BUNDLING` through the same `esbuildOptions`), and next to them the alternatives the
 * construct's comment weighs, built from the same handler in the same run.
 */

/** One handler entry and the functions of the stack built from it. */
export interface EntryFunctions {
  readonly entry: string;
  readonly name: string;
  readonly functions: readonly string[];
  /** The first function's environment: literal values kept, the rest dummies. */
  readonly environment: Readonly<Record<string, string>>;
}

/**
 * - `agentbus`: what `cdk deploy` uploads (AWS called through the SDK v3 clients of the
 *   operations its code sends).
 * - `baseline`: the bundling before the SDK was trimmed and the X-Ray SDK dropped: an SDK client
 *   made at init for each service its code calls, the Powertools Tracer with aws-xray-sdk-core,
 *   and zod's whole namespace (every locale), as `import { z } from "zod"` kept it.
 */
export const VARIANTS = ["agentbus", "baseline"] as const;
export type Variant = (typeof VARIANTS)[number];

export const VARIANT_LABELS: Readonly<Record<Variant, string>> = {
  agentbus: "AgentBus",
  baseline: "baseline",
};

/** The SDK client of each service, by the adapter directory whose code calls it. */
const SDK_CLIENTS: readonly { adapter: string; module: string; client: string }[] = [
  { adapter: "adapters/dynamodb/", module: "@aws-sdk/client-dynamodb", client: "DynamoDBClient" },
  { adapter: "adapters/sqs/", module: "@aws-sdk/client-sqs", client: "SQSClient" },
  {
    adapter: "adapters/eventbridge/",
    module: "@aws-sdk/client-eventbridge",
    client: "EventBridgeClient",
  },
  {
    adapter: "adapters/bedrock/",
    module: "@aws-sdk/client-bedrock-runtime",
    client: "BedrockRuntimeClient",
  },
  { adapter: "adapters/channel/sns-channel", module: "@aws-sdk/client-sns", client: "SNSClient" },
  { adapter: "adapters/aws/kms-key-wrapping", module: "@aws-sdk/client-kms", client: "KMSClient" },
];

/** Under node_modules/.cache: out of the source tree, beside the packages the bundles were built from. */
export const BUNDLE_DIR = join(REPO_ROOT, "node_modules", ".cache", "agentbus-bench", "bundles");

/** Every handler entry of the synthesized stack, with the functions built from it. */
export function stackEntries(): EntryFunctions[] {
  const { template } = synthesize("bench", PROJECT_STACK);
  const byEntry = new Map<string, EntryFunctions>();
  for (const [id, resource] of Object.entries(template.Resources)) {
    const entry = resource.Metadata?.[METADATA.entry];
    if (resource.Type !== "AWS::Lambda::Function" || typeof entry !== "string") continue;
    const known = byEntry.get(entry);
    if (known) {
      byEntry.set(entry, { ...known, functions: [...known.functions, id] });
      continue;
    }
    const variables = (resource.Properties?.Environment as { Variables?: object } | undefined)
      ?.Variables;
    byEntry.set(entry, {
      entry,
      name: entryName(entry),
      functions: [id],
      environment: dummyEnvironment((variables ?? {}) as Record<string, unknown>),
    });
  }
  return [...byEntry.values()].sort((a, b) => a.name.localeCompare(b.name));
}

/**
 * What a bundle is called: its file's name, or, for a role module's `handler.ts`, its folder's
 * (the role or the family: `audit`, `content-agents`, `sender`).
 */
function entryName(entry: string): string {
  const name = basename(entry).replace(/\.[mc]?[jt]s$/, "");
  return name === "handler" ? basename(dirname(entry)) : name;
}

/** Literal values as they are; a CloudFormation reference becomes a value of the right shape. */
function dummyEnvironment(variables: Record<string, unknown>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(variables).map(([name, value]) => [
      name,
      typeof value === "string"
        ? value
        : name.endsWith("_URLS")
          ? "{}"
          : name.endsWith("_URL")
            ? "https://sqs.us-east-1.amazonaws.com/123456789012/bench"
            : "bench",
    ]),
  );
}

/** Builds one variant of an entry; returns the bundle's path and size in bytes. */
export async function buildVariant(
  entry: EntryFunctions,
  variant: Variant,
): Promise<{ path: string; bytes: number }> {
  const dir = join(BUNDLE_DIR, variant, entry.name);
  rmSync(dir, { recursive: true, force: true });
  const outfile = join(dir, "index.mjs");
  const options = esbuildOptions(join(REPO_ROOT, entry.entry), outfile, FUNCTION_BUNDLING);
  if (variant === "baseline") {
    const clients = await sdkClientsOf(entry);
    delete options.entryPoints;
    options.stdin = {
      contents: [
        `export * from ${JSON.stringify(`./${entry.entry}`)};`,
        ...clients.map(
          ({ module, client }) =>
            `import { ${client} } from ${JSON.stringify(module)}; export const __sdk${client} = new ${client}({});`,
        ),
        'export { Tracer as __baselineTracer } from "@aws-lambda-powertools/tracer";',
        'export { z as __baselineZod } from "zod";',
      ].join("\n"),
      resolveDir: REPO_ROOT,
      sourcefile: `${variant}-${entry.name}.ts`,
      loader: "ts",
    };
  }
  await build({ ...options, logLevel: "error" });
  return { path: outfile, bytes: statSync(outfile).size };
}

/** The SDK clients of the services an entry's code calls (by the adapter code in its bundle). */
async function sdkClientsOf(entry: EntryFunctions) {
  const { metafile } = await build({
    ...esbuildOptions(join(REPO_ROOT, entry.entry), join(BUNDLE_DIR, "probe.mjs")),
    write: false,
    metafile: true,
    logLevel: "error",
  });
  const used = Object.values(metafile.outputs).flatMap((output) =>
    Object.entries(output.inputs)
      .filter(([, input]) => input.bytesInOutput > 0)
      .map(([path]) => path),
  );
  return SDK_CLIENTS.filter(({ adapter }) => used.some((path) => path.includes(adapter)));
}

/** An empty ES module: what importing any module costs here, the floor under every figure. */
export function emptyModule(): string {
  mkdirSync(BUNDLE_DIR, { recursive: true });
  const path = join(BUNDLE_DIR, "empty.mjs");
  writeFileSync(path, "export {};\n");
  return path;
}
