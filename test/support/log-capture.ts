/**
 * Every line this process writes to stdout and stderr while the capture runs: the functions'
 * Powertools loggers write their JSON lines there (through a Console of their own, not the
 * `console` a test runner patches). What is captured is not written through: a test's output stays
 * quiet.
 */
export interface LogCapture {
  /** Every line written so far, whole (a partial last line waits for its end). */
  lines(): string[];
  /** The lines that are Powertools log lines (JSON objects with a `level` and a `service`). */
  logLines(): Record<string, unknown>[];
  stop(): void;
}

export function captureOutput(): LogCapture {
  const written: string[] = [];
  const streams = [process.stdout, process.stderr] as const;
  const originals = streams.map((stream) => stream.write);
  for (const stream of streams)
    stream.write = ((chunk: unknown, ...rest: unknown[]) => {
      written.push(typeof chunk === "string" ? chunk : Buffer.from(chunk as Uint8Array).toString());
      const done = rest.find((arg) => typeof arg === "function") as (() => void) | undefined;
      done?.();
      return true;
    }) as typeof stream.write;
  const lines = () => {
    const all = written.join("").split("\n");
    all.pop();
    return all;
  };
  return {
    lines,
    logLines: () =>
      lines().flatMap((line) => {
        if (!line.startsWith("{")) return [];
        try {
          const parsed = JSON.parse(line) as Record<string, unknown>;
          return typeof parsed.level === "string" && typeof parsed.service === "string"
            ? [parsed]
            : [];
        } catch {
          return [];
        }
      }),
    stop: () => {
      streams.forEach((stream, i) => {
        stream.write = originals[i] as typeof stream.write;
      });
    },
  };
}
