/**
 * The dotted-code part of an AWS error's name, shared by every adapter:
 * `ConditionalCheckFailedException` -> `conditional_check_failed`.
 */
export function snakeCase(name: string): string {
  return name
    .replace(/Exception$|Error$|Fault$/, "")
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .toLowerCase();
}
