import * as z from "zod/mini";
import en from "zod/v4/locales/en.js";

/**
 * zod for every schema the functions carry: zod/mini, the same validation core as zod's classic
 * API with functions in place of methods (`z.optional(s)`, `s.check(z.minLength(1))`), which
 * leaves the classic API's per-instance methods and JSON-schema conversion out of every bundle
 * (`npm run bench -- bundles`). zod/mini speaks no language until told: English messages, as the
 * classic API gives. Tools and tests may use the classic API on these schemas' values: both share
 * the core.
 */
z.config(en());

export * from "zod/mini";
/** The error class `parse` throws and `prettifyError` formats (zod/mini exports it under `core`). */
export { $ZodError } from "zod/v4/core";
