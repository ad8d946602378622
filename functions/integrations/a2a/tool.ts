import * as z from "../../../schemas/zod";
import type { AnyTool } from "../../core/agent/agent";
import { defineTool, type ToolApproval, type ToolEffect } from "../../core/agent/tool";
import type { JsonSchema } from "../../core/model-schemas";
import { type A2aCallDeclaration, A2aExchange, type A2aOutput, checkedCard } from "./message";
import type { A2aAgentPort } from "./port";

/**
 * Another system's A2A agent as an agent's tool (functions/core/agent/tool.ts): the model's input
 * (`message`, and `data` when it gives one) is the message's text and data part; what the model
 * is told of the tool is the card's (the skill's description when the declaration names one).
 * A write is run once under the step's key through the side-effect ledger, like any write tool
 * (tool-call.ts), the key sent as the message's id (./message.ts); its outcome, when unknown, is
 * learnt from the agent's task by id or by the key's context, else (unless the agent `dedupes`
 * message ids: a message again under the key) by a person.
 */

export interface A2aToolDeclaration extends A2aCallDeclaration {
  /** The tool's name as the model sees it (`ask_billing`). */
  readonly name: string;
  /** @default "write" */
  readonly effect?: ToolEffect;
  /** For a write: the agent never acts twice on one message id, so a send again is safe. */
  readonly dedupes?: boolean;
  readonly approval?: ToolApproval<A2aToolInput>;
}

/** What the model gives: the message's text, and optionally a data part. */
export interface A2aToolInput {
  readonly message: string;
  readonly data?: Record<string, unknown>;
}

const A2aToolInputSchema = z.object({
  message: z.string().check(z.minLength(1)),
  data: z.optional(z.record(z.string(), z.unknown())),
});

const A2aFileRefSchema = z.union([
  z.object({
    name: z.optional(z.string()),
    mediaType: z.optional(z.string()),
    ref: z.string(),
    size: z.number(),
  }),
  z.object({ name: z.optional(z.string()), mediaType: z.optional(z.string()), uri: z.string() }),
  z.object({
    name: z.optional(z.string()),
    mediaType: z.optional(z.string()),
    omitted: z.enum(["too_large", "no_store"]),
    size: z.number(),
  }),
]);

const A2aOutputSchema: z.ZodMiniType<A2aOutput> = z.object({
  text: z.string(),
  data: z.optional(z.unknown()),
  files: z.optional(z.array(A2aFileRefSchema)),
});

/** What the model is shown of the tool's input. */
const INPUT_SCHEMA: JsonSchema = {
  type: "object",
  properties: {
    message: { type: "string", description: "What to ask of the agent, in words." },
    data: { type: "object", description: "Structured data to send with the message, if any." },
  },
  required: ["message"],
};

/** The agent behind `port` as an agent's tool. */
export function a2aTool(port: A2aAgentPort, declaration: A2aToolDeclaration): AnyTool {
  const effect = declaration.effect ?? "write";
  const exchange = new A2aExchange(port, declaration);
  const send = (input: A2aToolInput, key?: string, started?: (id: string) => Promise<void>) =>
    exchange.send(
      { text: input.message, ...(input.data ? { data: input.data } : {}) },
      key,
      started,
    );
  return defineTool<A2aToolInput, A2aOutput>({
    name: declaration.name,
    description: `${declaration.name} (A2A agent ${declaration.agent})`,
    effect,
    input: A2aToolInputSchema,
    output: A2aOutputSchema,
    async describe() {
      const card = await checkedCard(port, declaration);
      const skill = card.skills.find((s) => s.id === declaration.skill);
      const about = skill ? `${skill.name}: ${skill.description}` : card.description;
      return {
        description: `${card.name} (an A2A agent). ${about}`.trim(),
        inputSchema: INPUT_SCHEMA,
      };
    },
    run: (input, { key, started }) =>
      effect === "write" ? send(input, key, started) : send(input),
    ...(effect === "write"
      ? {
          query: (_input, { key }) => exchange.learn(key),
          // A task still going on when the agent answered: the run waits and polls it.
          resume: (taskId: string) => exchange.resume(taskId),
          resendSafe: declaration.dedupes ?? false,
        }
      : {}),
    ...(declaration.approval ? { approval: declaration.approval } : {}),
  });
}
