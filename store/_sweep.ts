/**
 * The sweep of MemoryStore's expiring maps (replay records, delivery
 * counts): a few entries looked at per write, so the maps stay bounded by
 * what is live without a timer.
 *
 * @module
 */

/** How many entries one sweep looks at: more than one write adds. */
const LOOK = 4;

/**
 * Sweeps `map` a few entries at a time, going round it: each call looks at
 * the next {@linkcode LOOK} entries after where the last call stopped and
 * deletes the expired ones. A live entry is passed over, not waited on, so
 * one long-lived record (a replay record with a far expiry, say) holds
 * back nothing behind it; and since each write adds at most one entry and
 * a sweep looks at four, every expired entry is found within a round.
 */
export class Sweep {
  #map: Map<string, { readonly expiresAt: number }>;
  #cursor: Iterator<[string, { readonly expiresAt: number }]> | undefined;

  /** Sweeps `map` (nothing is done until {@linkcode Sweep.run}). */
  constructor(map: Map<string, { readonly expiresAt: number }>) {
    this.#map = map;
  }

  /** Looks at the next few entries and deletes those expired at `now`. */
  run(now: number): void {
    let restarted = false;
    for (let looked = 0; looked < LOOK;) {
      // A Map's iterator stays valid while entries are deleted and added;
      // it sees what was added after it started, in order.
      this.#cursor ??= this.#map.entries();
      const next = this.#cursor.next();
      if (next.done) {
        this.#cursor = undefined;
        if (restarted) return; // a round with nothing left to look at
        restarted = true;
        continue;
      }
      looked++;
      const [key, value] = next.value;
      if (value.expiresAt <= now) this.#map.delete(key);
    }
  }
}
