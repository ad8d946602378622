/**
 * The two exports of every Lambda entry file: `create(options)`, which builds the handler with
 * explicit configuration and clients (local runtime, tests), and `handler`, the Lambda entry
 * point, built on its first invocation from the function's environment and reused afterwards
 * (clients once per container).
 */
export function lambdaEntry<O, H extends (...args: never[]) => unknown>(
  create: (options?: O) => H,
): { create: (options?: O) => H; handler: H } {
  let instance: H | undefined;
  const handler = ((...args: Parameters<H>) => {
    instance ??= create();
    return instance(...args);
  }) as H;
  return { create, handler };
}
