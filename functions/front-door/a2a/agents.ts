import * as z from "../../../schemas/zod";
import { StepA2aSchema, type StepRoleTable } from "../../core/steps";

/**
 * The agents a stack offers over A2A: its step roles that declare `a2a` (functions/core/steps.ts),
 * given to the stream function as `A2A_AGENTS` (JSON, by role). Each is served at
 * `/v1/a2a/{role}` (JSON-RPC, the A2A v1.0 binding) with its card at
 * `/v1/a2a/{role}/.well-known/agent-card.json`; `/.well-known/agent-card.json` is the card of
 * the one agent when the stack offers one.
 */

export const A2A_AGENTS_ENV = "A2A_AGENTS";
export const A2aAgents = z.record(
  z.string().check(z.regex(/^[a-z][a-z0-9-]{0,63}$/)),
  StepA2aSchema,
);
export type A2aAgents = z.output<typeof A2aAgents>;

/** The roles of a table of step roles that are offered over A2A, with their declarations. */
export function offeredAgents(table: StepRoleTable): A2aAgents {
  return Object.fromEntries(
    Object.entries(table).flatMap(([role, entry]) => (entry.a2a ? [[role, entry.a2a]] : [])),
  );
}

/** The path of an agent's JSON-RPC endpoint. */
export function agentPath(role: string): string {
  return `/v1/a2a/${role}`;
}
