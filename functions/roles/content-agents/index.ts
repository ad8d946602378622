import * as z from "../../../schemas/zod";
import {
  AWAITING_APPROVAL,
  defineModule,
  handlerBeside,
  isInvalidOutput,
  model,
  NEEDS_HUMAN,
  raiseOn,
  type StepA2a,
  use,
} from "../../kit";
import {
  confirmTypeOf,
  contentAgentDescriptor,
  contentAgentRole,
  contentAnswer,
} from "./content-agent";
import {
  CONTENT_EVENT_TYPES,
  CONTENT_ROLE_EVENTS,
  CONTENT_ROLES,
  ContentRequest,
  type ContentRole,
  contentEventTypes,
} from "./events";
import { CONTENT_AGENT_SCRIPTS } from "./local-scripts";

/** `AGENT_CONFIRM_SECONDS`: how long a BLOCKED agent run waits for its confirmation. */
export const ContentAgentSettings = z.object({
  AGENT_CONFIRM_SECONDS: z.optional(z.coerce.number().check(z.int(), z.positive())),
});

/**
 * The content agents offered over A2A (functions/front-door/a2a): the reviewer, whose message is
 * a topic that a long-form run researches, writes and reviews; it may ask for a confirmation,
 * which the caller (or an operator) gives.
 */
const A2A_OFFERED: Partial<Record<ContentRole, StepA2a>> = {
  review: {
    description:
      "Reviews a long-form article on a topic before it is published: picks the angle, checks the claims, writes and reviews the draft, asking for a confirmation where a claim needs one.",
    workflow: "long-form",
    textInput: "topic_hint",
    examples: ["The numbers behind grid storage"],
  },
};

/**
 * One content agent (topic selection, fact check, writing, review): group = role, subscribed to
 * `<role>.requested` and `<role>.cancel.requested`. Its decision calls a model, one call per
 * invocation (a batch of them could outlast the function timeout); an agent run that gave up
 * waits for a person. It reads the run's stream (the `store` port) to find a cancel committed
 * behind a request it is about to work on.
 */
export function contentAgentModule(role: ContentRole) {
  const { requested, cancel, completed, failed } = contentEventTypes(role);
  return defineModule({
    descriptor: contentAgentDescriptor(role),
    events: CONTENT_EVENT_TYPES,
    entry: handlerBeside(import.meta.url),
    deployment: {
      delivery: "relay",
      batchSize: 1,
      functionTimeoutSeconds: 120,
      needs: { heartbeat: "events" },
      // A run that gave up on the model's answers ends NEEDS_HUMAN (its failure's code says so);
      // one that asks for a confirmation is BLOCKED on it.
      attention: [
        raiseOn(contentEventTypes(role).failed, NEEDS_HUMAN, (failed) =>
          isInvalidOutput(failed.error.code),
        ),
        raiseOn("node.blocked", AWAITING_APPROVAL),
      ],
    },
    settings: ContentAgentSettings,
    // On the local model, the agent answers with its script (./local-scripts.ts).
    uses: { model: use(model, { localScripts: { [role]: CONTENT_AGENT_SCRIPTS[role] } }) },
    modelSchemas: { [role]: contentAnswer(CONTENT_ROLE_EVENTS[role].answer) },
    // A step role under its own names (runs in flight depend on them); its role takes them, and
    // carries out map items (one agent run per item). An output a person gives for one of its
    // nodes must fit what its model must answer.
    steps: {
      input: ContentRequest,
      output: CONTENT_ROLE_EVENTS[role].answer,
      types: { requested, cancel, confirm: confirmTypeOf(role) },
      answers: { completed, failed },
      items: true,
      ...(A2A_OFFERED[role] ? { a2a: A2A_OFFERED[role] } : {}),
    },
    build: (ports, settings) =>
      contentAgentRole({
        role,
        model: ports.model,
        commandStream: ports.store,
        confirmSeconds: settings.AGENT_CONFIRM_SECONDS,
      }),
  });
}

/** The four content agents, one module each. */
export const contentAgentModules = CONTENT_ROLES.map(contentAgentModule);
