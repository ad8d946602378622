import { describe, expect, expectTypeOf, it } from "vitest";
import {
  CONTENT_EVENT_TYPES,
  CONTENT_ROLES,
  type ContentConfirmRequested,
  type ContentNodeRequested,
  ReviewAnswer,
  ReviewOutput,
  TopicSelectionAnswer,
  TopicSelectionOutput,
} from "../../functions/roles/content-agents/events";
import { contentAgentModules } from "../../functions/roles/content-agents/index";
import { DEFINITIONS, type EventPayloads, registry } from "../../schemas";
import type { NodeCancelRequested } from "../../schemas/events/workflow-cancel";

describe("the content application's event types", () => {
  it("are its own: registered by its modules, none of them the hub's", () => {
    const types = CONTENT_EVENT_TYPES.map((d) => d.type);
    expect(types).toHaveLength(CONTENT_ROLES.length * 5);
    expect(types).toContain("fact_check.confirm.requested");
    const hubTypes = new Set<string>(DEFINITIONS.map((d) => d.type));
    expect(types.filter((t) => hubTypes.has(t))).toEqual([]);
    for (const module of contentAgentModules) expect(module.events).toEqual(CONTENT_EVENT_TYPES);
    for (const definition of CONTENT_EVENT_TYPES)
      expect(registry.get(definition.type, definition.schemaVersion)).toBe(definition);
  });

  it("carry the content request as the run's input: a command without a topic hint is refused", () => {
    const requested = registry.get("writing.requested", 1);
    const command = {
      run_id: "run_1",
      node_id: "writing",
      generation: 1,
      attempt: 1,
      input: {},
      run_input: { topic_hint: "tides" },
    };
    expect(requested?.payload.safeParse(command).success).toBe(true);
    expect(requested?.payload.safeParse({ ...command, run_input: {} }).success).toBe(false);
  });

  it("are typed through the kit's EventPayloads, in loops over the content roles", () => {
    expectTypeOf<EventPayloads["fact_check.requested"]>().toEqualTypeOf<ContentNodeRequested>();
    expectTypeOf<EventPayloads["writing.cancel.requested"]>().toEqualTypeOf<NodeCancelRequested>();
    expectTypeOf<
      EventPayloads["review.confirm.requested"]
    >().toEqualTypeOf<ContentConfirmRequested>();
    expectTypeOf<EventPayloads["topic_selection.completed"]["run_id"]>().toEqualTypeOf<string>();
  });
});

describe("the content agents' answers and what their completions carry", () => {
  const review = { approved: true, edits: 1, final_title: "T", final_body: "B" };

  it("refuses a review that does not approve without notes saying why", () => {
    const refused = ReviewAnswer.safeParse({ ...review, approved: false });
    expect(refused.success).toBe(false);
    expect(refused.error?.issues).toEqual([
      expect.objectContaining({ path: ["notes"], message: expect.stringContaining("says why") }),
    ]);
    expect(ReviewAnswer.safeParse({ ...review, approved: false, notes: "cut" }).success).toBe(true);
  });

  it("asks the model for the claims and the final body, and reads completions written without them", () => {
    const { final_body: _body, ...older } = review;
    expect(ReviewAnswer.safeParse(older).success).toBe(false);
    expect(ReviewOutput.safeParse(older).success).toBe(true);
    const topic = { topic: "T", angle: "A", sources: ["kb://s"] };
    expect(TopicSelectionAnswer.safeParse(topic).success).toBe(false);
    expect(TopicSelectionOutput.safeParse(topic).success).toBe(true);
    expect(TopicSelectionAnswer.safeParse({ ...topic, claims: [] }).success).toBe(false);
  });
});
