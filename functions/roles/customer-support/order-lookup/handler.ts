import { moduleEntry } from "../../../handlers/module-entry";
import { ordersPort } from "../../../handlers/ports/orders";
import { orderLookupModule } from "./module";

export const { create, handler } = moduleEntry(orderLookupModule, { orders: ordersPort });
