import { installLazySourceMaps } from "./source-maps";

/**
 * The two exports of every Lambda entry file: `create(options)`, which builds the handler with
 * explicit configuration and clients (local runtime, tests), and `handler`, the Lambda entry
 * point, built on its first invocation from the function's environment and reused afterwards
 * (clients once per container). The first invocation also maps stack traces to the TypeScript
 * sources from then on (functions/handlers/source-maps.ts); `create` leaves them as they are.
 */
export function lambdaEntry<O, H extends (...args: never[]) => unknown>(
  create: (options?: O) => H,
): { create: (options?: O) => H; handler: H } {
  let instance: H | undefined;
  const handler = ((...args: Parameters<H>) => {
    if (instance === undefined) {
      installLazySourceMaps();
      instance = create();
    }
    return instance(...args);
  }) as H;
  return { create, handler };
}
