import type { ModelPort, ModelRequest, ModelResponse } from "../../../functions/core/model";

/** One model call as the local runtime saw it. */
export interface ModelCall {
  readonly role?: string;
  readonly taskId?: string;
  readonly correlationId?: string;
  readonly at: string;
}

/**
 * A model port that forwards to another one and records every call's metadata: the local runtime
 * hands it to every agent, so a run can show (and tests can assert) which requests reached a
 * model and which were discarded before.
 */
export class RecordingModel implements ModelPort {
  readonly name: string;
  private readonly log: ModelCall[] = [];

  constructor(private readonly inner: ModelPort) {
    this.name = inner.name;
  }

  converse(request: ModelRequest): Promise<ModelResponse> {
    this.log.push({
      role: request.metadata?.role,
      taskId: request.metadata?.task_id,
      correlationId: request.metadata?.correlation_id,
      at: new Date().toISOString(),
    });
    return this.inner.converse(request);
  }

  calls(filter: { role?: string; taskId?: string } = {}): ModelCall[] {
    return this.log.filter(
      (c) =>
        (filter.role === undefined || c.role === filter.role) &&
        (filter.taskId === undefined || c.taskId === filter.taskId),
    );
  }
}
