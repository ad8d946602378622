import type { Clock } from "../../../../kit";
import { systemClock, TransientError } from "../../../../kit";
import {
  type ChannelPort,
  type ChannelQueryResult,
  ChannelRejectedError,
  type ChannelSendRequest,
  ChannelTimeoutError,
} from "./port";

/**
 * A stand-in message channel for the local runtime and tests: nothing leaves the process.
 * Deliveries are kept in memory by idempotency key, as a real channel with idempotency keys does:
 * a second send with a key already delivered delivers nothing and answers the first delivery id.
 *
 * Fault injection (`inject`), each fault used once, optionally only for one key or recipient:
 * - `timeout-after-apply`: the next send delivers, then throws ChannelTimeoutError;
 * - `timeout-before-apply`: the next send throws ChannelTimeoutError without delivering;
 * - `reject`: the next send throws ChannelRejectedError with `code` as its reason;
 * - `unavailable`: the next send throws TransientError `channel.unavailable` (nothing delivered);
 * - `delay`: the next send waits `ms` milliseconds first;
 * - `query-unknown`: the next query answers `unknown`.
 */

/** Which calls a fault applies to; with neither, the next matching call of any key. */
export interface FaultScope {
  readonly key?: string;
  readonly recipient?: string;
}

export type LocalChannelFault = (
  | { readonly kind: "timeout-after-apply" }
  | { readonly kind: "timeout-before-apply" }
  | { readonly kind: "reject"; readonly code: string }
  | { readonly kind: "unavailable" }
  | { readonly kind: "query-unknown" }
  | { readonly kind: "delay"; readonly ms: number }
) &
  FaultScope;

export interface LocalDelivery {
  readonly key: string;
  readonly recipient: string;
  readonly conversationId: string;
  readonly text: string;
  readonly deliveryId: string;
  readonly at: string;
}

export interface LocalChannelOptions {
  readonly name?: string;
  readonly clock?: Clock;
  /** Called once per delivery (not for a deduplicated resend). */
  readonly onDelivery?: (delivery: LocalDelivery) => void;
  readonly sleep?: (ms: number) => Promise<void>;
}

export class LocalChannel implements ChannelPort {
  readonly name: string;
  private readonly clock: Clock;
  private readonly onDelivery?: (delivery: LocalDelivery) => void;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly byKey = new Map<string, LocalDelivery>();
  private readonly faults: LocalChannelFault[] = [];
  private sendCalls = 0;
  private queryCalls = 0;
  private deduplicatedCalls = 0;
  private counter = 0;

  constructor(options: LocalChannelOptions = {}) {
    this.name = options.name ?? "local-channel";
    this.clock = options.clock ?? systemClock;
    this.onDelivery = options.onDelivery;
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  /** Arm a fault for the next matching call (of `fault.key` / `fault.recipient` when given). */
  inject(fault: LocalChannelFault): void {
    this.faults.push(fault);
  }

  /** Faults armed and not used yet. */
  pendingFaults(): LocalChannelFault[] {
    return [...this.faults];
  }

  /** Every delivery, in order (one per key). */
  deliveries(): LocalDelivery[] {
    return [...this.byKey.values()];
  }

  /** How many times `send` was called (deduplicated and failed calls included). */
  sends(): number {
    return this.sendCalls;
  }

  /**
   * How many sends came for a key already delivered (answered with the first delivery id): what a
   * channel without idempotency keys would have delivered a second time.
   */
  deduplicated(): number {
    return this.deduplicatedCalls;
  }

  /** How many times `query` was called. */
  queries(): number {
    return this.queryCalls;
  }

  async send(request: ChannelSendRequest): Promise<{ deliveryId: string }> {
    this.sendCalls += 1;
    const fault = this.take(
      (f) => f.kind !== "query-unknown",
      (scope) => matches(scope, request.key, request.recipient),
    );
    if (fault?.kind === "delay") await this.sleep(fault.ms);
    if (fault?.kind === "timeout-before-apply")
      throw new ChannelTimeoutError(`${this.name}: send of ${request.key} timed out (not applied)`);
    if (fault?.kind === "reject")
      throw new ChannelRejectedError(fault.code, `${this.name}: send of ${request.key} refused`);
    if (fault?.kind === "unavailable")
      throw new TransientError("channel.unavailable", `${this.name} is unavailable`);
    const delivery = this.deliver(request);
    if (fault?.kind === "timeout-after-apply")
      throw new ChannelTimeoutError(`${this.name}: send of ${request.key} timed out (applied)`);
    return { deliveryId: delivery.deliveryId };
  }

  async query(key: string): Promise<ChannelQueryResult> {
    this.queryCalls += 1;
    const delivered = this.byKey.get(key);
    const fault = this.take(
      (f) => f.kind === "query-unknown",
      (scope) => matches(scope, key, delivered?.recipient),
    );
    if (fault) return { status: "unknown" };
    return delivered
      ? { status: "delivered", deliveryId: delivered.deliveryId }
      : { status: "not_found" };
  }

  private deliver(request: ChannelSendRequest): LocalDelivery {
    const existing = this.byKey.get(request.key);
    if (existing) {
      this.deduplicatedCalls += 1;
      return existing;
    }
    this.counter += 1;
    const delivery: LocalDelivery = {
      key: request.key,
      recipient: request.recipient,
      conversationId: request.conversationId,
      text: request.text,
      deliveryId: `local-${String(this.counter).padStart(6, "0")}`,
      at: this.clock.now().toISOString(),
    };
    this.byKey.set(request.key, delivery);
    this.onDelivery?.(delivery);
    return delivery;
  }

  private take(
    kind: (fault: LocalChannelFault) => boolean,
    scope: (scope: FaultScope) => boolean,
  ): LocalChannelFault | undefined {
    const index = this.faults.findIndex((f) => kind(f) && scope(f));
    if (index < 0) return undefined;
    return this.faults.splice(index, 1)[0];
  }
}

function matches(scope: FaultScope, key: string, recipient: string | undefined): boolean {
  if (scope.key !== undefined && scope.key !== key) return false;
  if (scope.recipient !== undefined && scope.recipient !== recipient) return false;
  return true;
}
