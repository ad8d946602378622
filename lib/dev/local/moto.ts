import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { createServer } from "node:net";
import { join } from "node:path";
import { PACKAGE_ROOT } from "../../infra/package-root";

/** A moto_server this process started, bound to 127.0.0.1 only. */
export interface MotoServer {
  readonly endpoint: string;
  readonly pid: number;
  /** Ends the server (only the process this module started). */
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address
          ? resolve(address.port)
          : reject(new Error("no port")),
      );
    });
  });
}

/** Whether moto_server can be started here (see motoProblem). */
export function motoAvailable(): boolean {
  return motoProblem() === undefined;
}

/**
 * moto_server as the local stack needs it (see moto_launcher.py): DynamoDB transactions made
 * atomic (moto undoes a failed TransactWriteItems by putting back whole-table copies, which leaves
 * every open stream iterator on a shard that never grows again), SQS long polls that wait instead
 * of spinning, and moto's per-request costs (a parser built per EventBridge target, a directory
 * listing per request, a log line per request) taken out.
 */
const LAUNCHER = join(PACKAGE_ROOT, "lib", "dev", "local", "moto_launcher.py");

/** Start moto_server (see above) on `127.0.0.1:<free port>` and wait until it answers. */
export async function startMoto(
  options: { port?: number; timeoutMs?: number } = {},
): Promise<MotoServer> {
  const port = options.port ?? (await freePort());
  const child: ChildProcess = spawn("python3", [LAUNCHER, "-H", "127.0.0.1", "-p", String(port)], {
    stdio: ["ignore", "ignore", "pipe"],
    detached: false,
  });
  let stderr = "";
  let spawnError: Error | undefined;
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  child.on("error", (error) => {
    spawnError = error;
  });
  const endpoint = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  for (;;) {
    if (spawnError || child.exitCode !== null)
      throw new Error(notStarted("python3", spawnError, stderr));
    try {
      const response = await fetch(`${endpoint}/moto-api/`, { signal: AbortSignal.timeout(1000) });
      if (response.ok) break;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) {
      child.kill("SIGTERM");
      throw new Error(
        `moto_server did not answer on ${endpoint} within its start timeout: ${stderr}`,
      );
    }
    await new Promise((r) => setTimeout(r, 150));
  }
  const pid = child.pid ?? -1;
  // A process that ends without stopping it (an uncaught error) still ends its emulator.
  const endWithProcess = () => child.kill("SIGTERM");
  process.once("exit", endWithProcess);
  return {
    endpoint,
    pid,
    stop: () =>
      new Promise<void>((resolve) => {
        process.off("exit", endWithProcess);
        if (child.exitCode !== null) return resolve();
        const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
        child.once("exit", () => {
          clearTimeout(timer);
          resolve();
        });
        child.kill("SIGTERM");
      }),
  };
}

const INSTALL_HINT =
  "Install moto 5.2 with its server extra (pip install 'moto[server]~=5.2') or set AWS_ENDPOINT_URL to a running emulator.";

/**
 * Why moto_server cannot be started here, or undefined when it can: `python` imports what the
 * launcher imports (`moto_launcher.py --check`, a second or two). npm start asks before it loads
 * the stack, so a machine without moto is told at once, not after the synth's tens of seconds.
 */
export function motoProblem(python = "python3"): string | undefined {
  const run = spawnSync(python, [LAUNCHER, "--check"], { encoding: "utf8" });
  if (run.error || run.status !== 0) return notStarted(python, run.error, run.stderr ?? "");
  return undefined;
}

/** Why the emulator did not start, in words that name what to install. */
function notStarted(python: string, spawnError: Error | undefined, stderr: string): string {
  if (spawnError) return `${python} could not be started (${spawnError.message}). ${INSTALL_HINT}`;
  // moto[server]'s own modules and its dependencies (jsonpath_ng, werkzeug, flask, ...).
  const missing = /No module named '?([\w.]+)/.exec(stderr)?.[1];
  if (missing)
    return `moto is not installed for ${python} (it cannot import ${missing}). ${INSTALL_HINT}`;
  return `moto_server exited before it answered: ${stderr}`;
}

/** Forget everything moto holds (between test files). */
export async function resetMoto(endpoint: string): Promise<void> {
  await fetch(`${endpoint}/moto-api/reset`, { method: "POST" });
}
