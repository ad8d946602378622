import { taskProjection } from "../roles/task-projection/task-projection";
import { consumerEntry } from "./consumer";

export const { create, handler } = consumerEntry(taskProjection);
