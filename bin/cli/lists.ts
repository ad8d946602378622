import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { Command } from "commander";
import { backfillListKeys, type ListBackfillCounts } from "../../lib/operator/list-backfill";
import {
  checkedListFilter,
  type ListFilter,
  ListFilterError,
  type ListFilterText,
  ListPageError,
  type SummaryRow,
  summaryPage,
} from "../../lib/operator/lists";
import { withStack } from "./ops";
import { clientConfig, out, stateTable, type Target, UsageError } from "./target";
import { tenantOption } from "./tenant";

/**
 * `agentbus lists runs | conversations | tasks`: a page of the summarized states of one kind,
 * newest first, filtered by tenant, status and when they were listed (lib/operator/lists.ts).
 *
 * `agentbus lists backfill`: give the summarized states an older version wrote the keys of the
 * operator's lists (`listed_at`, `waiting_since`, and on runs `tenant_list`), so the
 * by-kind-listed, by-waiting-since and by-tenant-status indexes have them (lib/operator/list-backfill.ts). Only the
 * state table is used: --state-table, the outputs file, or with --endpoint the stage's table found
 * by ListTables.
 */

const MAX_PAGE = 10_000;

function pageLimitOf(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const limit = Number(value);
  if (!/^\d+$/.test(value) || !Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE)
    throw new UsageError(`--page-size ${JSON.stringify(value)}: a whole number, 1 to ${MAX_PAGE}`);
  return limit;
}

/** The kinds a list command lists, by its name. */
const LISTED_KINDS = { runs: "run", conversations: "conversation", tasks: "task" } as const;

const MAX_LIMIT = 1000;

interface ListOptions extends ListFilterText {
  readonly limit?: string;
  readonly page?: string;
  readonly json?: boolean;
}

/** The filter the options name, each checked before anything is read (a bad one: exit 2). */
export function listFilterOf(options: ListOptions): ListFilter {
  try {
    return checkedListFilter(options, (field) => `--${field}`);
  } catch (error) {
    if (error instanceof ListFilterError) throw new UsageError(error.message);
    throw error;
  }
}

function limitOf(value: string | undefined): number {
  if (value === undefined) return 50;
  const limit = Number(value);
  if (!/^\d+$/.test(value) || limit < 1 || limit > MAX_LIMIT)
    throw new UsageError(`--limit ${JSON.stringify(value)}: a whole number, 1 to ${MAX_LIMIT}`);
  return limit;
}

const rowText = (r: SummaryRow) =>
  [r.id, r.status, r.tenant, r.listedAt ?? "-", r.updatedAt, r.label ?? ""].join("  ").trimEnd();

function listCommand(name: keyof typeof LISTED_KINDS, targetOf: (c: Command) => Target) {
  return new Command(name)
    .description(`a page of the ${name}, newest first (by when each was first listed)`)
    .addOption(tenantOption())
    .option(
      "--status <status>",
      "only those of this status (runs with --tenant: one index Query a page)",
    )
    .option("--since <time>", "only those listed at or after this time (ISO 8601)")
    .option("--before <time>", "only those listed before this time (ISO 8601)")
    .option("--limit <n>", `how many, 1 to ${MAX_LIMIT} (default 50)`)
    .option("--page <cursor>", "the page after the one that printed this cursor")
    .option("--json", "print as JSON: { rows, next }")
    .action(async function (this: Command, options: ListOptions) {
      const filter = listFilterOf(options);
      const limit = limitOf(options.limit);
      const after = options.page;
      const page = await withStack(targetOf(this), (stack) =>
        summaryPage(stack, { kind: LISTED_KINDS[name] }, { limit, filter, after }).catch(
          (error: unknown) => {
            if (error instanceof ListPageError) throw new UsageError(`--page: ${error.message}`);
            throw error;
          },
        ),
      );
      if (options.json) {
        out(JSON.stringify(page, null, 2));
        return;
      }
      out(page.rows.length === 0 ? `no ${name} listed` : page.rows.map(rowText).join("\n"));
      if (page.next !== undefined) process.stderr.write(`next page: --page ${page.next}\n`);
    });
}

const line = (c: ListBackfillCounts, done: boolean) =>
  `lists backfill: ${c.scanned} item(s) without list keys found, ${c.updated} updated, ${c.skipped} skipped${done ? " — done" : ""}`;

export function listsCommand(targetOf: (command: Command) => Target): Command {
  const lists = new Command("lists");
  for (const name of Object.keys(LISTED_KINDS) as (keyof typeof LISTED_KINDS)[])
    lists.addCommand(listCommand(name, targetOf));
  lists
    .command("backfill")
    .description(
      "set listed_at, waiting_since (from updated_at) and a run's tenant_list on summarized states written before they existed; safe to run again",
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
