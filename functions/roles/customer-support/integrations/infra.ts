import { Construct } from "constructs";

/**
 * The construct the customer-support application's resources (orders, payment stand-in, reply
 * topic) live under, id `Support`: the same construct path as before they were integrations, so
 * that a deployed stack keeps its tables rather than replacing them.
 */
export function supportScope(stack: Construct): Construct {
  const found = stack.node.tryFindChild("Support");
  return found instanceof Construct ? found : new Construct(stack, "Support");
}
