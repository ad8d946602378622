import { moduleEntry } from "../../../lambda";
import { ordersAdapter } from "../integrations/orders/aws";
import { orderLookupModule } from "./module";

export const { create, handler } = moduleEntry(orderLookupModule, [ordersAdapter]);
