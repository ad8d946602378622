/** How times, durations and unknown numbers read on the console. */

/** An ISO 8601 time as `2026-05-01 12:00:03.120Z`; other text is shown as it is. */
export function formatTime(iso: string | undefined): string {
  if (!iso) return "—";
  return Number.isNaN(Date.parse(iso)) ? iso : iso.replace("T", " ");
}

/** `850 ms`, `12.4 s`, `3 min 05 s`, `2 h 04 min`. */
export function formatDuration(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const min = Math.floor(s / 60);
  if (min < 60) return `${min} min ${String(Math.floor(s % 60)).padStart(2, "0")} s`;
  return `${Math.floor(min / 60)} h ${String(min % 60).padStart(2, "0")} min`;
}

/** `+1.250 s` from `origin`, or the time itself when either is not a time. */
export function formatOffset(iso: string, origin: number | undefined): string {
  const at = Date.parse(iso);
  if (origin === undefined || Number.isNaN(at)) return formatTime(iso);
  const seconds = (at - origin) / 1000;
  return `${seconds < 0 ? "−" : "+"}${Math.abs(seconds).toFixed(3)} s`;
}

/** A count or "—" when it is not known. */
export function formatCount(value: number | undefined): string {
  return value === undefined || !Number.isFinite(value) ? "—" : String(value);
}
