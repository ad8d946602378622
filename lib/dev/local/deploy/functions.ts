import type { Deployer, LocalFunction, Placement, ResourceInput } from "./model";
import { arnOf, generatedName } from "./naming";

/**
 * `AWS::Lambda::Function` as the runtime runs it: the handler module named by the
 * `agentbus:entry` metadata, its kind and group, its environment as strings, its timeout, and the
 * memory and architecture Lambda bills its duration at.
 */
export function functionOf(input: ResourceInput, placement: Placement): LocalFunction {
  const { logicalId, resource, props } = input;
  const name =
    (props.FunctionName as string | undefined) ?? generatedName(placement, logicalId, 64);
  const metadata = resource.Metadata ?? {};
  const entry = metadata["agentbus:entry"];
  if (typeof entry !== "string") {
    throw new Error(
      `function ${logicalId} has no agentbus:entry metadata: the local runtime cannot run it`,
    );
  }
  const variables = ((props.Environment as { Variables?: Record<string, unknown> } | undefined)
    ?.Variables ?? {}) as Record<string, unknown>;
  const group = metadata["agentbus:group"];
  return {
    logicalId,
    name,
    entry,
    kind: String(metadata["agentbus:kind"] ?? "unknown"),
    group: typeof group === "string" ? group : undefined,
    environment: Object.fromEntries(Object.entries(variables).map(([k, v]) => [k, String(v)])),
    timeoutSeconds: Number(props.Timeout ?? 3),
    memoryMb: Number(props.MemorySize ?? 128),
    architecture:
      (props.Architectures as unknown[] | undefined)?.[0] === "arm64" ? "arm64" : "x86_64",
  };
}

/** Recorded for the runtime, which runs the handler in-process; Ref is the function name. */
export const deployFunction: Deployer = async (input, ctx) => {
  const fn = functionOf(input, ctx);
  return {
    physical: { ref: fn.name, attributes: { Arn: arnOf(ctx, "lambda", `function:${fn.name}`) } },
    local: { kind: "function", value: fn },
  };
};
