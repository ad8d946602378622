import { describe, expect, it } from "vitest";
import { FEATURE_EXTENSION, servedDocument } from "../../functions/front-door/served";
import { createFrontDoorHandler } from "../../functions/handlers/front-door";
import { auditModule } from "../../functions/roles/audit/index";
import { FeatureList } from "../../functions/roles/features";
import { ROLE_MODULES } from "../../functions/roles/modules";
import { featuresOf } from "../../functions/roles/stack-features";
import * as z from "../../schemas/zod";
import { BOOKKEEPING } from "../fixtures/bookkeeping/stack";

/**
 * What a stack's roles give the front door and the console to serve (functions/roles/features.ts):
 * the reference applications' features, found from the roles' subscriptions.
 */

const descriptors = (
  modules: readonly { descriptor: { group: string; subscriptions: readonly string[] } }[],
) => modules.map((m) => m.descriptor);

describe("a stack's features", () => {
  it("are every one on the reference stack, and none on the bookkeeping application's", () => {
    expect(featuresOf(descriptors(ROLE_MODULES))).toEqual(["conversations", "runs", "tasks"]);
    expect(featuresOf(descriptors(BOOKKEEPING.roles))).toEqual([]);
  });

  it("come from the role that does the work, not from the audit group, which takes every event type", () => {
    expect(auditModule.descriptor.subscriptions).toContain("conversation.message.received");
    expect(featuresOf(descriptors([auditModule, ...BOOKKEEPING.roles]))).toEqual([]);
    const teamsOwn = { group: "inbox-triage", subscriptions: ["conversation.message.received"] };
    expect(featuresOf([teamsOwn])).toEqual(["conversations"]);
  });

  it("travel to a function as a comma list, and one that names no feature is refused, naming it", () => {
    expect(FeatureList.parse("")).toEqual([]);
    expect(FeatureList.parse("conversations, runs")).toEqual(["conversations", "runs"]);
    const refused = FeatureList.safeParse("runs,toString,chat");
    expect(refused.success).toBe(false);
    expect(z.prettifyError(refused.error as z.core.$ZodError)).toContain(
      '"toString", "chat": not a feature (features: conversations, runs, tasks)',
    );
    expect(() =>
      createFrontDoorHandler({
        env: { STATE_TABLE: "s", EVENTS_TABLE: "e", BUS_EVENTS: "b", FEATURES: "chat" },
      }),
    ).toThrow(/"chat": not a feature[\s\S]*at FEATURES/);
  });
});

describe("the OpenAPI document a deployment serves", () => {
  const document = {
    openapi: "3.1.0",
    paths: {
      "/v1/a": { get: { operationId: "a" } },
      "/v1/b": {
        servers: [{ url: "/" }],
        get: { operationId: "b", [FEATURE_EXTENSION]: "runs" },
      },
      "/v1/c": {
        get: { operationId: "c", [FEATURE_EXTENSION]: "conversations" },
        post: { operationId: "c2" },
      },
    },
  };

  it("leaves out the operations of a feature it lacks, and a path left with none", () => {
    expect(servedDocument(document, ["conversations"])).toEqual({
      openapi: "3.1.0",
      paths: { "/v1/a": document.paths["/v1/a"], "/v1/c": document.paths["/v1/c"] },
    });
    expect(servedDocument(document, []).paths).toEqual({
      "/v1/a": document.paths["/v1/a"],
      "/v1/c": { post: { operationId: "c2" } },
    });
    expect(servedDocument(document, ["conversations", "runs"])).toEqual(document);
  });
});
