import { LocalChannel } from "../../../functions/roles/customer-support/integrations/reply-channel/memory";
import { FaultyChannel } from "../faults/channel";
import { CALL_FAULTS, callFaultOf, type FaultKind } from "../faults/kinds";
import { Random } from "../faults/random";
import type { AwsClients } from "../local/deploy";
import type { FaultInjection, HttpSender, Invocation, StandIns } from "../local/runtime/faults";
import type { Template } from "../local/template";
import { DYNAMODB_WRITES } from "../metering/metering";
import { faultyHttp } from "./http-faults";
import { channelFaults, injectFaults } from "./middleware";
import { type FaultDraws, type FaultPlan, quietPlan } from "./plan";
import type { Service } from "./sdk-errors";
import { StallingModel } from "./stalling-model";

/**
 * Faults strike a message's first deliveries only (and a stream batch's first attempts, and a
 * message's first acknowledgements by a group): they stand for trouble that passes, so a message
 * that met them twice gets through on its next delivery instead of exhausting its receives into a
 * dead-letter queue by bad luck.
 */
export const FAULTED_ATTEMPTS = 2;

/** Writes after which a process may die (the write applied, what follows it lost). */
const WRITES = new Set([
  ...DYNAMODB_WRITES,
  "SendMessage",
  "SendMessageBatch",
  "PutEvents",
  "Publish",
  "PublishBatch",
]);

/**
 * A lost visibility change only costs time (the message comes back after its visibility timeout
 * instead of its backoff), so faults thrown before sending spare these calls; a timeout after
 * they applied still strikes them.
 */
const SPARED_BEFORE_SENDING = new Set(["ChangeMessageVisibility", "ChangeMessageVisibilityBatch"]);

/** The longest visibility timeout of a queue under fault injection (seconds). */
const VISIBILITY_SECONDS = 20;

/** How long a stalled model call waits for its message to be handed out again. */
const STALL_MAX_MS = 3000;

/**
 * Decides, call by call, which fault of the current plan strikes, from the plan's seeded random
 * numbers, and counts what it injected. One injector serves a whole deployment; `begin` switches
 * it to a schedule's plan. The draws follow the order of the calls, and the runtime's pollers run
 * concurrently: replaying a seed replays its plan and workload, not each call's fate.
 */
export class FaultInjector implements FaultInjection, FaultDraws {
  readonly releaseFailedBatches = true;
  private plan: FaultPlan = quietPlan(0);
  private random = new Random(0);
  private counts = new Map<string, number>();
  private acksLost = new Map<string, number>();
  private log: string[] = [];
  private started = 0;
  private readonly waiting = new Map<string, () => void>();

  /** Faults from now on follow `plan`; the counts start again. */
  begin(plan: FaultPlan): void {
    this.plan = plan;
    this.random = new Random(plan.seed ^ 0xfa17);
    this.counts = new Map();
    this.acksLost = new Map();
    this.log = [];
    this.started = Date.now();
  }

  /** Each fault injected since `begin`, in order: when, what, where (for a failing schedule). */
  injections(): readonly string[] {
    return [...this.log];
  }

  /** No more faults; what was injected since `begin`, by `kind service-or-group`. */
  end(): Record<string, number> {
    this.plan = quietPlan(this.plan.seed);
    return this.injected();
  }

  injected(): Record<string, number> {
    return Object.fromEntries(this.counts);
  }

  /**
   * Every queue's visibility timeout at most VISIBILITY_SECONDS: a message left without a
   * visibility change (a dead-letter send that failed, a whole batch that failed) comes back in
   * seconds instead of minutes. The same retry, sooner: time compressed, not semantics.
   */
  template(template: Template): Template {
    const resources = Object.entries(template.Resources).map(([id, r]) => {
      const timeout = r.Properties?.VisibilityTimeout;
      if (r.Type !== "AWS::SQS::Queue" || typeof timeout !== "number") return [id, r];
      const shorter = Math.min(timeout, VISIBILITY_SECONDS);
      return [id, { ...r, Properties: { ...r.Properties, VisibilityTimeout: shorter } }];
    });
    return { ...template, Resources: Object.fromEntries(resources) };
  }

