import { putOrders } from "../../../functions/roles/customer-support/integrations/orders/dynamodb";
import { SAMPLE_ORDERS } from "../../../functions/roles/customer-support/integrations/orders/sample-orders";
import type { PaymentsPort } from "../../../functions/roles/customer-support/integrations/payments/port";
import {
  LocalChannel,
  type LocalDelivery,
} from "../../../functions/roles/customer-support/integrations/reply-channel/memory";
import { PROJECT_INTEGRATIONS, PROJECT_STACK } from "../../infra/project";
import type { Topology } from "../../infra/topology";
import { fromSdk } from "../../operator/from-sdk";
import * as local from "./start";
import type { LocalStack } from "./synth";

/**
 * The local runtime as this repository starts it (`npm start`, the tests): the package's
 * `startLocal` (./start.ts, `agentbus/local`) with the reference stack (lib/infra/project.ts) as
 * its default, and the reference applications' stand-ins: the reply channel's LocalChannel, a
 * test's payment system, the sample orders in the orders table. Kept apart so that the package's
 * local runtime carries none of the reference applications.
 */

export interface LocalOptions extends Omit<local.LocalOptions, "stack"> {
  /** @default the reference stack (lib/infra/project.ts) */
  readonly stack?: LocalStack;
  /**
   * The reference applications' integrations on another topology than the reference stack's
   * (tests of delivery options); ignored with `stack`.
   */
  readonly topology?: Topology;
  /** Called for every reply the local channel delivers. */
  readonly onDelivery?: (delivery: LocalDelivery) => void;
  /**
   * The payment system the refund agent pays through, instead of the stack's payment stand-in
   * table (a test's LocalPayments, whose faults it controls).
   */
  readonly payments?: PaymentsPort;
}

export interface LocalEnvironment extends local.LocalEnvironment {
  /**
   * The reply channel of the sender: the LocalChannel, a stand-in that records deliveries in
   * memory (deployed stacks publish to SNS).
   */
  readonly channel: LocalChannel;
}

/** Bring up a stack locally (the reference stack unless `stack` says otherwise): ./start.ts. */
export async function startLocal(options: LocalOptions = {}): Promise<LocalEnvironment> {
  const { topology, onDelivery, payments, ...rest } = options;
  const channel = new LocalChannel({ onDelivery });
  const env = await local.startLocal({
    ...rest,
    stack:
      options.stack ??
      (topology ? { topology, integrations: PROJECT_INTEGRATIONS } : PROJECT_STACK),
    standIns: { replyChannel: channel, ...(payments ? { payments } : {}), ...options.standIns },
  });
  try {
    // The refund examples look their orders up; nothing has asked for one yet.
    const orders = env.names.tables.orders;
    if (orders) await putOrders(fromSdk(env.clients.dynamodb), orders, SAMPLE_ORDERS);
  } catch (error) {
    await env.stop();
    throw error;
  }
  return { ...env, channel };
}
