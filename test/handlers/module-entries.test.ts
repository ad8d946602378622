import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { use } from "../../functions/core/integration";
import { adapterProblems } from "../../functions/handlers/role-ports";
import { modelAdapter } from "../../functions/integrations/model/aws";
import { orders } from "../../functions/roles/customer-support/integrations/orders";
import { ordersAdapter } from "../../functions/roles/customer-support/integrations/orders/aws";
import { ROLE_MODULES } from "../../functions/roles/modules";
import { absoluteEntry } from "../../lib/infra/handler-entry";

process.env.POWERTOOLS_LOG_LEVEL = "SILENT";
process.env.POWERTOOLS_METRICS_DISABLED = "true";

const _ROOT = join(import.meta.dirname, "..", "..");

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
 * A module's entry passes the adapter of each integration its module uses, so that a bundle holds
 * only the adapters its role uses: the two must agree, or the entry refuses to build.
 */
describe("role module entries", () => {
  it.each(ROLE_MODULES.map((m) => [m.descriptor.group, m] as const))(
    "%s: its entry builds its handler with the adapters of the integrations it uses",
    async (group, module) => {
      const entry = (await import(pathToFileURL(absoluteEntry(module.entry) ?? "").href)) as {
        create(options: unknown): unknown;
      };
      expect(typeof entry.create({ env: envOf(group) })).toBe("function");
    },
  );

  it("names an integration without its adapter, and an adapter without its integration", () => {
    expect(adapterProblems({ orders: use(orders, { cancel: true }) }, [modelAdapter])).toEqual([
      "it uses the orders integration but its entry passes no orders adapter",
      "its entry passes the model adapter but its module does not use model",
    ]);
    expect(adapterProblems({ stock: orders }, [ordersAdapter])).toEqual([]);
    expect(adapterProblems(undefined, [])).toEqual([]);
  });
});
