import { moduleEntry } from "../../../handlers/module-entry";
import { conversationProjectionModule } from "./module";

export const { create, handler } = moduleEntry(conversationProjectionModule);
