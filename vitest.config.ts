import { defineConfig } from "vitest/config";
import { TEST_WORKERS } from "./test/workers";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/global-setup.ts"],
    setupFiles: ["test/setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    maxWorkers: TEST_WORKERS,
  },
});
