import { classify } from "../../../functions/core/errors";
import { InMemoryEventStore } from "../../../functions/core/memory";
import { InMemoryCustomerKeys } from "../../../functions/core/personal-data/customer-keys";
import { eraseCustomer } from "../../../functions/core/personal-data/erase";
import { localKeyWrapping } from "../../../functions/core/personal-data/local-key-wrapping";
import { ERASED, Vault } from "../../../functions/core/personal-data/vault";
import { consume } from "../../../functions/core/pipeline";
import type { ConsumerDeps } from "../../../functions/core/ports";
import { appendToStream } from "../../../functions/core/producer";
import type { Role } from "../../../functions/core/role";
import { buildRole } from "../../../functions/core/role-module";
import { ManualClock } from "../../../functions/core/runtime";
import { planSweep } from "../../../functions/core/sweeper";
import { audit } from "../../../functions/roles/audit/audit";
import { CONVERSATION_AGGREGATE } from "../../../functions/roles/customer-support/conversation/conversation";
import { ordersFrom } from "../../../functions/roles/customer-support/integrations/orders/memory";
import { SAMPLE_ORDERS } from "../../../functions/roles/customer-support/integrations/orders/sample-orders";
import { LocalPayments } from "../../../functions/roles/customer-support/integrations/payments/memory";
import { LocalChannel } from "../../../functions/roles/customer-support/integrations/reply-channel/memory";
import type { ChannelPort } from "../../../functions/roles/customer-support/integrations/reply-channel/port";
import { ROLE_MODULES } from "../../../functions/roles/modules";
import { type Envelope, registry } from "../../../schemas";
import { DEFAULT_TENANT } from "../../../schemas/ids";
import { groupDefaults } from "../../infra/constructs/consumer-group-rules";
import { topology } from "../../infra/project";
import { FaultyChannel } from "../faults/channel";
import { type CallFault, callFaultOf, type FaultKind } from "../faults/kinds";
import { FaultyPayments, withNewRefundKeyPerRetry } from "../faults/payments";
import { Random, seededIds } from "../faults/random";
import { IntegrationTwins, memoryRolePorts } from "../role-kit/memory-ports";
import { FaultyStore } from "./faulty-store";
import { HeadlineJudge, JUDGE_FAULTS, withHeadlineScoring } from "./headline-scoring";
import { CHANNEL_FAULTS, PAYMENT_FAULTS, type SimPlan } from "./plan";
import { isStoreBug, type PlantedBug } from "./planted";
import { withNewKeyPerRetry } from "./planted-channel-bug";
import { withOrderBug } from "./planted-order-bug";
import { withoutRefundRecords, withRefundBug } from "./planted-refund-bugs";
import { forgettingItsRecords } from "./planted-step-bug";
import { withWorkflowBug } from "./planted-workflow-bugs";
import { bodyOf, GroupQueue, type Message, nextMessage } from "./queues";

/**
 * One simulated world: the task projection, the audit group, the orchestrator, the content
 * agents and a team's headline steps (./headline-scoring.ts, behind a faulty judge), and the
 * support conversation's groups (its sender behind a faulty reply channel, its refund agent behind
 * a faulty payment stand-in), each with its queue (FIFO behind a buffer, or standard as the
 * topology says), over one in-memory event store (the stack's tables), fed by a relay that reads the store's log (its stream) and a bus that fans every event out to the groups
 * subscribed to its type. A seeded scheduler decides everything that AWS leaves open: which message
 * goes next, when the relay runs and how much it takes, what it publishes twice, which calls fail
 * and when, which consumer stalls past its visibility timeout, when dead letters are redriven.
 */

export interface WorldOptions {
  readonly seed: number;
  readonly plan: SimPlan;
  readonly bug?: PlantedBug;
}

/**
 * The roles' settings in a simulated world, where the clock moves a second a step: short leases,
 * so that requests waiting in a busy schedule outlive theirs (the sweeper then reports them, the
 * orchestrator sends them again, and late answers meet a new assignment); replies that stay worth
 * sending for a day.
 */
