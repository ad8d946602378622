import { defineModule } from "../../core/role-module";
import { taskProjection } from "./task-projection";

/** The task projection: each task's view, folded from its lifecycle events. */
export const taskProjectionModule = defineModule({
  descriptor: taskProjection,
  entry: "functions/roles/task-projection/handler.ts",
  deployment: {},
  build: () => taskProjection,
});
