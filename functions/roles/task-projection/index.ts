import { defineModule } from "../../core/role-module";
import { handlerBeside } from "../../kit";
import { taskProjection } from "./task-projection";

/** The task projection: each task's view, folded from its lifecycle events. */
export const taskProjectionModule = defineModule({
  descriptor: taskProjection,
  entry: handlerBeside(import.meta.url),
  deployment: {},
  build: () => taskProjection,
});
