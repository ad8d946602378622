import { moduleEntry } from "../../../lambda";
import { conversationModule } from "./index";

export const { create, handler } = moduleEntry(conversationModule);
