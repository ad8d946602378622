import { moduleEntry } from "../../../lambda";
import { conversationModule } from "./module";

export const { create, handler } = moduleEntry(conversationModule);
