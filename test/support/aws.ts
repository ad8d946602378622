import { inject } from "vitest";

/** Endpoint and fake credentials for the emulator started by test/global-setup.ts. */
export function emulator() {
  return {
    endpoint: inject("awsEndpoint"),
    region: "us-east-1",
    credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
  } as const;
}
