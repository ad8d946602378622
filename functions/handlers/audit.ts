import { audit } from "../roles/audit/audit";
import { consumerEntry } from "./consumer";

export const { create, handler } = consumerEntry(audit);
