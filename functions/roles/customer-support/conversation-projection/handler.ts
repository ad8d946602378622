import { moduleEntry } from "../../../lambda";
import { conversationProjectionModule } from "./module";

export const { create, handler } = moduleEntry(conversationProjectionModule);
