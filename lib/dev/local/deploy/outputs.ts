import { type ResolveContext, resolve, type Template } from "../template";

/**
 * The stack's outputs as strings, resolved against what was deployed; an output about a resource
 * the emulator does not hold is left out.
 */
export function stackOutputs(template: Template, ctx: ResolveContext): Record<string, string> {
  const outputs: Record<string, string> = {};
  for (const [key, output] of Object.entries(template.Outputs ?? {})) {
    try {
      outputs[key] = String(resolve(output.Value, ctx));
    } catch {
      // an output about a resource the emulator does not hold
    }
  }
  return outputs;
}