const SIMULATED_SETTINGS = {
  ORCHESTRATOR_LEASE_SECONDS: "60",
  ORCHESTRATOR_QUEUED_LEASE_SECONDS: "60",
  REPLY_TTL_SECONDS: "86400",
  // No person approves anything in a simulated world: every refund goes ahead.
  REFUND_APPROVAL_ABOVE_CENTS: "100000000",
};
/** The customers the simulated conversations belong to (conversation i to customer i mod 2). */
export const SIM_CUSTOMERS = ["cust_alice", "cust_bob"] as const;

/** Steps a message stays invisible after a receive. */
const VISIBILITY = 3;
const MAX_STEPS = 20_000;

export class World {
  readonly random: Random;
  readonly clock = new ManualClock("2026-09-01T10:00:00.000Z");
  readonly memory: InMemoryEventStore;
  /** The customers' data keys: the store keeps their personal fields sealed under them. */
  readonly customerKeys = new InMemoryCustomerKeys();
  readonly vault: Vault;
  readonly store: FaultyStore;
  /** The reply channel the sender is given (faulty, and with the planted defect if any). */
  readonly channel: ChannelPort;
  /** What the reply channel delivered, by key. */
  readonly replies: LocalChannel;
  /** The orders the refund agent cancels, and the payment stand-in it refunds through. */
  readonly orders = ordersFrom(SAMPLE_ORDERS);
  readonly payments = new LocalPayments();
  /** The judge the headline scoring step calls (faulty as the plan says). */
  readonly judge: HeadlineJudge;
  readonly deps: ConsumerDeps;
  readonly roles: Role<unknown>[];
  readonly queues = new Map<string, GroupQueue>();
  /**
   * Each group's buffer queue: a standard queue the rules deliver to, unordered; the dispatcher
   * moves its messages into the FIFO queue in whatever order it receives them.
   */
  readonly buffers = new Map<string, Message[]>();
  /** Messages put on the bus from outside (commands, client messages), in order. */
  readonly external: Envelope[] = [];
  /** What the scheduler did, by kind. */
  readonly counts: Record<string, number> = {};
  /** The faults injected, by `kind where` (as the full-stack runs count them). */
  readonly injected: Record<string, number> = {};
  private relayed = 0;
  private step = 0;
  private nextId = 0;
  private readonly stalled: { message: Message; release: () => void; done: Promise<void> }[] = [];
  /** Messages from outside due later, by the step they are put on the bus at. */
  private readonly later: { step: number; envelope: Envelope }[] = [];
  /** Messages from outside put on the bus once all is quiet and nothing is due any more. */
  private readonly last: Envelope[] = [];

