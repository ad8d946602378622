import { audit } from "../roles/audit";
import { consumerEntry } from "./consumer";

export const { create, handler } = consumerEntry(audit);
