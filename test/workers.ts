import { availableParallelism } from "node:os";

/**
 * How many test files run at once. Most of an end-to-end file's time is spent waiting on the
 * emulator and the runtime's pollers, so a 2-core machine runs more files than it has cores;
 * `TEST_WORKERS` overrides.
 */
export const TEST_WORKERS =
  Number(process.env.TEST_WORKERS) || Math.max(2, availableParallelism() + 1);
