import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { Partition } from "../../functions/adapters/aws/lean/services";

/**
 * The AWS partitions as the AWS SDK v3 clients resolve endpoints with them: the partitions file
 * of the `@aws-sdk/core` the SDK's DynamoDB client loads (its `partition()` reads the same data),
 * reduced to what an endpoint needs. `npm run schemas` writes it to
 * functions/adapters/aws/lean/partitions.json for the lean client, which carries no SDK client.
 */
export function sdkPartitions(): Partition[] {
  const require = createRequire(import.meta.url);
  const client = require.resolve("@aws-sdk/client-dynamodb");
  const core = dirname(createRequire(client).resolve("@aws-sdk/core/package.json"));
  const file = join(core, "dist-es/submodules/client/util-endpoints/lib/aws/partitions.js");
  const source = readFileSync(file, "utf8");
  const json = source.slice(source.indexOf("{"), source.lastIndexOf("}") + 1);
  const info = JSON.parse(json) as {
    partitions: {
      id: string;
      outputs: Omit<Partition, "id" | "regionRegex" | "regions">;
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

/** The text of functions/adapters/aws/lean/partitions.json. */
export function partitionsFileText(): string {
  return `${JSON.stringify(sdkPartitions(), null, 2)}\n`;
}
