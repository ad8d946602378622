import { isAbsolute, join, normalize, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { PACKAGE_ROOT } from "./package-root";

/**
 * The absolute path an entry names, or undefined when it names none: a relative path may not
 * leave the repository root or use `\` (the metadata must read the same on every machine).
 */
export function absoluteEntry(entry: string): string | undefined {
  if (entry.startsWith("file:")) {
    try {
      return fileURLToPath(entry);
    } catch {
      return undefined;
    }
  }
  if (isAbsolute(entry)) return normalize(entry);
  const normalized = normalize(entry);
  if (entry.includes("\\") || normalized.startsWith(`..${sep}`)) return undefined;
  return join(PACKAGE_ROOT, normalized);
}
