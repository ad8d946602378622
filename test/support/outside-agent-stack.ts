import { PutParameterCommand, SSMClient } from "@aws-sdk/client-ssm";
import { ulid } from "ulid";
import type { AwsClient } from "../../functions/adapters/aws/client";
import { fromSdk } from "../../functions/adapters/aws/sdk-client";
import type { AgentBusApp } from "../../lib/cdk";
import { type LocalEnvironment, startLocal } from "../../lib/dev/local/environment";
import { putOnBus } from "../../lib/dev/local/put-on-bus";
import type { Envelope } from "../../schemas";
import { emulator } from "./aws";

/**
 * A test stack of its own on the local stack, whose one agent calls an outside system the test
 * runs on 127.0.0.1 (an MCP server, another system's A2A agent): the system's token put in the
 * emulator's Parameter Store, the integration's adapter built as a deployed stack builds it (its
 * token read from there), and given to the runtime as the integration's stand-in (the URL the
 * role names is where the system would be deployed, not the test's).
 */

export interface OutsideAgentStack {
  readonly env: LocalEnvironment;
  stop(): Promise<void>;
}

export interface OutsideAgentStackOptions {
  readonly stack: AgentBusApp;
  /** The stage's prefix (`mcp`, `a2a`): the stage is it and a few letters of an ULID. */
  readonly stagePrefix: string;
  /** The parameter the role's use names, and the token the test's system takes. */
  readonly token: { readonly parameter: string; readonly value: string };
  /** The stand-ins by integration name, built with the emulator's SSM (the adapter's client). */
  readonly standIns: (ssm: () => AwsClient) => Readonly<Record<string, unknown>>;
}

export async function startOutsideAgentStack(
  options: OutsideAgentStackOptions,
): Promise<OutsideAgentStack> {
  const { endpoint, region, credentials } = emulator();
  const ssm = new SSMClient({ endpoint, region, credentials });
  try {
    await ssm.send(
      new PutParameterCommand({
        Name: options.token.parameter,
        Value: options.token.value,
        Type: "SecureString",
        Overwrite: true,
      }),
    );
    const env = await startLocal({
      stack: options.stack,
      endpoint,
      stage: `${options.stagePrefix}${ulid().slice(-6).toLowerCase()}`,
      standIns: options.standIns(() => fromSdk(ssm)),
    });
    return {
      env,
      async stop() {
        await env.stop();
        ssm.destroy();
      },
    };
  } catch (error) {
    ssm.destroy();
    throw error;
  }
}

/** A client's request to an agent, put on the `commands` bus as a client would; the envelope. */
export async function askAgent(
  env: LocalEnvironment,
  request: {
    readonly type: string;
    readonly orderKey: string;
    readonly aggregateType: string;
    readonly producer: string;
    readonly payload: Record<string, unknown>;
  },
): Promise<Envelope> {
  const id = ulid();
  const envelope: Envelope = {
    event_id: id,
    event_type: request.type,
    schema_version: 1,
    occurred_at: new Date().toISOString(),
    correlation_id: `corr_${id}`,
    causation_id: null,
    task_id: `task_${id}`,
    aggregate: { type: request.aggregateType, id: `req_${id}`, version: 0 },
    order_key: request.orderKey,
    producer: request.producer,
    attempt: 1,
    payload: request.payload,
  };
  await putOnBus(env, "commands", [envelope]);
  return envelope;
}
