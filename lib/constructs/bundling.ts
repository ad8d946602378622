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

/**
 * The credential providers that the SDK's default chain (`@aws-sdk/credential-provider-node`)
 * loads with a dynamic `import()`, and only when the environment holds no credentials: profiles
 * and SSO, `credential_process`, web identity token files, container and instance metadata. With
 * what they pull in (the STS and SSO clients of `@aws-sdk/nested-clients`, token providers) they
 * are ~105 KB of every bundle that never runs on Lambda, where the execution role's credentials
 * are always in the environment and the chain stops at `fromEnv`. Left external, a function that
 * did need one would load it from the runtime's own SDK. test/cdk/bundling.test.ts checks that no
 * bundle imports any of them other than dynamically.
 */
export const LAZY_CREDENTIAL_PROVIDERS = [
  "@aws-sdk/credential-provider-http",
  "@aws-sdk/credential-provider-ini",
  "@aws-sdk/credential-provider-process",
  "@aws-sdk/credential-provider-sso",
  "@aws-sdk/credential-provider-web-identity",
  "@smithy/credential-provider-imds",
] as const;

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
  >
>;

/**
 * How every AgentBus function is bundled, declared once: the construct hands it to
 * `NodejsFunction`, and `npm run bench` and the bundling tests build with `esbuildOptions(...)`
 * of it.
 *
 * The AWS SDK v3 is bundled, not taken from the Node.js 22 runtime (CDK's default,
 * `externalModules: ["@aws-sdk/*", "@smithy/*"]`), for two reasons, both measured by
 * `npm run bench -- bundles` in the same run:
 * - version pinning: the handlers run with the SDK versions of package-lock.json, the ones every
 *   test ran against, not whatever version the runtime ships that month;
 * - init time: loading the runtime's SDK means resolving and compiling about a hundred unminified
 *   CommonJS files from node_modules. Measured, a bundle that leaves the SDK to the runtime is
 *   150-230 KB instead of 340-560 KB, but takes 1.6-2.2 times as long to import: the size of one
 *   minified file costs less than the loading of many.
 * What is trimmed: the lazily loaded credential providers (`LAZY_CREDENTIAL_PROVIDERS`), the X-Ray
 * SDK (functions/handlers/observe.ts traces SDK calls with a small middleware instead), and
 * zod's locales (every module imports zod as a namespace, `import * as z`, which esbuild can
 * tree-shake; `import { z }` keeps all of zod).
 */
export const FUNCTION_BUNDLING: FunctionBundling = {
  format: OutputFormat.ESM,
  target: FUNCTION_RUNTIME.name.replace(/^nodejs(\d+)\.x$/, "node$1"),
  mainFields: ["module", "main"],
  minify: true,
  sourceMap: true,
  sourcesContent: false,
  banner: ESM_REQUIRE_BANNER,
  externalModules: [...LAZY_CREDENTIAL_PROVIDERS],
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
  };
}
