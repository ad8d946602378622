import { moduleEntry } from "../../../lambda";
import { conversationProjectionModule } from "./index";

export const { create, handler } = moduleEntry(conversationProjectionModule);
