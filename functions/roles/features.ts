import * as z from "../../schemas/zod";

/**
 * What the reference applications add to a stack that the hub's front door and console serve:
 * customers' conversations (customer support), workflow runs (content production) and the tasks'
 * views (the task projection). A stack has a feature when one of its roles takes the event type
 * that starts its work (./stack-features.ts). An application's own stack (`new AgentBus(app, id,
 * { roles })`) has none of them unless it deploys those roles: its front door answers their
 * routes 404 `not_served` (functions/front-door/served.ts), and its console leaves their lists
 * out and says why (lib/operator/console).
 */
export const FEATURES = {
  conversations: { takes: "conversation.message.received", what: "customers' conversations" },
  runs: { takes: "workflow.start.requested", what: "workflow runs" },
  tasks: { takes: "task.accepted", what: "task views" },
} as const;

export type Feature = keyof typeof FEATURES;

/** Every feature, in the order `FEATURES` declares them. */
export const ALL_FEATURES = Object.keys(FEATURES) as readonly Feature[];

/** Why a stack lacks `feature`, in words a problem's detail or a page can quote. */
export function whyLacking(feature: Feature): string {
  const { takes, what } = FEATURES[feature];
  return `this deployment has no ${what}: none of its roles takes ${takes}`;
}

/** The features as a function's environment has them: a comma list ("" for none). */
export function featuresValue(features: readonly Feature[]): string {
  return features.join(",");
}

const isFeature = (name: string): name is Feature => Object.hasOwn(FEATURES, name);

/** A function's comma list of features (`featuresValue`), read back; what is not one is named. */
export const FeatureList = z.pipe(
  z.string(),
  z.transform((value, ctx) => {
    const names = value
      .split(",")
      .map((name) => name.trim())
      .filter((name) => name !== "");
    const unknown = names.filter((name) => !isFeature(name));
    if (unknown.length === 0) return names.filter(isFeature);
    ctx.issues.push({
      code: "custom",
      message: `${unknown.map((name) => JSON.stringify(name)).join(", ")}: not a feature (features: ${ALL_FEATURES.join(", ")})`,
      input: value,
    });
    return z.NEVER;
  }),
);
