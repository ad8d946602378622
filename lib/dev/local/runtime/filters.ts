/** Lambda event filtering for the pattern forms the stack uses: literal lists and nesting. */
export function matches(value: unknown, pattern: unknown): boolean {
  if (Array.isArray(pattern)) {
    return pattern.some((p) => {
      if (p && typeof p === "object") {
        const rule = p as { prefix?: string; exists?: boolean };
        if (rule.prefix !== undefined)
          return typeof value === "string" && value.startsWith(rule.prefix);
        if (rule.exists !== undefined) return (value !== undefined) === rule.exists;
        return false;
      }
      return value === p;
    });
  }
  if (pattern && typeof pattern === "object") {
    const obj = (value ?? {}) as Record<string, unknown>;
    return Object.entries(pattern as Record<string, unknown>).every(([k, p]) => matches(obj[k], p));
  }
  return value === pattern;
}

/** The records a mapping hands over: all without filters, else those some filter matches. */
export function selected<T>(records: readonly T[], filters: readonly unknown[]): T[] {
  return records.filter((r) => filters.length === 0 || filters.some((p) => matches(r, p)));
}
