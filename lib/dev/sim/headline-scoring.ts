import type { WorkflowDefinition } from "../../../functions/core/dag/definition";
import { defineWorkflow } from "../../../functions/core/dag/graph";
import { PermanentError, TransientError } from "../../../functions/core/errors";
import type { RoleModule } from "../../../functions/core/role-module";
import { defineStepModule } from "../../../functions/core/role-module";
import { WORKFLOWS_ENV, workflowsEnvValue } from "../../../functions/core/stack-workflows";
import { STEP_ROLES_ENV, stepRolesEnvValue, stepRolesOf } from "../../../functions/core/steps";
import { REFERENCE_WORKFLOWS } from "../../../functions/roles/modules";
import { orchestratorModule } from "../../../functions/roles/orchestrator/index";
import * as z from "../../../schemas/zod";
import type { CallFault } from "../faults/kinds";
import type { Random } from "../faults/random";

/**
 * A team's workflow in the simulated world, beside the content workflows: headlines submitted with
 * a run are listed by one step role and scored one by one by another, a map node over the list,
 * and the best is polished by a third, a loop of rounds (all written with the kit,
 * functions/core/step-role.ts). The scores come from a judge, an outside service that scores
 * afresh on every call, so a step run twice for one assignment shows in its answers; an empty
 * headline cannot be scored and fails its item, and a judge that keeps failing fails it too.
 * Another workflow of the team's lists headlines and waits for an editor's approval, a signal.
 */

export const HEADLINE_LISTING = "headline-listing";
export const HEADLINE_SCORING = "headline-scoring";
export const HEADLINE_POLISHING = "headline-polishing";
/** Nothing deploys the simulated modules: each names the orchestrator's entry. */
const UNDEPLOYED = orchestratorModule.entry;
/** A polished headline is good from this score on. */
const GOOD_SCORE = 60;

/** The judge's faults, in the order one draw per call picks them. */
export const JUDGE_FAULTS = ["throttle", "connection-reset", "timeout-after-apply"] as const;

/** What the judge says of one headline: a score, and the serial of the call that gave it. */
export interface Judgement {
  readonly score: number;
  readonly judgement: number;
}

/**
 * The judge (a scoring service, a model behind an API): every call draws a new score and counts
 * itself, whatever it was asked before; each call meets at most one fault of the plan's.
 */
export class HeadlineJudge {
  calls = 0;

  constructor(
    private readonly random: Random,
    private readonly fault: () => CallFault | undefined,
  ) {}

  score(headline: string): Judgement {
    const fault = this.fault();
    if (fault === "throttle" || fault === "server-error")
      throw new TransientError("judge.throttled", "the judge refused the call: throttled");
    if (fault === "connection-reset")
      throw new TransientError("judge.connection_reset", "the connection to the judge was reset");
    this.calls++;
    const judged = { score: this.random.below(101), judgement: this.calls };
    if (fault === "timeout-after-apply")
      throw new TransientError(
        "judge.timeout",
        `the judge scored "${headline.slice(0, 40)}", its answer was lost`,
      );
    return judged;
  }
}

/** The listing step: the headlines of the run's request, as they were submitted. */
const headlineListingModule = defineStepModule({
  group: HEADLINE_LISTING,
  entry: UNDEPLOYED,
  steps: {
    input: z.looseObject({ headlines: z.array(z.string()) }),
    output: z.object({ headlines: z.array(z.string()) }),
    run: () => (input: { headlines: string[] }) => ({ headlines: input.headlines }),
  },
});

/** The scoring step of one map item: the judge's score of its headline. */
function headlineScoringModule(judge: HeadlineJudge): RoleModule<unknown> {
  return defineStepModule({
    group: HEADLINE_SCORING,
    entry: UNDEPLOYED,
    steps: {
      input: z.looseObject({}),
      output: z.object({ headline: z.string(), score: z.int(), judgement: z.int() }),
      leaseSeconds: 60,
      run: () => (_input: unknown, context) => {
        const headline = context.item?.value;
        if (typeof headline !== "string")
          throw new PermanentError("scoring.no_headline", "a scoring step is a headline's item");
        if (headline.trim() === "")
          throw new PermanentError("scoring.empty_headline", "an empty headline has no score");
        return { headline, ...judge.score(headline) };
      },
    },
  }) as RoleModule<unknown>;
}

const Polished = z.object({
  headline: z.string(),
  score: z.int(),
  judgement: z.int(),
  good: z.boolean(),
});

/**
 * The polishing step, a loop's body: the best-scored headline, scored again and revised round
 * after round until the judge finds it good (an empty list leaves nothing to polish).
 */
