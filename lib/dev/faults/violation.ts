/** An invariant a chaos schedule broke (./invariants.ts), and how. */
export interface Violation {
  readonly invariant: string;
  readonly detail: string;
}
