import { defineInfra } from "../../../lib/infra/integration-infra";
import { content } from "./index";

/** Nothing to wire: the content lives in the hub's state table, which every consumer has. */
export const contentInfra = defineInfra(content, () => {});
