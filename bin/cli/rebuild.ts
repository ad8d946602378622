import { Command } from "commander";
import { DynamoStreamLister } from "../../functions/adapters/dynamodb/stream-lister";
import type { EventStore } from "../../functions/core/ports";
import type { Role } from "../../functions/core/role";
import { type FoldVerdict, foldVerdict } from "../../lib/operator/fold-groups";
import { fromSdk } from "../../lib/operator/from-sdk";
import { operatorGroups } from "../../lib/operator/groups";
import { checkFold, type RebuildProgress, rebuild } from "../../lib/operator/rebuild";
import { IncompleteFoldError, resetStates } from "../../lib/operator/rebuild-reset";
import { eventStoreOf, type OpsStack } from "../../lib/operator/stack";
import type { AggregateRef } from "../../schemas";
import { withStack } from "./ops";
import { NotFoundError, out, type Target, UsageError } from "./target";

/**
 * `agentbus rebuild <group>` and `agentbus check <group>`: feed a group every stream of an
 * aggregate type from the event store (resumable, while live traffic goes on), compare stored
 * states with the fold of their streams, and (`rebuild --reset`) rewrite the states from that
 * fold. They run the project's role (lib/operator/groups.ts) in this process, against the stack's
 * tables, for every group whose state is a fold of its streams (lib/operator/fold-groups.ts).
 */

const TYPE = /^[a-z][a-z0-9_]{0,63}$/;
/** The most streams `rebuild --reset` folds at once (it holds their events in memory). */
const RESET_LIMIT = 10_000;

type Use = "rebuild" | "check" | "rebuild --reset";

/**
 * The role the tools fold the group's streams with (lib/operator/fold-groups.ts decides from what the
 * group declares); a group they cannot run for `use` is refused, naming why.
 */
function roleOf(group: string, use: Use): { role: Role<unknown>; verdict: FoldVerdict } {
  const groups = operatorGroups();
  const declared = groups.find((g) => g.name === group);
  if (!declared)
    throw new UsageError(
      `no consumer group ${group} (groups: ${groups.map((g) => g.name).join(", ")})`,
    );
  const verdict = foldVerdict(declared);
  const why =
    verdict.refused ??
    (use === "check" ? verdict.checkRefused : undefined) ??
    (use === "rebuild --reset" ? verdict.resetRefused : undefined);
  if (why || !verdict.role) throw new UsageError(`${use} ${group}: ${why ?? "no role to run"}`);
  return { role: verdict.role, verdict };
}

/** `--type task` or `--type conversation,support_route`: the aggregate types, each checked. */
function typesOf(value: string): string[] {
  const types = value.split(",").map((t) => t.trim());
  for (const type of types)
    if (!TYPE.test(type))
      throw new UsageError(`--type ${JSON.stringify(type)} is not an aggregate type (e.g. task)`);
  return [...new Set(types)];
}

/** Every stream of the types, up to `limit`. */
async function streamsOf(stack: OpsStack, types: readonly string[], limit: number) {
  const streams: AggregateRef[] = [];
  for (const type of types)
    for await (const page of pagesOf(stack, type, undefined, 100)) {
      streams.push(...page.slice(0, limit - streams.length));
      if (streams.length >= limit) return streams;
    }
  return streams;
}

const storeOf = eventStoreOf;

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

/** Every stream of the type, page by page. */
async function* pagesOf(stack: OpsStack, type: string, after?: string, pageSize = 100) {
  const lister = new DynamoStreamLister(fromSdk(stack.dynamodb), stack.names.tables.events);
  for (let from = after; ; ) {
    const page = await lister.streamsOfType(type, from, pageSize);
    yield page.streams;
    if (!page.next) return;
    from = page.next;
  }
}

/**
 * `rebuild --reset`: every state the types' streams fold to rewritten from the fold. They are
 * folded together (a state fed by streams of several types needs all of them), so at most
 * `limit` streams.
 */