  constructor(private readonly options: WorldOptions) {
    this.random = new Random(options.seed);
    this.vault = new Vault({
      keys: this.customerKeys,
      wrapping: localKeyWrapping(),
      now: () => this.clock.now(),
      // A step is a second: a key kept for minutes would outlive every erasure of a schedule, and
      // nothing would read what an erasure left.
      cache: { maxAgeMs: 1_000 },
    });
    this.memory = new InMemoryEventStore(this.clock, this.vault);
    const { bug } = options;
    const storeBug = isStoreBug(bug) ? bug : undefined;
    const injected = (kind: FaultKind, where: string) => this.inject(kind, where);
    const { rates } = options.plan;
    this.store = new FaultyStore(this.memory, this.random, rates, injected, storeBug);
    this.replies = new LocalChannel({ name: "sim-channel", clock: this.clock });
    const channel = new FaultyChannel(this.replies, {
      sendFault: () => this.callFault("channel", CHANNEL_FAULTS),
    });
    this.channel = bug === "new-key-per-retry" ? withNewKeyPerRetry(channel) : channel;
    this.deps = {
      store: this.store,
      registry,
      clock: this.clock,
      ids: seededIds(this.clock, this.random),
      personalData: this.vault,
    };
    const payments = new FaultyPayments(this.payments, () =>
      this.callFault("payment", PAYMENT_FAULTS),
    );
    const twins = new IntegrationTwins({
      replyChannel: this.channel,
      orders: bug === "refund-record-unread" ? withoutRefundRecords(this.orders) : this.orders,
      payments: bug === "refund-new-key-per-retry" ? withNewRefundKeyPerRetry(payments) : payments,
    });
    this.judge = new HeadlineJudge(this.random, () => this.callFault("judge", JUDGE_FAULTS));
    const { modules, settings } = withHeadlineScoring(
      withWorkflowBug(bug, withRefundBug(bug, withOrderBug(bug, ROLE_MODULES))),
      this.judge,
      bug === "step-record-forgotten" ? forgettingItsRecords : undefined,
    );
    this.roles = modules.map((module) =>
      buildRole(module, memoryRolePorts(this.memory, module.uses, twins), {
        ...SIMULATED_SETTINGS,
        ...settings,
      }),
    );
    for (const { descriptor, deployment } of modules) {
      const { group } = descriptor;
      const ordered = topology.groups.find((g) => g.name === group)?.ordering !== "none";
      // Each queue dead-letters after its group's own receives, as the stack's redrive policy does
      // (the sender's outlast its unknown-outcome bound).
      const receives = deployment.maxReceiveCount ?? groupDefaults().maxReceiveCount;
      this.queues.set(group, new GroupQueue(group, receives, ordered));
      this.buffers.set(group, []);
    }
  }

  private count(kind: string, n = 1): void {
    this.counts[kind] = (this.counts[kind] ?? 0) + n;
  }

  /** One draw per send, refund or judge's call: each of its faults at the plan's rate for `where`. */
  private callFault(
    where: "channel" | "payment" | "judge",
    kinds: readonly CallFault[],
  ): CallFault | undefined {
    const rate = this.options.plan.rates[where];
    const fault = callFaultOf(
      this.random.next(),
      kinds.map((kind) => [kind, rate] as const),
    );
    if (fault) this.inject(fault, where);
    return fault;
  }

  private inject(kind: FaultKind, where: string): void {
    const key = `${kind} ${where}`;
    this.injected[key] = (this.injected[key] ?? 0) + 1;
  }

  /** Commit a task's lifecycle events through the producer API (its stream is the outbox). */
  async produceTask(taskId: string, steps: readonly { type: string; payload: unknown }[]) {
    let cause: Envelope | undefined;
    for (const step of steps) {
      // The producer API is outside the faults: it retries until its commit applies.
      const [event] = await appendToStream(
        { ...this.deps, store: this.memory },
        {
          aggregate: { type: "task", id: taskId },
          producer: "task-api",
          correlationId: `corr_${taskId.slice(5)}`,
          taskId,
          cause,
          decide: (state) => ({
            state: { steps: ((state?.data as { steps?: number })?.steps ?? 0) + 1 },
            emit: [step],
          }),
        },
      );
      cause = event;
    }
  }

  /** Put a message on the bus from outside the event store (a client, the CLI). */
  publishExternal(envelope: Envelope | string): void {
    if (typeof envelope !== "string") this.external.push(envelope);
    this.fanOut(envelope);
  }

  /** Put a message on the bus from outside `steps` steps from now (or once all is quiet). */
  publishLater(envelope: Envelope, steps: number): void {
    this.later.push({ step: this.step + steps, envelope });
  }

  /**
   * Put a message on the bus from outside once all is quiet and the sweeper finds nothing due
   * (every wait's time has come): a message that comes after everything it could have met.
   */
  publishLast(envelope: Envelope): void {
    this.last.push(envelope);
  }

  /** The messages from outside that are due (all of them when `all`), onto the bus. */
  private publishDue(all = false): boolean {
    const due = this.later.filter((m) => all || m.step <= this.step);
    for (const m of due) {
      this.later.splice(this.later.indexOf(m), 1);
      this.publishExternal(m.envelope);
    }
    return due.length > 0;
  }

