/**
 * Freezes a value and everything it holds, in place, and returns it: what the in-memory store
 * keeps, and a workflow definition once validated. Readers get the values themselves instead of
 * copies: a caller that tried to change one would fail loudly, as it would have changed nothing
 * stored in DynamoDB. A value found frozen already is taken as frozen throughout and not walked
 * again: a new state shares its unchanged parts with the state before it, frozen then.
 */
export function deepFreeze<T>(value: T): T {
  if (value === null || typeof value !== "object" || Object.isFrozen(value)) return value;
  Object.freeze(value);
  // Walked in place: this runs on every commit, and Object.values would copy each level first.
  if (Array.isArray(value)) for (let i = 0; i < value.length; i++) deepFreeze(value[i]);
  else for (const key in value) deepFreeze(value[key]);
  return value;
}
