/**
 * The AWS query protocol (form-encoded request, XML response) as SNS speaks it, for the one SNS
 * operation AgentBus calls (`Publish`): members flatten to `A.B=v`, lists to `A.member.N`, and the
 * SNS maps (`MessageAttributes`, `MessageSystemAttributes`) to `A.entry.N.Name` / `.Value`; a
 * result's flat members are read back as strings. The SDK's SNS client does the same from the
 * service's model; without it, this module knows which members are maps by name.
 */

const MAP_MEMBERS = new Set(["MessageAttributes", "MessageSystemAttributes", "Attributes", "Tags"]);

/** The form body of a query call. */
export function queryBody(action: string, version: string, input: object): string {
  const form = new URLSearchParams({ Action: action, Version: version });
  flatten(form, "", input);
  return form.toString();
}

function flatten(form: URLSearchParams, prefix: string, value: unknown): void {
  if (value === undefined || value === null) return;
  if (value instanceof Uint8Array) {
    form.append(prefix, Buffer.from(value).toString("base64"));
  } else if (value instanceof Date) {
    form.append(prefix, value.toISOString());
  } else if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) flatten(form, `${prefix}.member.${i + 1}`, item);
  } else if (typeof value === "object") {
    for (const [key, member] of Object.entries(value)) {
      const name = prefix ? `${prefix}.${key}` : key;
      if (MAP_MEMBERS.has(key) && member && typeof member === "object" && !Array.isArray(member)) {
        for (const [i, [entryKey, entryValue]] of Object.entries(member).entries()) {
          form.append(`${name}.entry.${i + 1}.Name`, entryKey);
          flatten(form, `${name}.entry.${i + 1}.Value`, entryValue);
        }
      } else flatten(form, name, member);
    }
  } else form.append(prefix, String(value));
}

const ENTITIES: Readonly<Record<string, string>> = {
  "&lt;": "<",
  "&gt;": ">",
  "&quot;": '"',
  "&apos;": "'",
  "&amp;": "&",
};

function unescapeXml(text: string): string {
  return text.replace(/&(?:lt|gt|quot|apos|amp|#x?[0-9a-fA-F]+);/g, (entity) => {
    const known = ENTITIES[entity];
    if (known) return known;
    const hex = entity.startsWith("&#x");
    return String.fromCodePoint(Number.parseInt(entity.slice(hex ? 3 : 2, -1), hex ? 16 : 10));
  });
}

/** The text of the first `<tag>` element of `xml`, if any. */
export function xmlText(xml: string, tag: string): string | undefined {
  const match = new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(xml);
  return match?.[1] === undefined ? undefined : unescapeXml(match[1]);
}

/** The flat members of `<ActionResult>`, as strings (`Publish`: `MessageId`, `SequenceNumber`). */
export function queryResult(action: string, xml: string): Record<string, string> {
  const result = new RegExp(`<${action}Result>([\\s\\S]*?)</${action}Result>`).exec(xml)?.[1];
  const output: Record<string, string> = {};
  for (const [, name, text] of (result ?? "").matchAll(/<(\w+)>([^<]*)<\/\1>/g))
    if (name && text !== undefined) output[name] = unescapeXml(text);
  return output;
}

/**
 * SNS error codes and the SDK's error names for them: a modelled code is named `<Code>Exception`,
 * except these; a code SNS does not model (`Throttling`, `InternalFailure`, ...) keeps its code.
 */
const SNS_NAMED: Readonly<Record<string, string>> = {
  ParameterValueInvalid: "InvalidParameterValueException",
  KMSOptInRequired: "KMSOptInRequired",
  ValidationException: "ValidationException",
};
const SNS_MODELLED = new Set(
  "AuthorizationError BatchEntryIdsNotDistinct BatchRequestTooLong ConcurrentAccess EmptyBatchRequest EndpointDisabled FilterPolicyLimitExceeded InternalError InvalidBatchEntryId InvalidParameter InvalidSecurity InvalidState KMSAccessDenied KMSDisabled KMSInvalidState KMSNotFound KMSThrottling NotFound OptedOut PlatformApplicationDisabled ReplayLimitExceeded ResourceNotFound StaleTag SubscriptionLimitExceeded TagLimitExceeded TagPolicy Throttled TooManyEntriesInBatchRequest TopicLimitExceeded UserError".split(
    " ",
  ),
);

/** The SDK's name for an SNS error code. */
export function snsErrorName(code: string): string {
  return SNS_NAMED[code] ?? (SNS_MODELLED.has(code) ? `${code}Exception` : code);
}
