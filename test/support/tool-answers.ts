import type { ModelMessage } from "../../functions/kit";

/**
 * Each tool's latest answer in a conversation, by tool name: what a fixture's script on the local
 * model (a scripted stand-in, not a model) reads to take its next turn.
 */
export function toolAnswers(messages: readonly ModelMessage[]): Map<string, unknown> {
  const names = new Map<string, string>();
  const answers = new Map<string, unknown>();
  for (const m of messages) {
    for (const call of m.toolCalls ?? []) names.set(call.id, call.name);
    for (const result of m.toolResults ?? []) {
      const name = names.get(result.toolCallId);
      if (name && result.isError !== true) answers.set(name, result.content);
    }
  }
  return answers;
}