  /** Deliver to every subscribed group's queue (EventBridge rules, one delivery per rule). */
  private fanOut(envelope: Envelope | string): void {
    const event = typeof envelope === "string" ? undefined : envelope;
    for (const role of this.roles) {
      // A poison body reaches the groups that subscribe to everything (like audit).
      if (event ? !role.subscriptions.includes(event.event_type) : role !== audit) continue;
      // The rules of the group that keeps messages match only unsequenced ones (unsequencedOnly).
      if (event && role.keepsMessages && event.aggregate.version > 0) continue;
      const message = {
        id: this.nextId++,
        group: role.group,
        messageGroup: event ? event.order_key : "poison",
        body: typeof envelope === "string" ? envelope : bodyOf(envelope),
        receiveCount: 0,
        invisibleUntil: 0,
      };
      // An unordered group's rule targets its standard queue; the others' their buffer queue.
      const queue = this.queues.get(role.group);
      if (queue && !queue.ordered) queue.send(message);
      else this.buffers.get(role.group)?.push(message);
    }
  }

  /**
   * The relay: the next part of the store's log to the bus, in order, maybe twice; sealed, as the
   * stack's relay publishes it (the groups that read the fields open them; an erased customer's
   * read `[erased]`, which "relayed erased" counts).
   */
  private async relay(): Promise<boolean> {
    const log = this.memory.log;
    if (this.relayed >= log.length) return false;
    const take = 1 + this.random.below(Math.min(10, log.length - this.relayed));
    const batch = log.slice(this.relayed, this.relayed + take);
    for (const e of batch) this.fanOut(e);
    this.count("relayed", batch.length);
    const opened = await this.memory.opened(batch);
    const erased = opened.filter((e) => Object.values(e.payload ?? {}).includes(ERASED)).length;
    if (erased > 0) this.count("relayed erased", erased);
    if (this.random.chance(this.options.plan.rates["crash-after-write relay"])) {
      for (const e of batch) this.fanOut(e);
      this.inject("crash-after-write", "relay");
    }
    this.relayed += take;
    return true;
  }

  /**
   * The lease sweeper (a schedule, every minute in the stack): what the due index lists, as the
   * sweeper plans it, onto the bus. Its ids are deterministic, so a repeated sweep repeats them.
   */
  private async sweep(): Promise<number> {
    const due = await this.memory.due(this.clock.now(), 100);
    const states = due.length > 0 ? await this.memory.loadStates(due) : [];
    const plan = planSweep(states, this.clock.now(), registry);
    for (const { envelope } of plan.messages) {
      this.external.push(envelope);
      this.fanOut(envelope);
    }
    this.count("swept", plan.messages.length);
    return plan.messages.length;
  }

  /**
   * An operator erases one of the simulated customers (functions/core/personal-data/erase.ts),
   * outside the faults, while their conversations may still be going on.
   */
  private async erase(): Promise<void> {
    const customer = this.random.pick(SIM_CUSTOMERS);
    const report = await eraseCustomer(
      {
        keys: this.customerKeys,
        store: this.memory,
        states: this.memory,
        roles: this.roles,
        conversationType: CONVERSATION_AGGREGATE,
      },
      { tenant: DEFAULT_TENANT, customer },
      { at: this.clock.now().toISOString(), by: "sim-operator" },
    );
    this.count(`erasure ${report.outcome}`);
    this.inject("erase", "operator");
  }

  /** The dispatcher: one buffered message, of any group, picked at random, into its FIFO queue. */
  private dispatch(): boolean {
    const groups = [...this.buffers].filter(([, buffered]) => buffered.length > 0);
    if (groups.length === 0) return false;
    const [group, buffered] = this.random.pick(groups);
    const [message] = buffered.splice(this.random.below(buffered.length), 1);
    if (message) this.queues.get(group)?.send(message);
    this.count("dispatched");
    return true;
  }

  /** Runs the world until nothing is left to do; dead letters are redriven once at the end. */
  async run(): Promise<void> {
    await this.settle();
    let redriven = 0;
    for (const queue of this.queues.values()) redriven += queue.redrive();
    this.count("redriven", redriven);
    if (redriven > 0) await this.settle();
  }

