/**
 * Catches the timers code arms, so a test reads a bound's delay and fires
 * it when it chooses, where waiting it out would take seconds.
 */

/** The timers armed while caught, and the one of `ms` to fire. */
export interface ArmedTimers {
  /** Every delay armed since {@linkcode catchTimers}, in order. */
  readonly armed: unknown[];
  /** Fires the last timer armed of `ms` now (its real one cleared). */
  fire(): void;
  /** Puts the real `setTimeout` back. */
  restore(): void;
}

/**
 * Replaces `globalThis.setTimeout` until `restore()`: each timer still runs
 * for real, and the last one armed with a delay of `ms` can be fired at
 * once.
 */
export function catchTimers(ms: number): ArmedTimers {
  const armed: unknown[] = [];
  let caught: { fn: () => void; id: ReturnType<typeof setTimeout> } | undefined;
  const realSetTimeout = globalThis.setTimeout;
  globalThis.setTimeout = ((fn: () => void, delay?: number) => {
    armed.push(delay);
    const id = realSetTimeout(fn, delay);
    if (delay === ms) caught = { fn, id };
    return id;
  }) as typeof setTimeout;
  return {
    armed,
    fire() {
      if (caught === undefined) throw new Error(`no timer of ${ms} ms armed`);
      clearTimeout(caught.id);
      caught.fn();
    },
    restore() {
      globalThis.setTimeout = realSetTimeout;
    },
  };
}
