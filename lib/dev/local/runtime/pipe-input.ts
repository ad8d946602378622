import type { Message, SendMessageCommandInput } from "@aws-sdk/client-sqs";
import type { LocalPipe } from "../deploy";

/** The event a pipe sees for an SQS message: `body` parsed when it is JSON. */
export function pipeEvent(m: Message): Record<string, unknown> {
  let body: unknown = m.Body ?? "";
  try {
    body = JSON.parse(m.Body ?? "");
  } catch {
    // not JSON: stays a string
  }
  return {
    messageId: m.MessageId,
    receiptHandle: m.ReceiptHandle,
    body,
    attributes: m.Attributes ?? {},
    eventSource: "aws:sqs",
  };
}

/**
 * What a pipe sends its target for one event: the input template shapes the body (absent: the
 * event as JSON); the group and deduplication ids come from the target parameters' JSON paths.
 */
export function pipeTargetMessage(
  pipe: LocalPipe,
  event: unknown,
  targetUrl: string,
): SendMessageCommandInput {
  return {
    QueueUrl: targetUrl,
    MessageBody: pipe.inputTemplate
      ? renderTemplate(pipe.inputTemplate, event)
      : JSON.stringify(event),
    ...(pipe.messageGroupId ? { MessageGroupId: String(valueAt(pipe.messageGroupId, event)) } : {}),
    ...(pipe.messageDeduplicationId
      ? { MessageDeduplicationId: String(valueAt(pipe.messageDeduplicationId, event)) }
      : {}),
  };
}

/** A Pipes JSON path (`$.body.detail.order_key`) or a literal. */
export function valueAt(path: string, event: unknown): unknown {
  if (!path.startsWith("$.")) return path;
  let value: unknown = event;
  for (const part of path.slice(2).split("."))
    value = (value as Record<string, unknown> | undefined)?.[part];
  if (value === undefined) throw new Error(`pipe: ${path} is not in the event`);
  return value;
}

/**
 * Pipes input templates: a `<$.path>` placeholder inside quotes takes the raw string value,
 * elsewhere the JSON of the value (so `<$.body.detail>` alone forwards the envelope as JSON).
 */
export function renderTemplate(template: string, event: unknown): string {
  return template.replace(/<(\$[^>]*)>/g, (match, path: string, offset: number) => {
    const value = valueAt(path, event);
    const quoted = template[offset - 1] === '"' && template[offset + match.length] === '"';
    return quoted && typeof value === "string" ? value : JSON.stringify(value);
  });
}