function headlinePolishingModule(judge: HeadlineJudge): RoleModule<unknown> {
  const Scores = z.looseObject({
    scores: z.looseObject({ items: z.array(z.looseObject({ status: z.string() })) }),
  });
  return defineStepModule({
    group: HEADLINE_POLISHING,
    entry: UNDEPLOYED,
    steps: {
      input: Scores,
      output: Polished,
      run: () => (input: z.output<typeof Scores>, context) => {
        // The round before's answer, read as any input is (absent in the first round).
        const before = Polished.safeParse(context.loop?.previous.polish).data;
        const headline = before ? `${before.headline}, revised` : bestOf(input.scores.items);
        if (headline === undefined) return { headline: "", score: 0, judgement: 0, good: true };
        const judged = judge.score(headline);
        return { headline, ...judged, good: judged.score >= GOOD_SCORE };
      },
    },
  }) as RoleModule<unknown>;
}

/** The headline of the best score among the map's results, if any completed. */
function bestOf(items: readonly { status: string; output?: unknown }[]): string | undefined {
  const scored = items.flatMap((i) =>
    i.status === "completed" ? [i.output as { headline: string; score: number }] : [],
  );
  return scored.sort((a, b) => b.score - a.score)[0]?.headline;
}

/**
 * List the headlines, then score each, two at a time, one failure tolerated; then polish the best
 * until it is good, three rounds at most.
 */
export const headlineScoring: WorkflowDefinition = defineWorkflow({
  name: "headline-scoring",
  version: 1,
  nodes: [
    { id: "listing", role: HEADLINE_LISTING },
    {
      id: "scores",
      role: HEADLINE_SCORING,
      map: { items: { node: "listing", path: "headlines" }, concurrency: 2, maxFailed: 1 },
    },
    { id: "polish", role: HEADLINE_POLISHING },
  ],
  edges: [
    { from: "listing", to: "scores" },
    { from: "scores", to: "polish" },
    { from: "polish", to: "polish", loop: { until: { path: "good", equals: true }, maxRounds: 3 } },
  ],
});

/** A review of headlines: their scoring, as a child run (a partial one counts). */
export const headlineReview: WorkflowDefinition = defineWorkflow({
  name: "headline-review",
  version: 1,
  nodes: [{ id: "scoring", workflow: { name: headlineScoring.name, acceptPartial: true } }],
  edges: [],
});

/** The signal an editor sends to approve a run's headlines. */
export const APPROVAL_SIGNAL = "headlines-approved";

/**
 * An approval of headlines: once listed, they wait for an editor's signal, a minute and a half at
 * most (past it the node fails, `dag.wait_deadline`, and so does the run), and beside it an
 * embargo, a timer of half a minute. The signal's payload is the approval node's output.
 */
export const headlineApproval: WorkflowDefinition = defineWorkflow({
  name: "headline-approval",
  version: 1,
  nodes: [
    { id: "listing", role: HEADLINE_LISTING },
    { id: "approval", wait: { signal: APPROVAL_SIGNAL, seconds: 90 } },
    { id: "embargo", wait: { seconds: 30 } },
  ],
  edges: [
    { from: "listing", to: "approval" },
    { from: "listing", to: "embargo" },
  ],
});

/** The workflows the simulated orchestrator has besides the reference stack's (content production's). */
export const SIMULATED_WORKFLOWS: readonly WorkflowDefinition[] = [
  headlineScoring,
  headlineReview,
  headlineApproval,
];

/**
 * The world's role modules: `modules` with the headline steps beside them (`scoring` in place of
 * the kit's scoring module when a defect is planted in it); with the settings that hand the
 * orchestrator the step roles, the reference stack's workflows and the simulated ones, as the
 * stack writes them.
 */
export function withHeadlineScoring(
  modules: readonly RoleModule<unknown>[],
  judge: HeadlineJudge,
  scoring: (module: RoleModule<unknown>) => RoleModule<unknown> = (module) => module,
): { modules: readonly RoleModule<unknown>[]; settings: Record<string, string> } {
  const all = [
    ...modules,
    headlineListingModule as RoleModule<unknown>,
    scoring(headlineScoringModule(judge)),
    headlinePolishingModule(judge),
  ];
  return {
    modules: all,
    settings: {
      [STEP_ROLES_ENV]: stepRolesEnvValue(stepRolesOf(all)),
      [WORKFLOWS_ENV]: workflowsEnvValue([...REFERENCE_WORKFLOWS, ...SIMULATED_WORKFLOWS]),
    },
  };
}

/** The headlines a simulated team submits: up to six, now and then an empty one. */
export function submittedHeadlines(random: Random): string[] {
  const subjects = ["grid storage", "solid-state cells", "pumped hydro", "flywheels", "sodium ion"];
  return Array.from({ length: random.below(7) }, (_, i) =>
    random.chance(0.15) ? "" : `${random.pick(subjects)} in ${2027 + i}`,
  );
}
