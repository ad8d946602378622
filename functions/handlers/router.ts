import { router } from "../roles/router";
import { consumerEntry } from "./consumer";

export const { create, handler } = consumerEntry(router);
