/**
 * The names of `createRelayer`'s options, which `createApp` reads too, and
 * of the options each of the relayer's calls reads.
 *
 * @module
 */

import type {
  DeliverOptions,
  GiveUpOptions,
  RedriveOptions,
  RelayerOptions,
  UnreadableMessage,
} from "./relayer.ts";
import type { QueueIds } from "../store/store.ts";
import { DEFAULT_QUEUE_CLOCK_SKEW_MS } from "../policy/_retention.ts";

/**
 * `clockSkewMs` unset: how far apart the relayer takes the instances'
 * clocks to be, in milliseconds (5 s). The service's `CLOCK_SKEW` defaults
 * to it too.
 */
export const DEFAULT_CLOCK_SKEW_MS = DEFAULT_QUEUE_CLOCK_SKEW_MS;

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

/**
 * The options `deliver` reads. A misspelt `message` would turn the
 * late-copy guard off for that delivery, in silence.
 */
export const DELIVER_OPTIONS: readonly string[] = Object.keys(
  {
    claim: true,
    countAs: true,
    message: true,
  } satisfies Record<keyof DeliverOptions, true>,
);

/** The options `giveUp` reads. */
export const GIVE_UP_OPTIONS: readonly string[] = Object.keys(
  {
    deliveries: true,
    queue: true,
    claim: true,
  } satisfies Record<keyof GiveUpOptions, true>,
);

/** The options `redrive` reads. */
export const REDRIVE_OPTIONS: readonly string[] = Object.keys(
  {
    publish: true,
    message: true,
  } satisfies Record<keyof RedriveOptions, true>,
);

/** The options `discard` reads. */
export const DISCARD_OPTIONS: readonly string[] = Object.keys(
  { version: true } satisfies Record<"version", true>,
);

/** The fields `keepUnreadable` reads. */
export const UNREADABLE_FIELDS: readonly string[] = Object.keys(
  {
    queue: true,
    id: true,
    raw: true,
    seen: true,
    detail: true,
    claim: true,
  } satisfies Record<keyof UnreadableMessage, true>,
);

/**
 * The fields of a queue message's ids (`DeliverOptions.message`,
 * `GiveUpOptions.queue`): a misspelt `messageId` would leave the message
 * without the marks that keep a late copy of it from sending.
 */
export const QUEUE_ID_NAMES: readonly string[] = Object.keys(
  {
    queue: true,
    messageId: true,
    dlqId: true,
  } satisfies Record<keyof QueueIds, true>,
);
