import { router } from "../roles/router";
import { plainHandler } from "./support";

/** Builds the handler with explicit configuration and clients (local runtime, tests). */
export const { create, handler } = plainHandler(router);
