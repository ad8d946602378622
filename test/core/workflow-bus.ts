import { ulid } from "ulid";
import type { DeterministicLocalModel } from "../../functions/adapters/local-model";
import type { AgentRun } from "../../functions/core/agent-run";
import { buildHeartbeat } from "../../functions/core/emit";
import { classify } from "../../functions/core/errors";
import type { RolePorts } from "../../functions/core/integration";
import { consume } from "../../functions/core/pipeline";
import type { ConsumerDeps } from "../../functions/core/ports";
import type { Role, StepStatus } from "../../functions/core/role";
import { buildRole, type RoleModule } from "../../functions/core/role-module";
import { planSweep } from "../../functions/core/sweeper";
import { agentRunKey, contentAgentRole } from "../../functions/roles/content-agents/content-agent";
import {
  CONTENT_ROLES,
  type TopicSelectionOutput,
} from "../../functions/roles/content-agents/events";
import type { OrchestratorState } from "../../functions/roles/orchestrator/state";
import { Random } from "../../lib/dev/faults/random";
import { type Envelope, registry } from "../../schemas";
import type { NodeCompleted, WorkflowEnded } from "../../schemas/events/workflow";
import type { WorkflowChildStartRequested } from "../../schemas/events/workflow-child";
import { orchestrator, referenceLocalModel } from "../support/reference";
import { makeDeps } from "./fixtures";

// ---------------------------------------------------------------------------------------------
// A tiny in-memory bus: every committed event is delivered to each group subscribed to its type
// (through `consume`, as the Lambda consumer does) until nothing is left. Transient failures are
// redelivered with a higher receive count; anything else is dead-lettered.

export interface Delivery {
  readonly group: string;
  readonly event: Envelope;
  readonly receiveCount: number;
}

export interface BusOptions {
  /** Deliver every event twice. */
  readonly duplicate?: boolean;
  /** Pick the next delivery at random (seeded) instead of in order. */
  readonly seed?: number;
  readonly maxModelAttempts?: number;
  readonly orchestrator?: Role<OrchestratorState>;
  /** Publish each role's acknowledgement (its first heartbeat, e.g. `node.started`) when a
   * delivery starts, as the consumer handler does. */
  readonly acknowledge?: boolean;
  /** How long a BLOCKED agent run waits for its confirmation. */
  readonly confirmSeconds?: number;
  /** Roles on the bus besides the orchestrator and the content agents (other step roles). */
  readonly roles?: readonly Role<unknown>[];
  /**
   * Role modules whose roles join the bus (step roles written with the kit), built on the bus's
   * store: a step role reads the run's stream for a cancel behind a request.
   */
  readonly modules?: readonly RoleModule[];
  /** The content agents' model. @default the local model with its default scripts */
  readonly model?: DeterministicLocalModel;
  /** The content agents read the run's stream for a cancel behind a request (their look-ahead). */
  readonly lookAhead?: boolean;
}

export class Bus {
  readonly model: DeterministicLocalModel;
  readonly roles: Role<unknown>[];
  readonly pending: Delivery[] = [];
  readonly handled: { group: string; type: string; status: StepStatus; reason?: string }[] = [];
  readonly deadLettered: { group: string; type: string; code: string }[] = [];
  /** The acknowledgements put on the bus (published, not appended to any stream). */
  readonly acknowledged: Envelope[] = [];
  readonly deps: ConsumerDeps;
  readonly store: ReturnType<typeof makeDeps>["store"];
  readonly clock: ReturnType<typeof makeDeps>["clock"];
  private readonly random?: () => number;

  constructor(private readonly options: BusOptions = {}) {
    const { deps, store, clock } = makeDeps();
    this.deps = deps;
    this.store = store;
    this.clock = clock;
    this.model = options.model ?? referenceLocalModel();
    const seeded = options.seed === undefined ? undefined : new Random(options.seed);
    this.random = seeded && (() => seeded.next());
    this.roles = [
      (options.orchestrator ?? orchestrator) as Role<unknown>,
      ...CONTENT_ROLES.map(
        (role) =>
          contentAgentRole({
            role,
            model: this.model,
            maxModelAttempts: options.maxModelAttempts,
            confirmSeconds: options.confirmSeconds,
            ...(options.lookAhead ? { commandStream: store } : {}),
          }) as Role<unknown>,
      ),
      ...(options.roles ?? []),
      ...(options.modules ?? []).map((m) => buildRole(m, { store } as unknown as RolePorts)),
    ];
  }

  send(event: Envelope): void {
    for (const role of this.roles) {
      if (!role.subscriptions.includes(event.event_type)) continue;
      const copies = this.options.duplicate ? 2 : 1;
      for (let i = 0; i < copies; i++)
        this.pending.push({ group: role.group, event: structuredClone(event), receiveCount: 1 });
    }
  }

