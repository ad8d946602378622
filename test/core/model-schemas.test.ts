import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ANSWER_SCHEMA, defineAgent } from "../../functions/core/agent/agent";
import { InMemoryContentStore } from "../../functions/core/agent/content";
import { defineTool, toolSpecOf } from "../../functions/core/agent/tool";
import { usesOf } from "../../functions/core/integration";
import { jsonSchemaOf } from "../../functions/core/model-schema-export";
import { modelSchemaOf, toolSchemaName } from "../../functions/core/model-schemas";
import { InMemorySideEffects } from "../../functions/core/side-effects";
import { model } from "../../functions/integrations/model";
import { ordersFrom } from "../../functions/roles/customer-support/integrations/orders/memory";
import { SAMPLE_ORDERS } from "../../functions/roles/customer-support/integrations/orders/sample-orders";
import { LocalPayments } from "../../functions/roles/customer-support/integrations/payments/memory";
import { ROLE_MODULES } from "../../functions/roles/modules";
import { refundReviewModule } from "../../functions/roles/refund-review/index";
import refundSchemas from "../../functions/roles/refund-review/model-schemas.json";
import {
  DEFAULT_REFUND_SETTINGS,
  RefundAnswer,
  refundAgent,
} from "../../functions/roles/refund-review/refund-agent";
import { modelSchemaFiles } from "../../lib/dev/model-schema-files";
import { modelSchemasJson } from "../../lib/testing";
import * as z from "../../schemas/zod";
import { referenceLocalModel } from "../support/reference";

/**
 * What a role shows its model is generated from its zod schemas into its folder's
 * model-schemas.json (functions/core/model-schemas.ts): the committed files are current, and an
 * agent's tools and answer are read from them.
 */

const root = join(import.meta.dirname, "..", "..");

describe("model-schemas.json (npm run schemas)", () => {
  it("each role folder's file is what its modules' modelSchemas give", () => {
    const files = modelSchemaFiles(ROLE_MODULES);
    expect(Object.keys(files).sort()).toEqual([
      "functions/roles/content-agents/model-schemas.json",
      "functions/roles/customer-support/reply-generation/model-schemas.json",
      "functions/roles/refund-review/model-schemas.json",
    ]);
    for (const [path, text] of Object.entries(files))
      expect(readFileSync(join(root, path), "utf8"), `${path}: run npm run schemas`).toBe(text);
  });

  it("an application writes its agent's file from its module with agentbus/testing's modelSchemasJson", () => {
    const text = modelSchemasJson([refundReviewModule]);
    expect(JSON.parse(text)).toEqual(refundSchemas);
    expect(text.endsWith("}\n")).toBe(true);
    const clash = { modelSchemas: { answer: z.string() } };
    expect(() =>
      modelSchemasJson([clash, { modelSchemas: { answer: z.number() } }], "x.json"),
    ).toThrow("x.json: two modules declare answer differently");
  });

  it("every module that calls a model declares what it shows the model", () => {
    for (const module of ROLE_MODULES) {
      const callsModel = usesOf(module.uses).some(([, use]) => use.integration === model);
      expect(
        module.modelSchemas !== undefined,
        `${module.descriptor.group} calls a model: ${callsModel}`,
      ).toBe(callsModel);
    }
  });

  it("the refund agent shows the model each tool's input and its answer, as the zod schemas say", () => {
    const agent = refundAgent(
      {
        conversation: async () => [],
        conversationNow: async () => ({ version: 0, context: () => [] }),
        model: referenceLocalModel(),
        content: new InMemoryContentStore(),
        sideEffects: new InMemorySideEffects(),
        orders: ordersFrom(SAMPLE_ORDERS),
        payments: new LocalPayments(),
      },
      DEFAULT_REFUND_SETTINGS,
    );
    expect(agent.schemas[ANSWER_SCHEMA]).toStrictEqual(jsonSchemaOf(RefundAnswer));
    for (const tool of agent.tools)
      expect(toolSpecOf(tool, refundSchemas).inputSchema, tool.name).toStrictEqual(
        jsonSchemaOf(tool.input),
      );
    expect(Object.keys(refundSchemas).sort()).toEqual(
      [ANSWER_SCHEMA, ...agent.tools.map((t) => toolSchemaName(t.name))].sort(),
    );
  });

  it("an agent whose tool has no schema in its book is refused at definition, naming the fix", () => {
    const ghost = defineTool({
      name: "ghost",
      description: "Not in the book.",
      effect: "read",
      input: z.object({}),
      output: z.object({}),
      run: async () => ({}),
    });
    expect(() =>
      defineAgent({
        name: "refund-review",
        instructions: "x",
        tools: [ghost],
        output: RefundAnswer,
        schemas: refundSchemas,
        maxTurns: 3,
      }),
    ).toThrow(/no JSON Schema "tool:ghost" in its model-schemas.json.*npm run schemas/);
    expect(() => modelSchemaOf({}, "reply_draft", "reply-generation")).toThrow(
      /reply-generation has no JSON Schema "reply_draft"/,
    );
  });
});
