import { moduleEntry } from "../../../handlers/module-entry";
import { conversationModule } from "./module";

export const { create, handler } = moduleEntry(conversationModule);