  /** Deliver pending messages (those `only` accepts) until none is left; returns how many. */
  async drain(only: (d: Delivery) => boolean = () => true, limit = 2000): Promise<number> {
    let count = 0;
    for (;;) {
      const candidates = this.pending.map((d, i) => [d, i] as const).filter(([d]) => only(d));
      if (candidates.length === 0) return count;
      if (++count > limit) throw new Error("the bus did not go quiet");
      const pick = this.random ? Math.floor(this.random() * candidates.length) : 0;
      const [delivery, index] = candidates[pick] as (typeof candidates)[number];
      this.pending.splice(index, 1);
      const role = this.roles.find((r) => r.group === delivery.group);
      if (!role) throw new Error(`no role ${delivery.group}`);
      this.clock.advance(1000);
      if (this.options.acknowledge) this.acknowledge(role, delivery.event, delivery.receiveCount);
      try {
        const result = await consume(delivery.event, role, this.deps, {
          receiveCount: delivery.receiveCount,
        });
        this.handled.push({
          group: role.group,
          type: delivery.event.event_type,
          status: result.status,
          ...(result.reason === undefined ? {} : { reason: result.reason }),
        });
        for (const step of result.steps) for (const e of step.emitted) this.send(e);
      } catch (error) {
        const code = (error as { code?: string }).code ?? "unexpected";
        if (classify(error) === "transient" && delivery.receiveCount < 5)
          this.pending.push({ ...delivery, receiveCount: delivery.receiveCount + 1 });
        else this.deadLettered.push({ group: role.group, type: delivery.event.event_type, code });
      }
    }
  }

  /** The role's acknowledgement of starting on `event`, put on the bus (none when it has none). */
  private acknowledge(role: Role<unknown>, event: Envelope, receiveCount: number): void {
    const spec = role.heartbeat?.(event, receiveCount)?.first;
    if (!spec) return;
    const ack = buildHeartbeat(spec, event, role.group, this.deps, receiveCount);
    this.acknowledged.push(ack);
    this.send(ack);
  }

  /** Put what the lease sweeper would send now for the stored runs on the bus; returns them. */
  sweep(): Envelope[] {
    const plan = planSweep([...this.store.states.values()], this.clock.now(), registry);
    const sent = plan.messages.map((m) => m.envelope);
    for (const envelope of sent) this.send(envelope);
    return sent;
  }

  /** An operator's command (unsequenced, on the run's aggregate at version 0). */
  command(type: string, runId: string, payload: Record<string, unknown>): Envelope {
    const event = {
      event_id: ulid(),
      event_type: type,
      schema_version: 1,
      occurred_at: this.clock.now().toISOString(),
      correlation_id: `corr_${ulid()}`,
      causation_id: null,
      task_id: `task_${ulid()}`,
      aggregate: { type: "dag_run", id: runId, version: 0 },
      order_key: runId,
      producer: "operator-cli",
      attempt: 1,
      payload: { run_id: runId, ...payload },
    };
    const parsed = registry.parse(event);
    if (!parsed.ok) throw new Error(parsed.message);
    return parsed.envelope;
  }

  start(runId: string, workflow: string, topicHint = "energy storage in cities"): Envelope {
    const event = this.command("workflow.start.requested", runId, {
      workflow,
      request: { topic_hint: topicHint },
    });
    this.send(event);
    return event;
  }

  state(runId: string): OrchestratorState {
    const data = this.store.states.get(`dag_run#${runId}`)?.data as OrchestratorState | undefined;
    if (!data) throw new Error(`no run ${runId}`);
    return data;
  }

  /** Events of one type in commit order. */
  emitted(type: string): Envelope[] {
    return this.store.log.filter((e) => e.event_type === type);
  }

  ended(runId: string): { type: string; result: WorkflowEnded["result"] }[] {
    return this.store.log
      .filter((e) => e.event_type.startsWith("workflow.") && e.aggregate.id === runId)
      .filter((e) =>
        ["workflow.completed", "workflow.partial", "workflow.failed"].includes(e.event_type),
      )
      .map((e) => ({ type: e.event_type, result: (e.payload as WorkflowEnded).result }));
  }

  /** The child runs a run's node started, in the order it started them. */
  childRuns(runId: string, nodeId: string): string[] {
    return this.emitted("workflow.child.start.requested")
      .map((e) => e.payload as WorkflowChildStartRequested)
      .filter((p) => p.parent_run_id === runId && p.parent_node_id === nodeId)
      .map((p) => p.run_id);
  }

  /** The claims topic selection stated for a run: the fact check's map items. */
  claims(runId: string): string[] {
    return statedClaims(this.store.log, runId);
  }

  /** The agent run of an assignment: of a node, or of a map item (`item`, its index). */
  agentRun(runId: string, nodeId: string, generation = 0, item?: number): AgentRun | undefined {
    const key = agentRunKey(runId, nodeId, generation, item);
    return this.store.states.get(`agent_run#${key}`)?.data as AgentRun | undefined;
  }
}

/** The claims topic selection stated for a run in its first answer: the fact check's map items. */
export function statedClaims(log: readonly Envelope[], runId: string): string[] {
  const completed = log.find(
    (e) =>
      e.event_type === "topic_selection.completed" && (e.payload as NodeCompleted).run_id === runId,
  );
  return (
    (completed?.payload as NodeCompleted<TopicSelectionOutput> | undefined)?.output.claims ?? []
  );
}
