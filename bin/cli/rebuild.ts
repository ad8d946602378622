import { Command } from "commander";
import { DynamoEventStore } from "../../functions/adapters/dynamodb/event-store";
import { DynamoStreamLister } from "../../functions/adapters/dynamodb/stream-lister";
import type { Role } from "../../functions/core/pipeline";
import type { EventStore } from "../../functions/core/ports";
import { fromSdk } from "../../lib/aws/from-sdk";
import { checkFold, type RebuildProgress, rebuild } from "../../lib/ops/rebuild";
import type { OpsStack } from "../../lib/ops/stack";
import { topology } from "../../lib/topology";
import { withStack } from "./ops";
import { NotFoundError, out, type Target, UsageError } from "./target";

/**
 * `agentbus rebuild <group>` and `agentbus check <group>`: feed a projection every stream of an
 * aggregate type from the event store (resumable, while live traffic goes on), and compare stored
 * states with the fold of their streams. They run the project's role (lib/topology.ts) in this
 * process, against the stack's tables.
 */

const TYPE = /^[a-z][a-z0-9_]{0,63}$/;

function roleOf(group: string): Role<unknown> {
  const found = topology.groups.find((g) => g.name === group)?.role as Role<unknown> | undefined;
  if (!found || typeof found.decide !== "function")
    throw new UsageError(
      `no consumer group ${group} with a role this tool can run (groups: ${topology.groups.map((g) => g.name).join(", ")})`,
    );
  return found;
}

function typeOf(value: string): string {
  if (!TYPE.test(value))
    throw new UsageError(`--type ${JSON.stringify(value)} is not an aggregate type (e.g. task)`);
  return value;
}

function storeOf(stack: OpsStack): DynamoEventStore {
  return new DynamoEventStore({ client: fromSdk(stack.dynamodb), tables: stack.names.tables });
}

/** Where a rebuild's progress is kept: a state item `rebuild#<group>.<type>`. */
const progressRef = (group: string, type: string) => ({ type: "rebuild", id: `${group}.${type}` });

async function loadProgress(store: EventStore, group: string, type: string) {
  const { state } = await store.load({ state: progressRef(group, type) });
  return state;
}

async function saveProgress(
  store: EventStore,
  group: string,
  type: string,
  progress: RebuildProgress,
): Promise<void> {
  const stored = await loadProgress(store, group, type);
  await store.commit({
    state: {
      aggregate: progressRef(group, type),
      expectedRevision: stored?.revision ?? 0,
      next: progress,
      version: stored?.version ?? 0,
    },
  });
}

const line = (group: string, type: string, p: RebuildProgress) =>
  `rebuild ${group} (${type}): ${p.streams} stream(s), ${p.events} event(s): ${p.applied} applied, ${p.duplicates} already applied, ${p.discarded} discarded${p.done ? " — done" : ""}`;

export function rebuildCommand(targetOf: (command: Command) => Target): Command {
  return new Command("rebuild")
    .description(
      "feed a projection every stream of an aggregate type from the event store, in version order (resumable)",
    )
    .argument("<group>", "consumer group (a projection)")
    .requiredOption(
      "--type <aggregate-type>",
      "the aggregate type whose streams to feed, e.g. task",
    )
    .option("--restart", "start from the first stream instead of resuming")
    .action(async function (
      this: Command,
      group: string,
      options: { type: string; restart?: boolean },
    ) {
      const role = roleOf(group);
      const type = typeOf(options.type);
      await withStack(targetOf(this), async (stack) => {
        const store = storeOf(stack);
        const saved = options.restart ? undefined : await loadProgress(store, group, type);
        const last = saved?.data as RebuildProgress | undefined;
        const after = last && !last.done ? last.after : undefined;
        if (after) out(`resuming after ${after}`);
        const lister = new DynamoStreamLister(fromSdk(stack.dynamodb), stack.names.tables.events);
        await rebuild(lister, store, role, type, {
          ...(after ? { after } : {}),
          onProgress: async (p) => {
            out(line(group, type, p));
            await saveProgress(store, group, type, p);
          },
        });
      });
    });
}

export function checkCommand(targetOf: (command: Command) => Target): Command {
  return new Command("check")
    .description(
      "compare a projection's stored states with the fold of their streams (state = fold(events))",
    )
    .argument("<group>", "consumer group (a projection)")
    .requiredOption(
      "--type <aggregate-type>",
      "the aggregate type whose streams to fold, e.g. task",
    )
    .option("--limit <streams>", "at most this many streams", "1000")
    .action(async function (
      this: Command,
      group: string,
      options: { type: string; limit: string },
    ) {
      const role = roleOf(group);
      const type = typeOf(options.type);
      const limit = Number(options.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 100_000)
        throw new UsageError(`--limit ${JSON.stringify(options.limit)}: 1 to 100000`);
      await withStack(targetOf(this), async (stack) => {
        const lister = new DynamoStreamLister(fromSdk(stack.dynamodb), stack.names.tables.events);
        const streams = [];
        for (let after: string | undefined; streams.length < limit; ) {
          const page = await lister.streamsOfType(
            type,
            after,
            Math.min(100, limit - streams.length),
          );
          streams.push(...page.streams);
          if (!page.next) break;
          after = page.next;
        }
        const { states, drift } = await checkFold(storeOf(stack), role, streams);
        out(
          `check ${group} (${type}): ${streams.length} stream(s), ${states} state(s), ${drift.length} drifted`,
        );
        for (const d of drift)
          out(
            `  ${d.state.type}/${d.state.id}\n    stored ${JSON.stringify(d.stored)}\n    folded ${JSON.stringify(d.folded)}`,
          );
        if (drift.length > 0)
          throw new NotFoundError(
            `${drift.length} state(s) of ${group} differ from the fold of their streams`,
          );
      });
    });
}
