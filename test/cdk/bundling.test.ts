import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { App, Stack } from "aws-cdk-lib";
import { OutputFormat } from "aws-cdk-lib/aws-lambda-nodejs";
import { build, type Metafile } from "esbuild";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  esbuildOptions,
  FUNCTION_BUNDLING,
  FUNCTION_BUNDLING_WITH_OTLP_SDK,
  FUNCTION_RUNTIME,
  OTLP_SDK_DEFINE,
} from "../../lib/infra/constructs/bundling";
import { AgentBusFunction, METADATA, REPO_ROOT } from "../../lib/infra/constructs/function";
import { SLOW_STEP_TIMEOUT_MS } from "../support/timeouts";
import { cdkJsonContext, resources, synthesizeStack } from "./synth";

/**
 * How every function is bundled, as invariants: what is external, minified ESM for the runtime's
 * Node.js, and what must never be inside. Sizes and init times are the bench's business
 * (`npm run bench -- bundles`), not a test's.
 */
describe("function bundling", () => {
  it("is minified ESM for the runtime's Node.js version, with linked source maps", () => {
    expect(FUNCTION_BUNDLING.format).toBe(OutputFormat.ESM);
    expect(FUNCTION_RUNTIME.name).toMatch(/^nodejs\d+\.x$/);
    expect(FUNCTION_BUNDLING.target).toBe(
      FUNCTION_RUNTIME.name.replace(/^nodejs(\d+)\.x$/, "node$1"),
    );
    expect(FUNCTION_BUNDLING.minify).toBe(true);
    expect(FUNCTION_BUNDLING.sourceMap).toBe(true);
    expect(FUNCTION_BUNDLING.sourcesContent).toBe(false);
    expect(FUNCTION_BUNDLING.mainFields).toEqual(["module", "main"]);
  });

  it("leaves nothing to the runtime", () => {
    expect(FUNCTION_BUNDLING.externalModules).toEqual([]);
  });

  it("gives esbuildOptions the same settings NodejsFunction gets", () => {
    const options = esbuildOptions("entry.ts", "out/index.mjs");
    expect(options).toMatchObject({
      bundle: true,
      platform: "node",
      format: "esm",
      target: FUNCTION_BUNDLING.target,
      minify: true,
      sourcemap: true,
      sourcesContent: false,
      external: [...FUNCTION_BUNDLING.externalModules],
      banner: { js: FUNCTION_BUNDLING.banner },
      define: { [OTLP_SDK_DEFINE]: '"false"' },
    });
    expect(esbuildOptions("e.ts", "o.mjs", FUNCTION_BUNDLING_WITH_OTLP_SDK).define).toEqual({
      [OTLP_SDK_DEFINE]: '"true"',
    });
  });
});

