import { inject } from "vitest";

/**
 * Endpoint and fake credentials for this test worker's emulator (test/global-setup.ts starts one
 * per worker; VITEST_POOL_ID numbers the workers from 1).
 */
export function emulator() {
  const endpoints = inject("awsEndpoints");
  const worker = Math.max(1, Number(process.env.VITEST_POOL_ID ?? "1"));
  return {
    endpoint: endpoints[(worker - 1) % endpoints.length] as string,
    region: "us-east-1",
    credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
  } as const;
}
