/** One expectation of a scenario, checked against what the stack stored and observed. */
export interface Check {
  readonly name: string;
  readonly ok: boolean;
  readonly detail: string;
}

export function check(name: string, ok: boolean, detail: string): Check {
  return { name, ok, detail };
}
