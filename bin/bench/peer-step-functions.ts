import type { FlowShape } from "../../lib/dev/metering/flow-cost";

/**
 * The reference flows as Step Functions state machines (Amazon States Language), and the state
 * transitions an execution of each makes, counted by walking the definition as Step Functions
 * runs it: every state entered is one transition (a Task, a Choice, a Pass, a Succeed, a Parallel
 * or Map state itself, and each state inside each branch and iteration). A Task's result is what
 * the flow's step gave when it was played (a review approves in the round the run ended with, the
 * topic selection gives the claims it checked), so each Choice goes the way the played run went.
 * A child run is a nested execution (`states:startExecution.sync:2`), whose transitions bill on
 * its own execution and are counted with it; Express bills each execution as one request.
 */

type State =
  | {
      readonly Type: "Task";
      readonly Resource: string;
      readonly Next?: string;
      readonly End?: true;
      readonly ResultPath?: string;
      readonly Child?: Definition;
    }
  | { readonly Type: "Choice"; readonly Choices: readonly ChoiceRule[]; readonly Default: string }
  | { readonly Type: "Pass"; readonly Next?: string; readonly End?: true }
  | { readonly Type: "Succeed" }
  | {
      readonly Type: "Parallel";
      readonly Branches: readonly Definition[];
      readonly Next?: string;
      readonly End?: true;
    }
  | {
      readonly Type: "Map";
      readonly ItemsPath: string;
      readonly ItemProcessor: Definition;
      readonly Next?: string;
      readonly End?: true;
    };

interface ChoiceRule {
  readonly Variable: string;
  readonly BooleanEquals: boolean;
  readonly Next: string;
}

export interface Definition {
  readonly StartAt: string;
  readonly States: Readonly<Record<string, State>>;
}

const LAMBDA = "arn:aws:states:::lambda:invoke";
const NESTED = "arn:aws:states:::states:startExecution.sync:2";

const task = (next?: string): State => ({
  Type: "Task",
  Resource: LAMBDA,
  ...(next ? { Next: next } : { End: true as const }),
});

/** Tasks one after the other. */
function sequence(steps: readonly string[]): Definition {
  return {
    StartAt: steps[0] ?? "",
    States: Object.fromEntries(steps.map((s, i) => [s, task(steps[i + 1])])),
  };
}

/** A Map of one Task per claim. */
const factCheckMap = (next?: string): State => ({
  Type: "Map",
  ItemsPath: "$.claims",
  ItemProcessor: sequence(["fact check claim"]),
  ...(next ? { Next: next } : { End: true as const }),
});

/** Write, review, and a Choice on the review's verdict: back to writing, or done. */
const ROUNDS: Definition = {
  StartAt: "write",
  States: {
    write: task("review"),
    review: task("approved?"),
    "approved?": {
      Type: "Choice",
      Choices: [{ Variable: "$.approved", BooleanEquals: true, Next: "done" }],
      Default: "write",
    },
    done: { Type: "Succeed" },
  },
};

const FACT_CHECK_MACHINE: Definition = {
  StartAt: "fact check",
  States: { "fact check": factCheckMap() },
};

/** Each flow's state machine, by the flow's name. */
export function definitionOf(shape: FlowShape): Definition | undefined {
  const steps = shape.steps;
  switch (shape.flow) {
    case "support turn":
    case "refund review":
      return sequence(steps);
    case "content run, quick news":
      return {
        StartAt: "select topic",
        States: {
          "select topic": task("check and write"),
          "check and write": {
            Type: "Parallel",
            Branches: [{ StartAt: "fact check", States: { "fact check": factCheckMap() } }, ROUNDS],
            End: true,
          },
        },
      };
    case "content run, long form":
      return {
        StartAt: "select topic",
        States: {
          "select topic": task("fact check"),
          "fact check":
            shape.childRuns > 0
              ? { Type: "Task", Resource: NESTED, Child: FACT_CHECK_MACHINE, Next: "write" }
              : factCheckMap("write"),
          ...ROUNDS.States,
        },
      };
    default:
      return undefined;
  }
}

/** What a played run's steps tell the machine: its claims, and the round its review approved. */
interface Played {
  readonly claims: number;
  readonly rounds: number;
}

export interface TransitionCount {
  /** Transitions billed, over the execution and its nested executions. */
  readonly transitions: number;
  /** Executions started (the flow's and each nested one's): Express requests. */
  readonly executions: number;
}

/** Runs `definition` as Step Functions would for the played run, counting transitions. */
export function countTransitions(definition: Definition, shape: FlowShape): TransitionCount {
  const played: Played = {
    claims: shape.steps.filter((s) => s.startsWith("fact check claim")).length,
    rounds: shape.steps.filter((s) => s === "review").length,
  };
  const count = { transitions: 0, executions: 1 };
  walk(definition, played, count, { round: 0 });
  return count;
}

function walk(
  definition: Definition,
  played: Played,
  count: { transitions: number; executions: number },
  run: { round: number },
): void {
  let name: string | undefined = definition.StartAt;
  for (let entered = 0; name !== undefined; entered++) {
    if (entered > 100_000) throw new Error(`the state machine does not end (at ${name})`);
    const state: State | undefined = definition.States[name];
    if (!state) throw new Error(`the state machine has no state ${name}`);
    count.transitions += 1;
    name = nextOf(name, state, played, count, run);
  }
}

function nextOf(
  name: string,
  state: State,
  played: Played,
  count: { transitions: number; executions: number },
  run: { round: number },
): string | undefined {
  switch (state.Type) {
    case "Task":
      if (state.Child) {
        count.executions += 1;
        walk(state.Child, played, count, { round: 0 });
      }
      if (name === "review") run.round += 1;
      return state.Next;
    case "Choice": {
      // The only verdict the machines read: a review approves in the round the played run ended.
      const approved = run.round >= played.rounds;
      return state.Choices.find((c) => c.BooleanEquals === approved)?.Next ?? state.Default;
    }
    case "Pass":
      return state.Next;
    case "Succeed":
      return undefined;
    case "Parallel":
      for (const branch of state.Branches) walk(branch, played, count, { round: 0 });
      return state.Next;
    case "Map":
      for (let i = 0; i < played.claims; i++) walk(state.ItemProcessor, played, count, run);
      return state.Next;
  }
}
