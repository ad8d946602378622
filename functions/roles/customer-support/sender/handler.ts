import { moduleEntry } from "../../../handlers/module-entry";
import { senderModule } from "./module";

export const { create, handler } = moduleEntry(senderModule);
