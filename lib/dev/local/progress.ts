/**
 * What `npm start` prints while it works: the part running, the steps it has logged and the
 * checks passed so far, and a status line whenever nothing else was printed for `quietMs`, so the
 * terminal is never silent for long.
 */
export class Progress {
  private current = "";
  private partStarted = Date.now();
  private lastPrinted = Date.now();
  private steps = 0;
  private checksOk = 0;
  private checksTotal = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly out: (line: string) => void,
    private readonly quietMs = 3000,
  ) {
    this.timer = setInterval(() => this.tick(), Math.min(1000, quietMs));
    this.timer.unref();
  }

  /** A new part begins (printed as a heading). */
  part(name: string): void {
    this.current = name;
    this.partStarted = Date.now();
    this.steps = 0;
    this.print(`${name} ...`);
  }

  /** A line of the running part. */
  step(line: string): void {
    this.steps++;
    this.print(`  ${line}`);
  }

  /** Checks a finished part evaluated. */
  checked(checks: readonly { ok: boolean }[]): void {
    this.checksTotal += checks.length;
    this.checksOk += checks.filter((c) => c.ok).length;
    this.print(
      `  ${this.current}: done in ${this.seconds(this.partStarted)} s; checks ok so far: ${this.checksOk} of ${this.checksTotal}`,
    );
  }

  /** Any other line (keeps the status line quiet). */
  print(line: string): void {
    this.lastPrinted = Date.now();
    this.out(line);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private tick(): void {
    if (!this.current || Date.now() - this.lastPrinted < this.quietMs) return;
    const steps = this.steps ? `, ${this.steps} step${this.steps === 1 ? "" : "s"} done` : "";
    this.print(
      `  … ${this.current}: ${this.seconds(this.partStarted)} s${steps}, checks ok so far: ${this.checksOk} of ${this.checksTotal}`,
    );
  }

  private seconds(since: number): string {
    return ((Date.now() - since) / 1000).toFixed(0);
  }
}
