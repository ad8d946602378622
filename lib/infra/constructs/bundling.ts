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

/**
 * The build-time constant that says whether a bundle carries the OpenTelemetry SDK and its OTLP
 * exporter (functions/handlers/telemetry.ts): "false" by default, so esbuild leaves them out (a
 * Lambda layer's provider exports the spans, or nothing does); "true" for a stack that exports
 * with its own SDK (`agentbus:otlpEndpoint` without a layer: ./telemetry.ts).
 */
export const OTLP_SDK_DEFINE = "process.env.AGENTBUS_OTLP_SDK";

/**
 * How every AgentBus function is bundled, declared once: the construct hands it to
 * `NodejsFunction`, and `npm run bench` and the bundling tests build with `esbuildOptions(...)`
 * of it.
 *
 * Nothing is left to the runtime (`externalModules: []`, where CDK's default leaves
 * `@aws-sdk/*` to the Node.js 22 runtime's copy): the functions call AWS through the AWS SDK v3
 * clients (functions/adapters/aws/sdk-client), bundled with the versions of package-lock.json
 * that every test ran against, each bundle with the clients of the operations its code sends
 * (functions/adapters/aws/operations marks them pure). `npm run bench -- bundles` measures them
 * next to the bundling before the SDK was trimmed (the whole SDK, the Powertools Tracer with the
 * X-Ray SDK, all of zod). Also left out: the X-Ray SDK (functions/handlers/xray.ts writes the
 * subsegments itself), zod's classic API (the schemas the functions carry are zod/mini, through
 * schemas/zod.ts) and zod's locales but English (every module imports zod as a namespace,
 * `import * as z`, which esbuild can tree-shake).
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
  define: { [OTLP_SDK_DEFINE]: JSON.stringify("false") },
};

/** FUNCTION_BUNDLING for a function that exports its spans with its own OTLP SDK. */
export const FUNCTION_BUNDLING_WITH_OTLP_SDK: FunctionBundling = {
  ...FUNCTION_BUNDLING,
  define: { [OTLP_SDK_DEFINE]: JSON.stringify("true") },
};

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
