import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { AwsService } from "../../../functions/adapters/aws/client";
import { endpointOf, partitionOf } from "../../../functions/adapters/aws/lean/services";
import { partitionsFileText, sdkPartitions } from "../../../lib/dev/aws-partitions";
import { SDK_CLIENTS } from "../../support/sdk-clients";

/**
 * The lean client's host names, for every region of every partition the AWS SDK v3 knows (and a
 * region of each partition it does not list yet), with and without FIPS and dual-stack, against
 * what each SDK client's own endpoint rules resolve. Resolved offline: nothing is contacted.
 */

interface EndpointProvider {
  endpointProvider(params: Record<string, unknown>, context: object): { url: URL };
}

/** What the SDK client of `service` resolves for these settings, or the error it raises. */
function sdkEndpoint(
  service: keyof typeof SDK_CLIENTS,
  region: string,
  fips: boolean,
  dualStack: boolean,
) {
  const Client = SDK_CLIENTS[service];
  const client = new Client({ region, credentials: { accessKeyId: "a", secretAccessKey: "b" } });
  try {
    const { config } = client as unknown as { config: EndpointProvider };
    return config.endpointProvider({ Region: region, UseFIPS: fips, UseDualStack: dualStack }, {})
      .url.href;
  } catch (error) {
    return `refused: ${(error as Error).message}`;
  } finally {
    client.destroy();
  }
}

function leanEndpoint(service: AwsService, region: string, fips: boolean, dualStack: boolean) {
  const env = {
    AWS_USE_FIPS_ENDPOINT: String(fips),
    AWS_USE_DUALSTACK_ENDPOINT: String(dualStack),
  };
  try {
    return endpointOf(service, region, env).href;
  } catch (error) {
    return `refused: ${(error as Error).message}`;
  }
}

/** A region name each partition's pattern takes that it does not list (a region yet to come). */
const UNLISTED: Readonly<Record<string, string>> = {
  aws: "ap-future-9",
  "aws-cn": "cn-future-9",
  "aws-eusc": "eusc-de-future-9",
  "aws-iso": "us-iso-future-9",
  "aws-iso-b": "us-isob-future-9",
  "aws-iso-e": "eu-isoe-future-9",
  "aws-iso-f": "us-isof-future-9",
  "aws-us-gov": "us-gov-future-9",
};

describe("host names from the SDK's partitions", () => {
  const partitions = sdkPartitions();

  it("ships the partitions of the SDK installed (npm run schemas writes them)", () => {
    const path = join(import.meta.dirname, "../../../functions/adapters/aws/lean/partitions.json");
    expect(readFileSync(path, "utf8")).toBe(partitionsFileText());
    expect(partitions.map((p) => p.id)).toEqual(
      expect.arrayContaining(["aws", "aws-cn", "aws-us-gov", "aws-iso", "aws-iso-b"]),
    );
    expect(partitions.length).toBeGreaterThanOrEqual(8);
  });

  it("has a region to come for each partition, taken by that partition's pattern", () => {
    expect(Object.keys(UNLISTED).sort()).toEqual(partitions.map((p) => p.id).sort());
    for (const [id, region] of Object.entries(UNLISTED)) expect(partitionOf(region).id).toBe(id);
  });

  it.each(partitions.map((p) => [p.id, p] as const))(
    "%s: every region, every service, FIPS and dual-stack, as the SDK resolves them",
    (id, partition) => {
      const regions = [...partition.regions, UNLISTED[id] as string];
      const mismatches: string[] = [];
      let compared = 0;
      for (const region of regions)
        for (const service of Object.keys(SDK_CLIENTS) as (keyof typeof SDK_CLIENTS)[])
          for (const fips of [false, true])
            for (const dualStack of [false, true]) {
              const sdk = sdkEndpoint(service, region, fips, dualStack);
              const lean = leanEndpoint(service, region, fips, dualStack);
              compared++;
              if (sdk.startsWith("refused") ? !lean.startsWith("refused") : lean !== sdk)
                mismatches.push(
                  `${service} ${region} fips=${fips} dual=${dualStack}: ${lean} vs ${sdk}`,
                );
            }
      expect(mismatches).toEqual([]);
      expect(compared).toBe(regions.length * Object.keys(SDK_CLIENTS).length * 4);
    },
  );

  it("refuses a region that cannot be part of a host name", () => {
    expect(() => endpointOf("sqs", "eu-west-1.evil.example", {})).toThrow(/not a valid host label/);
  });
});
