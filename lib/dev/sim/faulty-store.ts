import { TransientError } from "../../../functions/core/errors";
import type { InMemoryEventStore } from "../../../functions/core/memory";
import type { CommitRequest, EventStore, Loaded, LoadRequest } from "../../../functions/core/ports";
import { DAG_RUN_AGGREGATE } from "../../../functions/core/sweeper";
import type { AggregateRef, Envelope } from "../../../schemas";
import type { FaultKind } from "../faults/kinds";
import type { Random } from "../faults/random";
import type { SimPlan } from "./plan";

/** A defect planted in the store, to prove the invariant checker sees what it causes. */
export type PlantedStoreBug =
  | "forgetful-inbox"
  | "wrong-stream-repair"
  /** Every state write passes its revision condition (it expects whatever is stored). */
  | "skipped-version-condition";

/** Every commit that applied: what it recorded for which group, for the invariant checker. */
export interface AppliedCommit {
  readonly group: string;
  readonly eventId: string;
  readonly outcome: string;
  readonly aggregate: AggregateRef;
  readonly version: number;
  readonly appended: readonly Envelope[];
}

/** A workflow run's state as a commit wrote it, and the event the commit applied. */
export interface RunStateWrite {
  readonly runId: string;
  readonly eventId: string | undefined;
  readonly state: unknown;
}

/**
 * The in-memory event store behind faults as DynamoDB produces them (throttling, a timeout after
 * the write applied), at the plan's rates, and optionally with a planted defect. Reports each
 * fault it injected by kind and call (`injected`).
 */
export class FaultyStore implements EventStore {
  readonly applied: AppliedCommit[] = [];
  /** Every state of a workflow run (`dag_run`) a commit wrote, in the order they applied. */
  readonly runStates: RunStateWrite[] = [];
  /** Set by the scheduler: the next commit waits for this before it applies. */
  holdNextCommit: Promise<void> | undefined;

  constructor(
    readonly inner: InMemoryEventStore,
    private readonly random: Random,
    private readonly rates: SimPlan["rates"],
    private readonly injected: (kind: FaultKind, where: "load" | "commit") => void,
    private readonly bug?: PlantedStoreBug,
  ) {}

  async load(request: LoadRequest): Promise<Loaded> {
    if (this.random.chance(this.rates["throttle load"])) {
      this.injected("throttle", "load");
      throw new TransientError("sim.load_throttled", "injected: the load was throttled");
    }
    const loaded = await this.inner.load(request);
    if (this.bug === "forgetful-inbox") return { ...loaded, inboxHit: false };
    return loaded;
  }

  readStream(stream: AggregateRef, from: number, to: number): Promise<Envelope[]> {
    if (this.bug === "wrong-stream-repair") {
      // Gap repair reads another stream of the same type (a key built from the wrong aggregate).
      const own = `${stream.type}#${stream.id}`;
      const other = [...this.inner.streams.keys()].find(
        (k) => k !== own && k.startsWith(`${stream.type}#`),
      );
      if (other)
        return this.inner.readStream(
          { type: stream.type, id: other.slice(stream.type.length + 1) },
          from,
          to,
        );
    }
    return this.inner.readStream(stream, from, to);
  }

  async commit(request: CommitRequest): Promise<void> {
    const hold = this.holdNextCommit;
    this.holdNextCommit = undefined;
    if (hold) await hold;
    if (this.random.chance(this.rates["throttle commit"])) {
      this.injected("throttle", "commit");
      throw new TransientError("sim.commit_throttled", "injected: the commit was throttled");
    }
    await this.inner.commit(this.withBug(request));
    if (request.state?.aggregate.type === DAG_RUN_AGGREGATE)
      this.runStates.push({
        runId: request.state.aggregate.id,
        eventId: request.inbox?.eventId,
        state: request.state.next,
      });
    if (request.inbox) {
      this.applied.push({
        group: request.inbox.group,
        eventId: request.inbox.eventId,
        outcome: request.inbox.outcome,
        aggregate: request.inbox.aggregate,
        version: request.inbox.version,
        appended: request.append ?? [],
      });
    }
    if (this.random.chance(this.rates["timeout-after-apply commit"])) {
      this.injected("timeout-after-apply", "commit");
      throw new TransientError(
        "sim.commit_timeout",
        "injected: the commit applied, its answer was lost",
      );
    }
  }

  /** The request as the planted defect would send it. */
  private withBug(request: CommitRequest): CommitRequest {
    if (this.bug === "skipped-version-condition" && request.state) {
      const stored = this.inner.states.get(
        `${request.state.aggregate.type}#${request.state.aggregate.id}`,
      );
      return { ...request, state: { ...request.state, expectedRevision: stored?.revision ?? 0 } };
    }
    if (this.bug === "forgetful-inbox" && request.inbox) {
      // The dedup row is written under a key of its own each time, so it never conflicts.
      const { inbox } = request;
      return {
        ...request,
        inbox: { ...inbox, eventId: `${inbox.eventId}-${this.applied.length}` },
      };
    }
    return request;
  }
}
