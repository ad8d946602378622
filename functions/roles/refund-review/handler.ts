import { contentAdapter, modelAdapter, moduleEntry, sideEffectsAdapter } from "../../lambda";
import { ordersAdapter } from "../customer-support/integrations/orders/aws";
import { paymentsAdapter } from "../customer-support/integrations/payments/aws";
import { refundReviewModule } from "./index";

export const { create, handler } = moduleEntry(refundReviewModule, [
  modelAdapter,
  contentAdapter,
  sideEffectsAdapter,
  ordersAdapter,
  paymentsAdapter,
]);
