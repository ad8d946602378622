import {
  type Erasure,
  type NamedRetentionPlace,
  retentionPlaces,
} from "../../functions/core/retention";
import type { EventRegistry } from "../../schemas";

/**
 * The README's personal-data section (functions/roles/README.md, between
 * `<!-- personal-data:start -->` and `<!-- personal-data:end -->`), made from the declaration
 * (functions/core/retention.ts) and the event types' `personal` fields. `npm run schemas` writes
 * it; test/core/retention.test.ts checks the README holds it as made.
 */
export const PERSONAL_DATA_MARKERS = {
  start: "<!-- personal-data:start -->",
  end: "<!-- personal-data:end -->",
} as const;

/** The section's text (without the markers), formatted as Biome formats Markdown tables. */
export function personalDataSection(registry: EventRegistry): string {
  const places = retentionPlaces();
  const holding = places.filter((p) => p.holds !== undefined);
  const others = places.filter((p) => p.holds === undefined);
  return [
    markdownTable(
      ["Where", "Personal data", "Kept", "When the customer is erased"],
      holding.map((p) => [p.where, p.holds ?? "", keptFor(p), erasureOf(p)]),
    ),
    "",
    `Kept for their own retention, without personal data: ${others
      .map((p) => `${p.where}, ${keptFor(p)}`)
      .join("; ")}.`,
    "",
    "The personal fields, as each event type declares them (`personal` on its definition):",
    "",
    markdownTable(["Event type", "Personal fields"], personalFields(registry)),
  ].join("\n");
}

/** The README with its section replaced by `section`; throws when the markers are missing. */
export function withPersonalDataSection(readme: string, section: string): string {
  const { start, end } = PERSONAL_DATA_MARKERS;
  const from = readme.indexOf(start);
  const to = readme.indexOf(end);
  if (from < 0 || to < from)
    throw new Error(`the README has no ${start} ... ${end} block to write the table into`);
  return `${readme.slice(0, from + start.length)}\n${section}\n${readme.slice(to)}`;
}

/** The README's section as it stands (between the markers), or undefined without them. */
export function personalDataSectionOf(readme: string): string | undefined {
  const { start, end } = PERSONAL_DATA_MARKERS;
  const from = readme.indexOf(start);
  const to = readme.indexOf(end);
  if (from < 0 || to < from) return undefined;
  return readme
    .slice(from + start.length, to)
    .replace(/^\n/, "")
    .replace(/\n$/, "");
}

function keptFor(place: NamedRetentionPlace): string {
  if (place.days === undefined) return "until deleted";
  const days = place.days === 1 ? "1 day" : `${place.days} days`;
  return place.maxDays === undefined ? days : `${days} (\`agentbus:retention:${place.name}\`)`;
}

function erasureOf(place: NamedRetentionPlace): string {
  const effects: Record<Erasure, string> = {
    unreadable: "unreadable at once: the customer's key is deleted, reads show `[erased]`",
    overwritten: "overwritten with `[erased]`",
    deleted: "the customer's key is deleted",
    expires: `cannot be reached: gone after ${place.days === 1 ? "1 day" : `${place.days} days`}`,
  };
  return place.erasure ? effects[place.erasure] : "";
}

/** Each event type that declares personal fields, with them, by type (newest version's). */
function personalFields(registry: EventRegistry): string[][] {
  const byType = new Map<string, readonly string[]>();
  for (const d of registry.definitions()) if (d.personal?.length) byType.set(d.type, d.personal);
  return [...byType.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([type, fields]) => [`\`${type}\``, fields.map((f) => `\`${f}\``).join(", ")]);
}

/** A Markdown table with its columns padded to their widest cell, as Biome writes one. */
function markdownTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const width = (text: string) => [...text].length;
  const widths = header.map((h, i) => Math.max(3, width(h), ...rows.map((r) => width(r[i] ?? ""))));
  const line = (cells: readonly string[]) =>
    `| ${cells.map((c, i) => c + " ".repeat((widths[i] ?? 0) - width(c))).join(" | ")} |`;
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}
