import type { TestProject } from "vitest/node";
import { type MotoServer, startMoto } from "../lib/dev/local/moto";
import { SLOW_STEP_TIMEOUT_MS } from "./support/timeouts";
import { TEST_WORKERS } from "./workers";

const motos: MotoServer[] = [];

/**
 * One moto_server per test worker, each on a free 127.0.0.1 port, all stopped at the end: test
 * files run in parallel (most of an end-to-end test is waiting), and each sees an emulator no
 * other file is using at the same time. AWS_ENDPOINT_URL, when set, points every worker at an
 * emulator that is already running instead.
 */
export async function setup(project: TestProject): Promise<void> {
  const given = process.env.AWS_ENDPOINT_URL;
  if (given) {
    project.provide("awsEndpoints", [given]);
    return;
  }
  const started = await Promise.allSettled(
    Array.from({ length: TEST_WORKERS }, () => startMoto({ timeoutMs: SLOW_STEP_TIMEOUT_MS })),
  );
  for (const s of started) if (s.status === "fulfilled") motos.push(s.value);
  const failed = started.find((s) => s.status === "rejected");
  if (failed) {
    await teardown();
    throw failed.reason;
  }
  project.provide(
    "awsEndpoints",
    motos.map((m) => m.endpoint),
  );
}

export async function teardown(): Promise<void> {
  await Promise.all(motos.splice(0).map((m) => m.stop()));
}

declare module "vitest" {
  export interface ProvidedContext {
    awsEndpoints: string[];
  }
}
