import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { Command } from "commander";
import { backfillListKeys, type ListBackfillCounts } from "../../lib/operator/list-backfill";
import { clientConfig, out, stateTable, type Target, UsageError } from "./target";

/**
 * `agentbus lists backfill`: give the summarized states an older version wrote the keys of the
 * operator's lists (`listed_at`, `waiting_since`), so the by-kind-listed and by-waiting-since
 * indexes have them (lib/operator/list-backfill.ts). Only the state table is used: --state-table, the
 * outputs file, or with --endpoint the stage's table found by ListTables.
 */

const MAX_PAGE = 10_000;

function pageLimitOf(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const limit = Number(value);
  if (!/^\d+$/.test(value) || !Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE)
    throw new UsageError(`--page-size ${JSON.stringify(value)}: a whole number, 1 to ${MAX_PAGE}`);
  return limit;
}

const line = (c: ListBackfillCounts, done: boolean) =>
  `lists backfill: ${c.scanned} item(s) without list keys found, ${c.updated} updated, ${c.skipped} skipped${done ? " — done" : ""}`;

export function listsCommand(targetOf: (command: Command) => Target): Command {
  const lists = new Command("lists");
  lists
    .command("backfill")
    .description(
      "set listed_at and waiting_since (from updated_at) on summarized states written before they existed; safe to run again",
    )
    .option("--page-size <items>", `items per Scan call, 1 to ${MAX_PAGE} (default: 1 MB pages)`)
    .option("--json", "print the final counts as JSON (progress goes to stderr)")
    .action(async function (this: Command, options: { pageSize?: string; json?: boolean }) {
      const pageLimit = pageLimitOf(options.pageSize);
      const t = targetOf(this);
      const progress = (text: string) =>
        options.json ? process.stderr.write(`${text}\n`) : out(text);
      const dynamodb = new DynamoDBClient(clientConfig(t));
      try {
        const table = await stateTable(t, dynamodb);
        progress(`lists backfill: scanning ${table}`);
        const counts = await backfillListKeys(dynamodb, table, {
          ...(pageLimit !== undefined ? { pageLimit } : {}),
          onProgress: (c) => {
            progress(line(c, false));
          },
        });
        out(options.json ? JSON.stringify({ table, ...counts }, null, 2) : line(counts, true));
      } finally {
        dynamodb.destroy();
      }
    });
  return lists;
}
