import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { portBuilderProblems } from "../../functions/handlers/role-ports";
import { ROLE_MODULES } from "../../functions/roles/modules";

process.env.POWERTOOLS_LOG_LEVEL = "SILENT";
process.env.POWERTOOLS_METRICS_DISABLED = "true";

const ROOT = join(import.meta.dirname, "..", "..");

/** Every variable any group's consumer reads, with a valid value. */
const envOf = (group: string) => ({
  GROUP_NAME: group,
  STATE_TABLE: "s",
  EVENTS_TABLE: "e",
  INBOX_TABLE: "i",
  SIDE_EFFECTS_TABLE: "x",
  ORDERS_TABLE: "o",
  PAYMENTS_TABLE: "p",
  QUEUE_URL: `http://127.0.0.1:1/000000000000/${group}.fifo`,
  DEAD_LETTER_QUEUE_URL: `http://127.0.0.1:1/000000000000/${group}-dlq.fifo`,
  MODEL_PROVIDER: "local",
  CHANNEL_PROVIDER: "local",
});

/**
 * A module's entry names the port builder of each need its module declares, so that a bundle
 * holds only the adapters its role uses: the two must agree, or the entry refuses to build.
 */
describe("role module entries", () => {
  it.each(ROLE_MODULES.map((m) => [m.descriptor.group, m] as const))(
    "%s: its entry builds its handler with the ports its needs call for",
    async (group, module) => {
      const entry = (await import(pathToFileURL(join(ROOT, module.entry)).href)) as {
        create(options: unknown): unknown;
      };
      expect(typeof entry.create({ env: envOf(group) })).toBe("function");
    },
  );

  it("names a need without its builder, and a builder without its need", () => {
    expect(portBuilderProblems({ model: true }, {})).toEqual([
      "it declares needs.model but its entry passes no model port builder (./ports)",
    ]);
    expect(portBuilderProblems({}, { orders: () => ({ get: async () => undefined }) })).toEqual([
      "its entry passes the orders port builder but it does not declare needs.orders",
    ]);
    expect(portBuilderProblems({ heartbeat: "events", dagAgent: true }, {})).toEqual([]);
  });
});