async function reset(stack: OpsStack, group: string, role: Role<unknown>, types: string[]) {
  const streams = await streamsOf(stack, types, RESET_LIMIT + 1);
  if (streams.length > RESET_LIMIT)
    throw new UsageError(
      `--reset folds at most ${RESET_LIMIT} streams at once; ${types.join(",")} has more`,
    );
  try {
    const done = await resetStates(storeOf(stack), role, streams);
    out(
      `reset ${group} (${types.join(",")}): ${streams.length} stream(s), ${done.states} state(s): ${done.rewritten} rewritten from the fold, ${done.unchanged} already the fold`,
    );
    if (done.retries > 0)
      out(`  folded again ${done.retries} time(s) after a live commit moved a state`);
  } catch (error) {
    if (error instanceof IncompleteFoldError) throw new UsageError(error.message);
    throw error;
  }
}

export function rebuildCommand(targetOf: (command: Command) => Target): Command {
  return new Command("rebuild")
    .argument("<group>", "consumer group whose states are a fold of their streams")
    .requiredOption(
      "--type <aggregate-type>",
      "the aggregate type(s) whose streams to feed, e.g. task or conversation,support_route",
    )
    .option("--restart", "start from the first stream instead of resuming")
    .option(
      "--reset",
      "rewrite each state and its checkpoints from the fold of its streams (repairs drift; safe under live traffic)",
    )
    .action(async function (
      this: Command,
      group: string,
      options: { type: string; restart?: boolean; reset?: boolean },
    ) {
      const { role } = roleOf(group, options.reset ? "rebuild --reset" : "rebuild");
      const types = typesOf(options.type);
      await withStack(targetOf(this), async (stack) => {
        if (options.reset) return reset(stack, group, role, types);
        for (const type of types) await feed(stack, group, role, type, options.restart);
      });
    });
}

/** Feed the group every stream of one type, resuming after its saved progress. */
async function feed(
  stack: OpsStack,
  group: string,
  role: Role<unknown>,
  type: string,
  restart?: boolean,
): Promise<void> {
  const store = storeOf(stack);
  const saved = restart ? undefined : await loadProgress(store, group, type);
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
}

export function checkCommand(targetOf: (command: Command) => Target): Command {
  return new Command("check")
    .argument("<group>", "consumer group whose states are a fold of their streams")
    .requiredOption(
      "--type <aggregate-type>",
      "the aggregate type(s) whose streams to fold together, e.g. task or conversation,support_route",
    )
    .option("--limit <streams>", "at most this many streams", "1000")
    .action(async function (
      this: Command,
      group: string,
      options: { type: string; limit: string },
    ) {
      const { role, verdict } = roleOf(group, "check");
      const types = typesOf(options.type);
      const type = types.join(",");
      const limit = Number(options.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 100_000)
        throw new UsageError(`--limit ${JSON.stringify(options.limit)}: 1 to 100000`);
      await withStack(targetOf(this), async (stack) => {
        const streams = await streamsOf(stack, types, limit);
        const { states, drift } = await checkFold(storeOf(stack), role, streams);
        out(
          `check ${group} (${type}): ${streams.length} stream(s), ${states} state(s), ${drift.length} drifted`,
        );
        if (verdict.outsideStreams.length > 0)
          out(
            `  note: ${group} also applies ${verdict.outsideStreams.join(", ")}, which no stream holds: a state that applied one differs from the fold`,
          );
        for (const d of drift)
          out(
            `  ${d.state.type}/${d.state.id}\n    stored ${JSON.stringify(d.stored)}\n    folded ${JSON.stringify(d.folded)}`,
          );
        if (drift.length > 0)
          throw new NotFoundError(
            `${drift.length} state(s) of ${group} differ from the fold of their streams (rebuild ${group} --type ${type} --reset rewrites them)`,
          );
      });
    });
}