describe("function bundles", () => {
  let metafile: Metafile;
  /** Every source file that put code into a bundle (the metafile's inputs include shaken ones). */
  const bundled = () =>
    Object.values(metafile.outputs).flatMap((output) =>
      Object.entries(output.inputs)
        .filter(([, input]) => input.bytesInOutput > 0)
        .map(([path]) => path),
    );
  const entries = () =>
    resources(synthesizeStack().template, "AWS::Lambda::Function")
      .map((fn) => fn.Metadata[METADATA.entry])
      .filter((entry): entry is string => typeof entry === "string");

  beforeAll(async () => {
    const unique = [...new Set(entries())];
    expect(unique.length).toBeGreaterThan(1);
    const { entryPoints: _, outfile: __, ...options } = esbuildOptions("", "");
    const result = await build({
      ...options,
      entryPoints: unique.map((entry) => join(REPO_ROOT, entry)),
      outdir: join(tmpdir(), "agentbus-bundling-test"),
      write: false,
      metafile: true,
      logLevel: "error",
    });
    metafile = result.metafile;
  }, SLOW_STEP_TIMEOUT_MS);

  it("hold neither the X-Ray SDK nor the Powertools Tracer", () => {
    expect(bundled().filter((path) => /aws-xray-sdk|powertools\/tracer/.test(path))).toEqual([]);
  });

  it("hold the OpenTelemetry API, and its SDK and exporter only when built to export with them", async () => {
    const sdk = /@opentelemetry\/(sdk-trace|exporter-trace-otlp-http|otlp-|resources)/;
    expect(bundled().filter((path) => path.includes("@opentelemetry/api/"))).not.toEqual([]);
    expect(bundled().filter((path) => sdk.test(path))).toEqual([]);
    const {
      entryPoints: _,
      outfile: __,
      ...options
    } = esbuildOptions("", "", FUNCTION_BUNDLING_WITH_OTLP_SDK);
    const withSdk = await build({
      ...options,
      entryPoints: [join(REPO_ROOT, "functions/handlers/dispatch.ts")],
      outdir: join(tmpdir(), "agentbus-bundling-test-otlp"),
      write: false,
      metafile: true,
      logLevel: "error",
    });
    const inputs = Object.values(withSdk.metafile.outputs).flatMap((output) =>
      Object.entries(output.inputs)
        .filter(([, input]) => input.bytesInOutput > 0)
        .map(([path]) => path),
    );
    expect(inputs.filter((path) => sdk.test(path))).not.toEqual([]);
  });

  it("hold zod's English messages only, not its other locales", () => {
    const locales = new Set(
      bundled()
        .filter((path) => path.includes("zod/v4/locales/"))
        .map((path) => path.replace(/.*\/locales\//, "")),
    );
    expect([...locales]).toEqual(["en.js"]);
  });

  it("import nothing but Node's own modules", () => {
    const imports = Object.values(metafile.outputs).flatMap((output) => output.imports);
    expect(imports.length).toBeGreaterThan(0);
    expect(imports.filter((i) => !i.path.startsWith("node:")).map((i) => i.path)).toEqual([]);
  });

  /** The AWS SDK v3 client packages whose code is in the bundle of each entry. */
  const sdkClientsByEntry = () =>
    new Map(
      Object.values(metafile.outputs)
        .filter((output) => output.entryPoint)
        .map((output) => [
          output.entryPoint?.replace(/.*\/functions\//, "functions/") ?? "",
          new Set(
            Object.entries(output.inputs)
              .filter(([, input]) => input.bytesInOutput > 0)
              .map(([path]) => /@aws-sdk\/(client-[a-z-]+)\//.exec(path)?.[1])
              .filter((client): client is string => client !== undefined),
          ),
        ]),
    );

  it("hold the AWS SDK v3 clients of the services their code calls, and no other", () => {
    const clients = sdkClientsByEntry();
    expect(clients.get("functions/handlers/dispatch.ts")).toEqual(
      new Set(["client-dynamodb", "client-sqs"]),
    );
    expect(clients.get("functions/handlers/sweeper.ts")).toEqual(
      new Set(["client-dynamodb", "client-eventbridge"]),
    );
    const carrying = (client: string) =>
      [...clients].filter(([, c]) => c.has(client)).map(([entry]) => entry);
    expect(carrying("client-sns")).toEqual([expect.stringMatching(/\/sender\//)]);
    // Only the agents that answer with a model carry Bedrock Runtime's client.
    expect(carrying("client-bedrock-runtime").length).toBeGreaterThan(0);
    expect(carrying("client-bedrock-runtime").length).toBeLessThan(clients.size / 2);
  });

  it("hold the SDK's CBOR encoder and decoder only where a function calls eventbridgev2: the relay", () => {
    const withCbor = Object.values(metafile.outputs)
      .filter((output) =>
        Object.entries(output.inputs).some(
          ([path, input]) =>
            path.includes("adapters/aws/eventbridge-v2") && input.bytesInOutput > 0,
        ),
      )
      .map((output) => output.entryPoint);
    expect(withCbor).toEqual([expect.stringMatching(/functions\/handlers\/relay\.ts$/)]);
  });
});

describe("NodejsFunction's own bundling", () => {
  let outdir: string;
  beforeAll(() => {
    outdir = mkdtempSync(join(tmpdir(), "agentbus-cdk-bundle-"));
  });
  afterAll(() => rmSync(outdir, { recursive: true, force: true }));

  it(
    "gives the file the bench builds with esbuildOptions",
    async () => {
      const entry = "functions/handlers/relay.ts";
      const app = new App({ outdir, context: cdkJsonContext() });
      new AgentBusFunction(new Stack(app, "Bundled"), "Relay", { kind: "relay", entry });
      app.synth();
      const [asset] = readdirSync(outdir).filter((name) => name.startsWith("asset."));
      expect(asset).toBeDefined();
      const byCdk = readFileSync(join(outdir, asset ?? "", "index.mjs"), "utf8");

      const result = await build({
        ...esbuildOptions(join(REPO_ROOT, entry), join(outdir, "bench", "index.mjs")),
        write: false,
        logLevel: "error",
      });
      const byBench = result.outputFiles.find((file) => file.path.endsWith("index.mjs"));
      expect(byBench?.text).toBe(byCdk);
    },
    SLOW_STEP_TIMEOUT_MS,
  );
});

describe("validation in a bundle", () => {
  it("explains a refused message in English with zod/mini alone, as the tests see it with classic zod loaded", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agentbus-zod-mini-"));
    try {
      const entry = join(dir, "validate.ts");
      writeFileSync(
        entry,
        [
          `import { registry } from ${JSON.stringify(join(REPO_ROOT, "schemas"))};`,
          "const result = registry.parse({ event_type: 42 });",
          "console.log(JSON.stringify(result));",
        ].join("\n"),
      );
      const outfile = join(dir, "out", "index.mjs");
      const { metafile } = await build({
        ...esbuildOptions(entry, outfile),
        metafile: true,
        logLevel: "error",
      });
      const inputs = Object.keys(metafile.inputs);
      expect(inputs.some((path) => path.includes("zod/v4/mini/"))).toBe(true);
      expect(inputs.filter((path) => path.includes("zod/v4/classic/"))).toEqual([]);
      const run = spawnSync(process.execPath, [outfile], { encoding: "utf8" });
      expect(run.status, run.stderr).toBe(0);
      expect(run.stdout).toMatch(/Invalid input: expected string, received number/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("stack traces of a bundle", () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "agentbus-source-maps-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** Builds a bundle that throws from line 3 of its source and prints the stack. */
  async function stackOf(install: boolean): Promise<string> {
    const entry = join(dir, `thrower-${install}.ts`);
    writeFileSync(
      entry,
      [
        `import { installLazySourceMaps } from ${JSON.stringify(join(REPO_ROOT, "functions/handlers/source-maps"))};`,
        "export function failingStep(reason: string): never {",
        "  throw new Error('step failed: ' + reason);",
        "}",
        install ? "installLazySourceMaps();" : "",
        "try { failingStep('bad input'); } catch (error) { console.log((error as Error).stack); }",
      ].join("\n"),
    );
    const outfile = join(dir, `out-${install}`, "index.mjs");
    await build({ ...esbuildOptions(entry, outfile), logLevel: "error" });
    const run = spawnSync(process.execPath, [outfile], {
      encoding: "utf8",
      env: { PATH: process.env.PATH ?? "" },
    });
    expect(run.status, run.stderr).toBe(0);
    return run.stdout;
  }

  it("name the TypeScript source, line and function once mapped lazily, without --enable-source-maps", async () => {
    const stack = await stackOf(true);
    expect(stack).toContain("Error: step failed: bad input");
    expect(stack).toMatch(/at failingStep \(.*thrower-true\.ts:3:\d+\)/);
    expect(stack).not.toMatch(/index\.mjs:\d+/);
  });

  it("name only the minified bundle without it", async () => {
    const stack = await stackOf(false);
    expect(stack).toMatch(/index\.mjs:\d+:\d+/);
    expect(stack).not.toContain("thrower-false.ts");
  });
});
