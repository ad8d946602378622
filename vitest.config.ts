import { defineConfig } from "vitest/config";
import { TEST_WORKERS } from "./test/workers";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The application outside the hub runs its own tests, with Node's runner, in its own directory
    // (test/package/package.test.ts).
    exclude: ["**/node_modules/**"],
    globalSetup: ["test/global-setup.ts"],
    setupFiles: ["test/setup.ts"],
    // A guard against a hang, not a speed check: on a busy two-core machine a test that drives
    // Chromium or the local stack took over a minute (the console's approvals, 61 s), and no test
    // may fail because the machine is busy.
    testTimeout: 300_000,
    hookTimeout: 300_000,
    pool: "forks",
    maxWorkers: TEST_WORKERS,
  },
});
