import { AsyncLocalStorage } from "node:async_hooks";
import type { ModelPort } from "../../../../functions/core/model";
import type { AwsClients, LocalFunction } from "../deploy";
import type { Template } from "../template";
import type { Report } from "./events";

/**
 * One invocation of a function as fault injection sees it: which function, how often its input
 * was handed out, and what the event source mapping can do for it. Every AWS call a handler makes
 * runs inside one (the runtime's own polling, deleting and stream reading do not).
 */
export interface Invocation {
  readonly function: string;
  readonly kind: LocalFunction["kind"];
  readonly group: string;
  /** The highest receive count of the batch's messages, or the stream batch's attempt number. */
  readonly attempt: number;
  /** The SQS message ids of the batch (none for a stream or scheduled invocation). */
  readonly messageIds: readonly string[];
  /** Makes the batch's messages visible again now, as a passed visibility timeout does. */
  readonly release?: () => Promise<void>;
  /** Its process has died (`crash`): it makes no more calls and its result is thrown away. */
  crashed: boolean;
}

/** What the mapping sees of an invocation whose process died: no response, only a failure. */
export class InvocationCrash extends Error {
  override readonly name = "InvocationCrash";
}

const invocations = new AsyncLocalStorage<Invocation>();

/** The invocation the caller runs in, if any. */
export function currentInvocation(): Invocation | undefined {
  return invocations.getStore();
}

/** The process of the current invocation dies now: what it does next is refused and lost. */
export function crash(invocation: Invocation, after: string): InvocationCrash {
  invocation.crashed = true;
  return new InvocationCrash(`${invocation.function} crashed after ${after}`);
}

/**
 * What sends an SDK client's signed requests (its `requestHandler`, @smithy/node-http-handler's
 * shape): fault injection wraps it to answer as a failing service or network would.
 */
export interface HttpSender {
  handle(request: HttpRequestLike, options?: object): Promise<{ response: HttpResponseLike }>;
}
export interface HttpRequestLike {
  readonly method: string;
  readonly hostname: string;
  readonly path: string;
  readonly headers: Record<string, string>;
  /** Text (the JSON and query protocols), or bytes. */
  readonly body?: unknown;
}
export interface HttpResponseLike {
  readonly statusCode: number;
  readonly headers: Record<string, string | undefined>;
  /** A readable stream of the body, as the SDK reads it. */
  readonly body?: AsyncIterable<Uint8Array | string>;
}

/**
 * Stand-ins the handlers get, by the name of the integration each replaces (the model's always;
 * `replyChannel`, `payments`... where given), which fault injection may wrap.
 */
export interface StandIns {
  readonly model: ModelPort;
  readonly [integration: string]: unknown;
}

/**
 * Fault injection from outside the runtime (lib/dev/chaos): SDK middleware on the emulator's
 * clients or a request handler under the functions' own, wrapped stand-ins, and the runtime's
 * own decisions (lose an acknowledgement).
 */
export interface FaultInjection {
  /** The synthesized template as it is to be deployed (e.g. with shorter timeouts). */
  template?(template: Template): Template;
  /** Called once with the clients handed to every function. */
  attach?(clients: AwsClients): void;
  /**
   * The request handler of the functions' SDK clients, given the one they would use (faults at
   * their HTTP seam, below the SDK's retries). With it, the functions get SDK clients of their
   * own (../function-clients.ts) instead of the ones `attach` is given.
   */
  http?(sender: HttpSender): HttpSender;
  /** The stand-ins handed to the handlers. */
  services?(standIns: StandIns): StandIns;
  /** Whether a handled message's acknowledgement is lost (the message is delivered again). */
  loseAck?(group: string, eventId: string): boolean;
  /** Messages a mapping has just received (a stalled invocation waits for its own to come back). */
  received?(messageIds: readonly string[]): void;
  /**
   * A batch whose invocation failed as a whole comes back at once instead of after its visibility
   * timeout (minutes): the same retry, sooner, so that a schedule full of faults stays short.
   */
  readonly releaseFailedBatches?: boolean;
}

/**
 * Fault injection, as the runtime's loops consult it: a stream held back, consumer groups whose
 * workers are gone, acknowledgements to lose, and the scope of each invocation (whose process a
 * FaultInjection may crash).
 */
export class Faults {
  private paused = false;
  private readonly lostAcks = new Set<string>();
  private readonly pausedGroups = new Set<string>();

  constructor(
    private readonly report: Report,
    private readonly injection: FaultInjection = {},
  ) {}

  /** The relay (stream reading) is held back. */
  get streamPaused(): boolean {
    return this.paused;
  }

  pauseStream(): void {
    this.paused = true;
  }

  resumeStream(): void {
    this.paused = false;
  }

  /** The next successful handling of this event by this group loses its acknowledgement. */
  loseAckOnce(eventId: string, group: string): void {
    this.lostAcks.add(`${group}#${eventId}`);
  }

  /** Whether this handling is to lose its acknowledgement; the fault is used up if so. */
  takeLostAck(group: string | undefined, eventId: string): boolean {
    if (this.lostAcks.delete(`${group}#${eventId}`)) return true;
    return group !== undefined && (this.injection.loseAck?.(group, eventId) ?? false);
  }

  pauseGroup(group: string): void {
    this.pausedGroups.add(group);
    this.report({ kind: "fault", description: `paused consumer group ${group}` });
  }

  resumeGroup(group: string): void {
    this.pausedGroups.delete(group);
  }

  groupPaused(group: string): boolean {
    return this.pausedGroups.has(group);
  }

  /** Whether a batch whose invocation failed is made visible again at once (as a crashed one is). */
  get releasesFailedBatches(): boolean {
    return this.injection.releaseFailedBatches ?? false;
  }

  /** A mapping received these messages. */
  received(messageIds: readonly string[]): void {
    this.injection.received?.(messageIds);
  }

  /**
   * Run one invocation in its scope. If its process crashed meanwhile, whatever it returned or
   * threw is replaced by an InvocationCrash: the mapping saw a function that died.
   */
  async invoke<T>(invocation: Omit<Invocation, "crashed">, work: () => Promise<T>): Promise<T> {
    const scope: Invocation = { ...invocation, crashed: false };
    const died = () => new InvocationCrash(`${scope.function} crashed`);
    let result: T;
    try {
      result = await invocations.run(scope, work);
    } catch (error) {
      throw scope.crashed ? died() : error;
    }
    if (scope.crashed) throw died();
    return result;
  }
}