  attach(clients: AwsClients): void {
    injectFaults(clients.dynamodb, "dynamodb", this);
    injectFaults(clients.sqs, "sqs", this);
    injectFaults(clients.eventbridge, "eventbridge", this);
    if (clients.sns) injectFaults(clients.sns, "sns", this);
    if (clients.kms) injectFaults(clients.kms, "kms", this);
  }

  /** Faults at the HTTP seam of the functions' SDK clients (./http-faults.ts). */
  http(sender: HttpSender): HttpSender {
    return faultyHttp(sender, this);
  }

  services(standIns: StandIns): StandIns {
    const { replyChannel } = standIns;
    return {
      ...standIns,
      model: new StallingModel(standIns.model, this),
      // Only the local stand-in has faults to arm; any other channel is left as it is.
      ...(replyChannel instanceof LocalChannel
        ? { replyChannel: new FaultyChannel(replyChannel, channelFaults(this)) }
        : {}),
    };
  }

  /** The fault to throw at this call (before or after sending it), if any. */
  callFault(where: Service | "channel", operation: string, invocation: Invocation | undefined) {
    if (!this.eligible(invocation)) return undefined;
    const chances = CALL_FAULTS.map((kind) => [kind, this.plan.rates[kind]] as const);
    const kind = callFaultOf(this.random.next(), chances);
    if (!kind) return undefined;
    if (kind !== "timeout-after-apply" && SPARED_BEFORE_SENDING.has(operation)) return undefined;
    this.count(kind, where, `${invocation.function} ${operation}`);
    return kind;
  }

  /** Whether this request meets a clock skew (a refusal as signed at the wrong time). */
  skewed(where: Service, operation: string, invocation: Invocation | undefined): boolean {
    return this.strikes("clock-skew", invocation, where, operation);
  }

  /** Whether the process dies right after this applied call. */
  crashAfter(where: Service | "channel", operation: string, invocation: Invocation | undefined) {
    if (where !== "channel" && !WRITES.has(operation)) return false;
    return this.strikes("crash-after-write", invocation, invocation?.group ?? where, operation);
  }

  /** A message's acknowledgement is lost at most FAULTED_ATTEMPTS times per group, as above. */
  loseAck(group: string, eventId: string): boolean {
    const key = `${group}#${eventId}`;
    const lost = this.acksLost.get(key) ?? 0;
    if (lost >= FAULTED_ATTEMPTS || this.plan.rates["lost-ack"] === 0) return false;
    if (!this.random.chance(this.plan.rates["lost-ack"])) return false;
    this.acksLost.set(key, lost + 1);
    this.count("lost-ack", group, eventId);
    return true;
  }

  /** Whether this model call outlasts its message's visibility timeout. */
  stalls(invocation: Invocation | undefined): boolean {
    if (!invocation?.release) return false;
    return this.strikes("stall", invocation, invocation.group);
  }

  received(messageIds: readonly string[]): void {
    for (const id of messageIds) {
      this.waiting.get(id)?.();
      this.waiting.delete(id);
    }
  }

  /** Resolves when one of the messages is received again, or after STALL_MAX_MS. */
  receivedAgain(messageIds: readonly string[]): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        for (const id of messageIds) this.waiting.delete(id);
        resolve();
      };
      const timer = setTimeout(done, STALL_MAX_MS);
      for (const id of messageIds) this.waiting.set(id, done);
    });
  }

  private strikes(
    kind: FaultKind,
    invocation: Invocation | undefined,
    where: string,
    what = "",
  ): boolean {
    if (!this.eligible(invocation) || this.plan.rates[kind] === 0) return false;
    if (!this.random.chance(this.plan.rates[kind])) return false;
    this.count(kind, where, `${invocation.function} ${what} ${invocation.messageIds.join(",")}`);
    return true;
  }

  private eligible(invocation: Invocation | undefined): invocation is Invocation {
    return (
      invocation !== undefined && !invocation.crashed && invocation.attempt <= FAULTED_ATTEMPTS
    );
  }

  private count(kind: FaultKind, where: string, detail: string): void {
    this.log.push(`+${Date.now() - this.started} ms ${kind} ${where}: ${detail}`);
    const key = `${kind} ${where}`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }
}
