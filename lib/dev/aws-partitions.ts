import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { Partition } from "../../functions/adapters/aws/lean/services";

/**
 * The AWS partitions as the AWS SDK v3 clients resolve endpoints with them: the partitions file
 * of the `@aws-sdk/core` the SDK's DynamoDB client loads (its `partition()` reads the same data),
 * reduced to what an endpoint needs. `npm run schemas` writes it (`partitionsFileText`) to
 * functions/adapters/aws/lean/partitions.json for the lean client, which carries no SDK client.
 */
/** A partition as the SDK has it: every region it lists. */
export type SdkPartition = Omit<Partition, "unpatternedRegions"> & { readonly regions: string[] };

export function sdkPartitions(): SdkPartition[] {
  const require = createRequire(import.meta.url);
  const client = require.resolve("@aws-sdk/client-dynamodb");
  const core = dirname(createRequire(client).resolve("@aws-sdk/core/package.json"));
  const file = join(core, "dist-es/submodules/client/util-endpoints/lib/aws/partitions.js");
  const source = readFileSync(file, "utf8");
  const json = source.slice(source.indexOf("{"), source.lastIndexOf("}") + 1);
  const info = JSON.parse(json) as {
    partitions: {
      id: string;
      outputs: Omit<SdkPartition, "id" | "regionRegex" | "regions">;
      regionRegex: string;
      regions: Record<string, unknown>;
    }[];
  };
  return info.partitions.map((p) => ({
    id: p.id,
    dnsSuffix: p.outputs.dnsSuffix,
    dualStackDnsSuffix: p.outputs.dualStackDnsSuffix,
    supportsFIPS: p.outputs.supportsFIPS,
    supportsDualStack: p.outputs.supportsDualStack,
    regionRegex: p.regionRegex,
    regions: Object.keys(p.regions),
  }));
}

/**
 * The text of functions/adapters/aws/lean/partitions.json: each partition with only the regions
 * that no partition's pattern would put in it (what `partitionOf` must find by name), which keeps
 * every function's bundle 2 KB smaller than the whole list.
 */
export function partitionsFileText(): string {
  const partitions = sdkPartitions();
  const byPattern = (region: string) =>
    partitions.find((p) => new RegExp(p.regionRegex).test(region))?.id;
  const file: Partition[] = partitions.map(({ regions, ...partition }) => ({
    ...partition,
    unpatternedRegions: regions.filter((region) => byPattern(region) !== partition.id),
  }));
  return `${JSON.stringify(file, null, 2)}\n`;
}