  private async settle(): Promise<void> {
    for (; this.step < MAX_STEPS; this.step++) {
      this.clock.advance(1000);
      await this.releaseStalled();
      this.publishDue();
      if (this.random.chance(0.05)) await this.sweep();
      const erase = this.options.plan.rates.erase;
      if (erase > 0 && this.random.chance(erase)) await this.erase();
      const roll = this.random.next();
      if (roll < 0.2 && (await this.relay())) continue;
      if (roll < 0.5 && this.dispatch()) continue;
      const next = nextMessage([...this.queues.values()], this.step, this.random);
      if (next) {
        await this.deliver(next.queue, next.message);
        continue;
      }
      if ((await this.relay()) || this.dispatch()) continue;
      if (this.stalled.length > 0) continue;
      if (![...this.queues.values()].every((q) => q.empty)) continue;
      if (this.publishDue(true)) continue;
      // Quiet: what only time can move on (a lease running out) is the sweeper's, a lease later.
      this.clock.advance(Number(SIMULATED_SETTINGS.ORCHESTRATOR_LEASE_SECONDS) * 1000);
      if ((await this.sweep()) > 0) continue;
      const last = this.last.splice(0);
      if (last.length === 0) return;
      for (const envelope of last) this.publishExternal(envelope);
    }
    throw new Error(`the world did not settle within ${MAX_STEPS} steps`);
  }

  private async deliver(queue: GroupQueue, message: Message): Promise<void> {
    queue.receive(message, this.step, VISIBILITY);
    const role = this.roles.find((r) => r.group === queue.group);
    if (!role) throw new Error(`no role for ${queue.group}`);
    this.count("deliveries");
    if (this.random.chance(this.options.plan.rates.stall)) return this.stall(queue, message, role);
    await this.handle(queue, message, role);
  }

  private async handle(queue: GroupQueue, message: Message, role: Role<unknown>): Promise<void> {
    try {
      const result = await consume(JSON.parse(message.body), role, this.deps, {
        receiveCount: message.receiveCount,
      });
      const repaired = result.steps.filter((step) => step.repaired).length;
      if (repaired > 0) this.count("gap-repaired", repaired);
    } catch (error) {
      this.count(`failed ${classify(error)}`);
      // A permanent failure goes to the dead-letter queue at once, as the consumer sends it there.
      if (classify(error) !== "transient") message.receiveCount = Number.MAX_SAFE_INTEGER;
      queue.fail(message);
      return;
    }
    if (this.random.chance(this.options.plan.rates["crash-after-write consumer"])) {
      this.inject("crash-after-write", "consumer");
      return;
    }
    queue.delete(message);
    // A standard queue is at least once: now and then a deleted message is handed out again.
    if (!queue.ordered && this.random.chance(0.1)) {
      queue.send({ ...message, id: this.nextId++, receiveCount: 0, invisibleUntil: 0 });
      this.count("standard queue duplicate");
    }
  }

  /**
   * A consumer that stalls before its commit (a model call past the visibility timeout): its
   * message becomes visible again, may be received by another consumer, and the stalled one
   * commits later.
   */
  private async stall(queue: GroupQueue, message: Message, role: Role<unknown>): Promise<void> {
    this.inject("stall", "consumer");
    let release = () => {};
    this.store.holdNextCommit = new Promise<void>((r) => {
      release = r;
    });
    const done = this.handle(queue, message, role);
    message.invisibleUntil = this.step + 1;
    this.stalled.push({ message, release, done });
    await new Promise((r) => setImmediate(r));
    // A delivery that never reached a commit (nothing to write) must not hold the next one's.
    if (this.store.holdNextCommit) {
      this.store.holdNextCommit = undefined;
      release();
    }
  }

  private async releaseStalled(): Promise<void> {
    if (this.stalled.length === 0 || !this.random.chance(0.3)) return;
    const stalled = this.stalled.splice(this.random.below(this.stalled.length), 1)[0];
    if (!stalled) return;
    stalled.release();
    await stalled.done;
  }
}
