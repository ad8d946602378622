import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { listingAfter } from "../../functions/core/listing";
import { consume } from "../../functions/core/pipeline";
import type { StateListing, StateSummary } from "../../functions/core/ports";
import { taskProjection } from "../../functions/roles/task-projection/task-projection";
import { makeDeps, seedTask } from "./fixtures";

const at = (s: number) => new Date(Date.UTC(2026, 11, 1, 10, 0, s));
const summary = (waiting?: string): StateSummary => ({
  kind: "conversation",
  status: "open",
  ...(waiting === undefined ? {} : { waiting }),
});

describe("listingAfter", () => {
  it("lists a state when it is first summarized, and since then while it waits", () => {
    expect(listingAfter(undefined, summary(), at(0))).toEqual({ listedAt: at(0).toISOString() });
    expect(listingAfter(undefined, summary("held_reply"), at(1))).toEqual({
      listedAt: at(1).toISOString(),
      waiting: "held_reply",
      waitingSince: at(1).toISOString(),
    });
    expect(listingAfter({ listedAt: at(0).toISOString() }, undefined, at(2))).toBeUndefined();
  });

  it("keeps the previous listing itself while the state waits for the same thing", () => {
    const waiting = listingAfter(undefined, summary("held_reply"), at(0)) as StateListing;
    expect(listingAfter(waiting, summary("held_reply"), at(9))).toBe(waiting);
    const idle = listingAfter(undefined, summary(), at(0)) as StateListing;
    expect(
      listingAfter(idle, { ...summary(), status: "closed", counts: { turns: 3 } }, at(9)),
    ).toBe(idle);
  });

  it("restarts the wait when what the state waits for changes, and keeps when it was listed", () => {
    const first = listingAfter(undefined, summary("held_reply"), at(0)) as StateListing;
    const other = listingAfter(first, summary("needs_human"), at(5));
    expect(other).toEqual({
      listedAt: at(0).toISOString(),
      waiting: "needs_human",
      waitingSince: at(5).toISOString(),
    });
    expect(listingAfter(other, summary(), at(7))).toEqual({ listedAt: at(0).toISOString() });
  });

  it("over any sequence of summaries: listed once, and each wait since its start", () => {
    const step = fc.option(
      fc.option(fc.constantFrom("held_reply", "needs_human"), { nil: undefined }),
    );
    fc.assert(
      fc.property(fc.array(step, { maxLength: 30 }), (steps) => {
        let listing: StateListing | undefined;
        let listedSince: number | undefined;
        let waitStart: number | undefined;
        steps.forEach((s, i) => {
          // null: not summarized; otherwise a summary waiting for s (undefined: for nothing).
          const next = s === null ? undefined : summary(s);
          const previous = listing;
          listing = listingAfter(listing, next, at(i));
          if (next === undefined) {
            expect(listing).toBeUndefined();
            listedSince = undefined;
            waitStart = undefined;
            return;
          }
          listedSince ??= i;
          if (next.waiting !== previous?.waiting) waitStart = next.waiting ? i : undefined;
          expect(listing?.listedAt).toBe(at(listedSince).toISOString());
          expect(listing?.waiting).toBe(next.waiting);
          expect(listing?.waitingSince).toBe(
            waitStart === undefined ? undefined : at(waitStart).toISOString(),
          );
        });
      }),
    );
  });
});

describe("a summarized state's listing through the pipeline", () => {
  it("is set by its first commit and kept by the later ones", async () => {
    const { deps, store, clock } = makeDeps();
    const events = await seedTask(deps);
    const first = clock.now().toISOString();
    for (const event of events) {
      await consume(event, taskProjection, deps);
      clock.advance(60_000);
    }
    const stored = store.states.get(`task_view#${events[0]?.aggregate.id}`);
    expect(stored?.revision).toBe(4);
    expect(stored?.listing).toEqual({ listedAt: first });
  });
});
