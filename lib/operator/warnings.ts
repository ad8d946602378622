/**
 * The AWS SDK warns in every process that its releases after January 2027 need Node.js 22.
 * The local tooling supports Node.js 20 and 22 (Lambda bundles target 22), so that one warning
 * is dropped; every other warning is still printed.
 */
export function silenceNodeVersionWarning(): void {
  process.removeAllListeners("warning");
  process.on("warning", (warning) => {
    if (!`${warning.name} ${warning.message}`.includes("NodeVersionSupportWarning")) {
      process.stderr.write(`${warning.name}: ${warning.message}\n`);
    }
  });
}
