/**
 * EventBridge's and Lambda event filtering's pattern matching, for the forms the stack's rules,
 * subscribers and filters use: literal lists, `prefix`, `exists` and nesting (a field's pattern
 * matches when any of its list's entries does; an object's when every field's does). The relay
 * matches stored events against the rules of the groups it delivers to directly
 * (./direct-delivery.ts); the local runtime matches subscribers' and mappings' filters with it.
 */
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
