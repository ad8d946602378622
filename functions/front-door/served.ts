import { type Feature, whyLacking } from "../roles/features";
import { fail } from "./http";

/**
 * What this deployment serves. A route of a feature (functions/roles/features.ts: conversations,
 * runs) is served only where the stack has it, i.e. where one of its roles does the work the route
 * hands on or reads back; elsewhere it answers 404 `not_served`, naming what the deployment
 * lacks, before it reads or writes anything. So an application's stack without the support roles
 * refuses a customer's message instead of accepting work no consumer will do. The stack tells the
 * functions its features (their environment's `FEATURES`, lib/infra/constructs/front-door.ts).
 */

/** 404 `not_served` unless the deployment has the route's feature (a route of none is served). */
export function checkServed(
  route: { readonly feature?: Feature },
  features: readonly Feature[],
  path: string,
): void {
  if (route.feature === undefined || features.includes(route.feature)) return;
  fail("not_served", `${path} is not served here: ${whyLacking(route.feature)}`);
}

/** An OpenAPI operation's feature, as lib/dev/openapi.ts marks it. */
export const FEATURE_EXTENSION = "x-agentbus-feature";

const METHODS = new Set(["get", "put", "post", "delete", "options", "head", "patch", "trace"]);

/**
 * The OpenAPI document as this deployment serves it: the operations of a feature it lacks
 * (marked `x-agentbus-feature`) left out, and a path left with no operation with them.
 */
export function servedDocument(
  document: { readonly paths: Readonly<Record<string, Readonly<Record<string, unknown>>>> },
  features: readonly Feature[],
): Record<string, unknown> {
  const served = (operation: unknown) => {
    const feature = (operation as Record<string, unknown> | null)?.[FEATURE_EXTENSION];
    return feature === undefined || features.includes(feature as Feature);
  };
  const paths = Object.entries(document.paths).flatMap(([path, item]) => {
    const kept = Object.entries(item).filter(([key, value]) => !METHODS.has(key) || served(value));
    return kept.some(([key]) => METHODS.has(key)) ? [[path, Object.fromEntries(kept)]] : [];
  });
  return { ...document, paths: Object.fromEntries(paths) };
}
