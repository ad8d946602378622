import { moduleEntry } from "../../handlers/module-entry";
import { modelPort } from "../../handlers/ports/model";
import { ordersPort } from "../../handlers/ports/orders";
import { paymentsPort } from "../../handlers/ports/payments";
import { toolPorts } from "../../handlers/ports/tools";
import { refundReviewModule } from "./module";

export const { create, handler } = moduleEntry(refundReviewModule, {
  model: modelPort,
  orders: ordersPort,
  tools: toolPorts,
  payments: paymentsPort,
});
