import { moduleEntry } from "../../handlers/module-entry";
import { contentAdapter } from "../../integrations/content/aws";
import { modelAdapter } from "../../integrations/model/aws";
import { sideEffectsAdapter } from "../../integrations/side-effects/aws";
import { ordersAdapter } from "../customer-support/integrations/orders/aws";
import { paymentsAdapter } from "../customer-support/integrations/payments/aws";
import { refundReviewModule } from "./module";

export const { create, handler } = moduleEntry(refundReviewModule, [
  modelAdapter,
  contentAdapter,
  sideEffectsAdapter,
  ordersAdapter,
  paymentsAdapter,
]);
