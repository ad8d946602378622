import * as z from "../../../../schemas/zod";

/** Fields that several of the application's payloads carry, each declared here once. */

/** `<task_id>:reply:<logical_attempt>`: the side-effect key of one send of a support reply. */
export const ReplyKey = z.string().check(z.minLength(1), z.maxLength(256));
