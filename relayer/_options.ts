/**
 * The names of `createRelayer`'s options, which `createApp` reads too.
 *
 * @module
 */

import type { RelayerOptions } from "./relayer.ts";

/**
 * Every option `createRelayer` reads; any other name is a misspelling. A
 * record, so that an option added to `RelayerOptions` must be added here.
 */
export const RELAYER_OPTIONS: readonly string[] = Object.keys(
  {
    store: true,
    sender: true,
    policy: true,
    now: true,
    random: true,
    leaseMs: true,
    clockSkewMs: true,
  } satisfies Record<keyof RelayerOptions, true>,
);
