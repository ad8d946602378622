import { moduleEntry } from "../../../lambda";
import { ordersAdapter } from "../integrations/orders/aws";
import { orderLookupModule } from "./index";

export const { create, handler } = moduleEntry(orderLookupModule, [ordersAdapter]);
