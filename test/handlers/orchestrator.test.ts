import { describe, expect, it } from "vitest";
import { createModuleHandler } from "../../functions/handlers/module-entry";
import { queueDepthAdapter } from "../../functions/integrations/queue-depth/aws";
import { workflowRegistryAdapter } from "../../functions/integrations/workflow-registry/aws";
import { orchestratorModule } from "../../functions/roles/orchestrator/index";

const createOrchestratorHandler = (options: { env: Record<string, string> }) =>
  createModuleHandler(orchestratorModule, options, [queueDepthAdapter, workflowRegistryAdapter]);

process.env.POWERTOOLS_LOG_LEVEL = "SILENT";
process.env.POWERTOOLS_METRICS_DISABLED = "true";

/** The orchestrator handler's own environment (on top of the consumer's). */
const base = {
  GROUP_NAME: "orchestrator",
  STATE_TABLE: "s",
  EVENTS_TABLE: "e",
  INBOX_TABLE: "i",
  QUEUE_URL: "http://127.0.0.1:1/000000000000/orchestrator.fifo",
  DEAD_LETTER_QUEUE_URL: "http://127.0.0.1:1/000000000000/orchestrator-dlq.fifo",
};

describe("orchestrator handler environment", () => {
  it("builds without the queue-depth settings (no gate) and with valid ones", () => {
    expect(typeof createOrchestratorHandler({ env: base })).toBe("function");
    expect(
      typeof createOrchestratorHandler({
        env: {
          ...base,
          AGENT_QUEUE_URLS: JSON.stringify({ writing: "http://127.0.0.1:1/0/writing.fifo" }),
          QUEUE_DEPTH_THRESHOLD: "50",
          ORCHESTRATOR_LEASE_SECONDS: "120",
        },
      }),
    ).toBe("function");
  });

  it("names AGENT_QUEUE_URLS that is not a JSON object of URLs, and a bad threshold or lease", () => {
    expect(() => createOrchestratorHandler({ env: { ...base, AGENT_QUEUE_URLS: "{" } })).toThrow(
      /AGENT_QUEUE_URLS/,
    );
    expect(() =>
      createOrchestratorHandler({
        env: { ...base, AGENT_QUEUE_URLS: JSON.stringify({ writing: "not a url" }) },
      }),
    ).toThrow(/AGENT_QUEUE_URLS/);
    expect(() =>
      createOrchestratorHandler({ env: { ...base, QUEUE_DEPTH_THRESHOLD: "0" } }),
    ).toThrow(/QUEUE_DEPTH_THRESHOLD/);
    expect(() =>
      createOrchestratorHandler({ env: { ...base, ORCHESTRATOR_LEASE_SECONDS: "-1" } }),
    ).toThrow(/ORCHESTRATOR_LEASE_SECONDS/);
  });
});
