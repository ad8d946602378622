import type { TestProject } from "vitest/node";
import { type MotoServer, startMoto } from "../lib/local/moto";

let moto: MotoServer | undefined;

/**
 * One moto_server for the whole test run, on a free 127.0.0.1 port, stopped at the end.
 * AWS_ENDPOINT_URL, when set, points the tests at an emulator that is already running instead.
 */
export async function setup(project: TestProject): Promise<void> {
  const given = process.env.AWS_ENDPOINT_URL;
  if (given) {
    project.provide("awsEndpoint", given);
    return;
  }
  moto = await startMoto();
  project.provide("awsEndpoint", moto.endpoint);
}

export async function teardown(): Promise<void> {
  await moto?.stop();
}

declare module "vitest" {
  export interface ProvidedContext {
    awsEndpoint: string;
  }
}
