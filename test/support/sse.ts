/** A server-sent event as a test reads it: its name, its id and its data parsed as JSON. */
export interface ServerSentEvent<T = unknown> {
  readonly event: string;
  readonly id?: string;
  readonly data: T;
}

/**
 * Opens a stream route over HTTP and reads its server-sent events as they come: `next` gives the
 * next event (comments and the retry line skipped), `until` the first that satisfies `done`.
 */
export async function openEventStream<T = unknown>(url: string, headers: Record<string, string>) {
  const abort = new AbortController();
  const response = await fetch(url, { headers, signal: abort.signal });
  const reader = response.body?.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  const next = async (): Promise<ServerSentEvent<T>> => {
    for (;;) {
      const end = buffered.indexOf("\n\n");
      if (end >= 0) {
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const fields = Object.fromEntries(
          block.split("\n").map((line) => {
            const colon = line.indexOf(": ");
            return [line.slice(0, colon), line.slice(colon + 2)];
          }),
        );
        if (fields.event)
          return { event: fields.event, id: fields.id, data: JSON.parse(fields.data ?? "null") };
        continue;
      }
      const chunk = await reader?.read();
      if (!chunk || chunk.done) throw new Error("the stream closed");
      buffered += chunk.value;
    }
  };
  const until = async (done: (e: ServerSentEvent<T>) => boolean) => {
    for (;;) {
      const event = await next();
      if (done(event)) return event;
    }
  };
  return { response, next, until, close: () => abort.abort() };
}
