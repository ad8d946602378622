import * as z from "../../schemas/zod";

/** Parse a function's environment (or the part of it a role reads) once, with a message that names every bad or missing variable. */
export function parseEnv<T extends z.ZodMiniType>(
  schema: T,
  env: Record<string, string | undefined>,
  what: string,
): z.output<T> {
  const result = schema.safeParse(env);
  if (!result.success) {
    throw new Error(`${what}: invalid environment\n${z.prettifyError(result.error)}`);
  }
  return result.data;
}
