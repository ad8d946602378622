import { moduleEntry } from "../../handlers/module-entry";
import { queueDepthPort } from "../../handlers/ports/queue-depth";
import { orchestratorModule } from "./module";

export const { create, handler } = moduleEntry(orchestratorModule, {
  orchestrates: queueDepthPort,
});
