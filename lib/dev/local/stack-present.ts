import { DynamoDBClient, paginateListTables } from "@aws-sdk/client-dynamodb";
import { readPublishedOutputs } from "../../operator/stack";
import { emulatorConfig } from "./deploy";

/**
 * A stack of the same name is already deployed at an emulator this process did not start. The
 * local deployer creates resources and never updates them, and nothing that was there is reset
 * unless the caller asks by name (`reset`), so deploying over it is refused.
 */
export class StackPresentError extends Error {
  constructor(
    readonly endpoint: string,
    readonly stackName: string,
    readonly evidence: string,
  ) {
    super(
      `the emulator at ${endpoint} already has ${stackName} (${evidence}); nothing was changed. ` +
        "Deploy another stage beside it (--stage <name>), or wipe the emulator first (--reset: everything in it is deleted)",
    );
    this.name = "StackPresentError";
  }
}

/** Throw StackPresentError when `stackName` has published outputs or tables at `endpoint`. */
export async function refuseIfPresent(
  endpoint: string,
  region: string,
  stackName: string,
): Promise<void> {
  const config = emulatorConfig(endpoint, region);
  if (await readPublishedOutputs(config, stackName))
    throw new StackPresentError(endpoint, stackName, "its outputs are published there");
  const dynamodb = new DynamoDBClient(config);
  try {
    for await (const page of paginateListTables({ client: dynamodb }, {})) {
      const table = page.TableNames?.find((name) => name.startsWith(`${stackName}-`));
      if (table) throw new StackPresentError(endpoint, stackName, `table ${table} exists`);
    }
  } finally {
    dynamodb.destroy();
  }
}
