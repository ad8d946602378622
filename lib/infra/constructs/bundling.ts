import { Runtime } from "aws-cdk-lib/aws-lambda";
import { type BundlingOptions, OutputFormat } from "aws-cdk-lib/aws-lambda-nodejs";
import type { BuildOptions } from "esbuild";

/** The Lambda runtime every AgentBus function runs on (the project requires Node.js 22). */
export const FUNCTION_RUNTIME = Runtime.NODEJS_22_X;

/**
 * The ESM bundle has no `require`; esbuild's shim for CommonJS dependencies that call
 * `require("node:...")` needs a real one in module scope.
 */
const ESM_REQUIRE_BANNER =
  'import { createRequire as __agentbusCreateRequire } from "node:module"; const require = __agentbusCreateRequire(import.meta.url);';

/** The bundling settings of an AgentBus function: every field `esbuildOptions` translates. */
export type FunctionBundling = Required<
  Pick<
    BundlingOptions,
    | "format"
    | "target"
    | "mainFields"
    | "minify"
    | "sourceMap"
    | "sourcesContent"
    | "banner"
    | "externalModules"
    | "define"
  >
>;

/** The AWS clients a function can be built with: the lean client, or the SDK v3 clients. */
export type AwsClientChoice = "lean" | "sdk";

/** The CDK context key that chooses them: `cdk deploy -c agentbus:awsClient=sdk`. */
export const AWS_CLIENT_CONTEXT = "agentbus:awsClient";

/** The context's choice, `lean` without one; anything else is refused with what it may be. */
export function parseAwsClient(value: unknown): AwsClientChoice {
  if (value === undefined || value === "lean") return "lean";
  if (value === "sdk") return "sdk";
  throw new Error(
    `-c ${AWS_CLIENT_CONTEXT}=${String(value)} is not a client: use lean (the default) or sdk`,
  );
}

/**
 * How every AgentBus function is bundled, declared once: the construct hands it to
 * `NodejsFunction`, and `npm run bench` and the bundling tests build with `esbuildOptions(...)`
 * of it.
 *
 * Nothing is left to the runtime (`externalModules: []`, where CDK's default leaves
 * `@aws-sdk/*` to the Node.js 22 runtime's copy): the functions call AWS through
 * functions/adapters/aws/lean-client, which bundles the SDK's signer, HTTP handler and retry
 * strategy and none of its clients, so every function runs with the versions of package-lock.json
 * that every test ran against. `npm run bench -- bundles` measures, in the same run, the same
 * handler with the SDK v3 clients of the services it calls inside, and the bundling before that
 * (the whole SDK, the Powertools Tracer with the X-Ray SDK, all of zod). Also left out: the X-Ray
 * SDK (functions/handlers/xray.ts writes the subsegments itself), zod's classic API (the schemas
 * the functions carry are zod/mini, through schemas/zod.ts) and zod's locales but English (every
 * module imports zod as a namespace, `import * as z`, which esbuild can tree-shake).
 */
export const FUNCTION_BUNDLING: FunctionBundling = {
  format: OutputFormat.ESM,
  target: FUNCTION_RUNTIME.name.replace(/^nodejs(\d+)\.x$/, "node$1"),
  mainFields: ["module", "main"],
  minify: true,
  sourceMap: true,
  sourcesContent: false,
  banner: ESM_REQUIRE_BANNER,
  externalModules: [],
  define: { "process.env.AGENTBUS_AWS_CLIENT": JSON.stringify("lean") },
};

/**
 * `FUNCTION_BUNDLING` with the AWS clients chosen: `sdk` builds functions/handlers/aws.ts's
 * `containerAwsClient` on the SDK v3 clients (a way back from the lean client without a code
 * change, at the bundle size `npm run bench -- bundles` shows for them).
 */
export function functionBundling(awsClient: AwsClientChoice): FunctionBundling {
  return {
    ...FUNCTION_BUNDLING,
    define: {
      ...FUNCTION_BUNDLING.define,
      "process.env.AGENTBUS_AWS_CLIENT": JSON.stringify(awsClient),
    },
  };
}

/**
 * The esbuild build `NodejsFunction` runs for `bundling` (aws-cdk-lib's aws-lambda-nodejs
 * `Bundling` passes these as `--bundle --platform=node --target --format --minify --sourcemap
 * --sources-content --external:* --banner:js --main-fields` on esbuild's command line; an ESM
 * bundle is `index.mjs`). test/cdk/bundling.test.ts checks that both give the same file.
 */
export function esbuildOptions(
  entry: string,
  outfile: string,
  bundling: FunctionBundling = FUNCTION_BUNDLING,
): BuildOptions {
  return {
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: "node",
    target: bundling.target,
    format: bundling.format === OutputFormat.ESM ? "esm" : "cjs",
    minify: bundling.minify,
    sourcemap: bundling.sourceMap,
    sourcesContent: bundling.sourcesContent,
    external: [...bundling.externalModules],
    banner: { js: bundling.banner },
    mainFields: [...bundling.mainFields],
    define: { ...bundling.define },
  };
}
