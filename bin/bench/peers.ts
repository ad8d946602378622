import type { FlowShape, PeerCounts } from "../../lib/dev/metering/flow-cost";
import { countDurableFlows, type DurableCount } from "./peer-durable";
import { countTransitions, definitionOf } from "./peer-step-functions";

/**
 * The peers' figures of the cost section, counted where a peer's own definition or SDK can count
 * them: Step Functions' transitions from each flow's state machine (./peer-step-functions.ts),
 * durable functions' operations and checkpoint bytes from each flow's durable
 * function run on AWS's testing SDK (./peer-durable.ts). Temporal's Actions stay assumed.
 */

/** The played flows' shapes with what the peers' tools counted for them. */
export async function withPeerCounts(shapes: readonly FlowShape[]): Promise<FlowShape[]> {
  const durable = await countDurableFlows(shapes);
  return shapes.map((shape) => {
    const definition = definitionOf(shape);
    const d: DurableCount | undefined = durable?.get(shape.flow);
    const counted: PeerCounts = {
      ...(definition ? { stepFunctions: countTransitions(definition, shape) } : {}),
      ...(d ? { durable: d } : {}),
    };
    return { ...shape, counted };
  });
}

/** Which peer figures the section counted and which it assumed. */
export function peerCountingNote(shapes: readonly FlowShape[]): string {
  const all = (has: (c: PeerCounts | undefined) => boolean) => shapes.every((s) => has(s.counted));
  const sdk = shapes.find((s) => s.counted?.durable)?.counted?.durable?.sdk;
  const counted = [
    ...(all((c) => c?.stepFunctions !== undefined)
      ? [
          "Step Functions transitions and executions (each flow's ASL, walked as the played run went)",
        ]
      : []),
    ...(all((c) => c?.durable !== undefined)
      ? [
          `durable functions operations and checkpoint bytes (each flow's durable function on ${sdk}'s local runner)`,
        ]
      : []),
  ];
  const assumed = [
    ...(all((c) => c?.stepFunctions !== undefined) ? [] : ["Step Functions transitions"]),
    ...(all((c) => c?.durable !== undefined)
      ? []
      : [
          "durable functions operations (@aws/durable-execution-sdk-js and -testing are not installed: one operation per step)",
        ]),
    "durable functions invocations (one per execution)",
    "Temporal Actions (one per Activity start)",
    "the peers' Lambda work (AgentBus's GB-seconds)",
    "the data durable functions write and retain (counted in bytes, not priced: no rate in the price sources)",
  ];
  return `  Counted: ${counted.join("; ") || "none"}. Assumed: ${assumed.join("; ")}.`;
}
