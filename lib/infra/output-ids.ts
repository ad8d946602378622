/**
 * The construct and output id of a topic or consumer group: its kebab-case name in PascalCase
 * (`order-lookup` -> `OrderLookup`, whose queue's output is `OrderLookupQueueUrl`). The stack
 * names its outputs with it, and every tool that reads the outputs finds them with it.
 */
export function outputId(name: string): string {
  return name
    .split("-")
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join("");
}
