/**
 * The Deno KV store: local SQLite for development (`Deno.openKv("./data/relayer.kv")`),
 * a managed Deno KV or a self-hosted `denokv` over KV Connect at scale, and
 * `openKv` from the npm package `@deno/kv` on Node. It takes an open handle
 * and never opens one itself.
 *
 * Every write is one `atomic()` guarded by `check()` on the versionstamps
 * it read: a lost race surfaces as a `ConflictError`, never as a silent
 * overwrite. The hold void and `settling` → `failed` (with the dead letter)
 * are one commit; a delivery's lease and replay record ride in its writes,
 * so a first delivery is two commits (write-ahead, record). A write on a
 * version this store has seen (by its look, or its previous write) commits
 * on the versionstamps it saw, with no read first: one read and two commits
 * for a first delivery.
 *
 * Commits are grouped: a write that finds no commit in flight commits at
 * once; writes that arrive meanwhile go out together as one commit when it
 * returns, never two writes on one key in a group. A group whose checks
 * fail is halved until each write has its own answer. On a SQLite
 * file, where a commit costs little more for holding more, this lifts the
 * commit rate from a ceiling to a detail. Reads are grouped the same way:
 * reads that arrive while two `getMany` calls are in flight go out as one
 * (up to Deno KV's 10 keys), each still read in one snapshot.
 *
 * Keys, under `prefix` (default `["relayer"]`):
 *
 * | key | value | written by |
 * |---|---|---|
 * | `[…prefix, "intent", intentId]` | the intent without its hold | `createIntent`, `transition`, `beginBroadcast`, `recordBroadcast` |
 * | `[…prefix, "hold", intentId]` | `"pending"` \| `"voided"` \| `"captured"` | `createIntent`, `recordHold`, `voidHold`, `captureHold`, `transition` (ledger) |
 * | `[…prefix, "deliveries", jobId]` | `{ n, expiresAt, ws }`, expiring 8 days after its last write, or its `ttlMs` (the relayer's: 8 days past the longest wait it asks) | `admit`, and `putDeadLetter`'s `marks`; deleted with the job's dead letter's write, and by `redrive` (not with `keepCount`) |
 * | `[…prefix, "claim", key]` | `{ expiresAt }`, expiring 10 minutes after then (`CLAIM_GRACE_MS`: clocks differ) | any write that carries a claim |
 * | `[…prefix, "lease", intentId]` | `{ owner, expiresAt }`, expiring an hour after it lapses | any intent write that carries a lease |
 * | `[…prefix, "dead", jobId]` | the dead letter | `transition` (poison resolution), `putDeadLetter`; deleted by `redrive` |
 * | `[…prefix, "dead_by_time", MAX_SAFE_INTEGER − poisonedAt, jobId]` | the job id | with the dead letter: lists newest first |
 * | `[…prefix, "redriven", jobId]` | `{ w, took }`, expiring a day after its last write | `redrive` |
 *
 * An intent's version is its two versionstamps, `"<intent>:<hold>"`.
 *
 * A KV Connect client sends a commit again when the answer to the first
 * was lost, and a commit that landed is then answered `{ ok: false }`. So
 * the intent, a claim and a dead letter also keep the id of the write that
 * stored them (`w`), and a count the ids of its last 8 writes (`ws`), never
 * shown in what a read returns; a write answered `{ ok: false }` reads back
 * whether it landed.
 *
 * @module
 */

import { assertOptionNames, show } from "../policy/_validate.ts";
import { BusyError } from "./busy_error.ts";
import { GroupRead } from "./_group_read.ts";
import { GroupCommit } from "./_group_commit.ts";
import { damagedFile } from "./_damaged_file.ts";
import { closedBeforeWrite, closedKv, closedRead } from "./_closed_kv.ts";
import { ConflictError } from "./conflict_error.ts";
import {
  assertClaimable,
  badCursor,
  broadcastBegun,
  broadcastRecorded,
  checkClaim,
  checkCount,
  checkCountTtl,
  checkDeadLetter,
  checkLease,
  checkMs,
  checkRelease,
  checkResetCount,
  checkUncounted,
  checkWriteOptions,
  CLAIM_GRACE_MS,
  COUNT_TTL_MS,
  counted,
  type CountRecord,
  cursorAfter,
  frozenBroadcast,
  heldBy,
  type IntentRecord,
  isRaceLost,
  isRefusal,
  keptLetter,
  knownTxHashes,
  LATE_ATTEMPTS,
  lateBroadcastRecorded,
  lateOptions,
  leaseAfter,
  type LeaseRecord,
  markKeys,
  newIntentRecord,
  type PageEnd,
  pageLimit,
  readCursor,
  transitioned,
  transitionRefusal,
  uncountedKeys,
  unkeptKey,
} from "./_rules.ts";
import type {
  Admission,
  Broadcast,
  Claim,
  DeadLetter,
  DeadLetterPage,
  HoldState,
  Intent,
  Marks,
  NewIntent,
  Store,
  StoredDeadLetter,
  Transition,
  WriteOptions,
} from "./store.ts";

/**
 * A key part of Deno KV.
 *
 * @example Build a tenant's prefix
 * ```ts
 * import { type KvKeyPart, KvStore } from "@relayer/poison/kv";
 * import assert from "node:assert/strict";
 *
 * function tenantPrefix(tenantId: number): KvKeyPart[] {
 *   return ["tenants", tenantId, "relayer"];
 * }
 * const kv = await Deno.openKv(":memory:");
 * await new KvStore(kv, { prefix: tenantPrefix(42) }).createIntent({ id: "pi_0001" });
 * const entry = await kv.get(["tenants", 42, "relayer", "intent", "pi_0001"]);
 * assert.notEqual(entry.versionstamp, null);
 * kv.close();
 * ```
 */
export type KvKeyPart =
  | string
  | number
  | bigint
  | boolean
  | Uint8Array;
/**
 * A key of Deno KV.
 *
 * @example Two tenants on one database
 * ```ts
 * import { type KvKey, KvStore } from "@relayer/poison/kv";
 * import assert from "node:assert/strict";
 *
 * const kv = await Deno.openKv(":memory:");
 * const tenantA: KvKey = ["tenants", "a"];
 * const tenantB: KvKey = ["tenants", "b"];
 * await new KvStore(kv, { prefix: tenantA }).createIntent({ id: "pi_0001" });
 * assert.equal((await new KvStore(kv, { prefix: tenantA }).getIntent("pi_0001"))?.state, "created");
 * assert.equal(await new KvStore(kv, { prefix: tenantB }).getIntent("pi_0001"), null);
 * kv.close();
 * ```
 */
export type KvKey = readonly KvKeyPart[];

/**
 * One entry as Deno KV returns it; `versionstamp` is `null` when the key is absent.
 *
 * @example Tell a present key from an absent one
 * ```ts
 * import { type KvEntryMaybe, KvStore } from "@relayer/poison/kv";
 * import assert from "node:assert/strict";
 *
 * const exists = (entry: KvEntryMaybe<unknown>): boolean => entry.versionstamp !== null;
 * const kv = await Deno.openKv(":memory:");
 * await new KvStore(kv).createIntent({ id: "pi_0001", hold: "pending" });
 * const [hold, missing] = await kv.getMany([["relayer", "hold", "pi_0001"], ["relayer", "hold", "pi_0002"]]);
 * assert.equal(exists(hold), true);
 * assert.equal(exists(missing), false);
 * kv.close();
 * ```
 */
export interface KvEntryMaybe<T> {
  /** The key (this store never reads it back, so any key shape fits). */
  readonly key: readonly unknown[];
  /** The value, or `null`. */
  readonly value: T | null;
  /** The versionstamp, or `null`. */
  readonly versionstamp: string | null;
}

/**
 * The atomic operation builder of Deno KV, as far as this store uses it.
 *
 * @example Count commits through a wrapper
 * ```ts
 * import { type KvAtomic, type KvLike, KvStore } from "@relayer/poison/kv";
 * import assert from "node:assert/strict";
 *
 * const kv = await Deno.openKv(":memory:");
 * let commits = 0;
 * function counted(atomic: KvAtomic): KvAtomic {
 *   const commit = atomic.commit.bind(atomic);
 *   atomic.commit = () => commit().finally(() => commits++);
 *   return atomic;
 * }
 * const handle: KvLike = { getMany: kv.getMany.bind(kv), list: kv.list.bind(kv), atomic: () => counted(kv.atomic()) };
 * await new KvStore(handle).createIntent({ id: "pi_0001", hold: "pending" });
 * assert.equal(commits, 1); // the intent and its hold in one commit
 * kv.close();
 * ```
 */
export interface KvAtomic {
  /** Fails the commit unless `key` is still at `versionstamp` (`null`: absent). */
  check(...checks: { key: KvKey; versionstamp: string | null }[]): this;
  /** Sets a value. */
  set(key: KvKey, value: unknown, options?: { expireIn?: number }): this;
  /** Deletes a key. */
  delete(key: KvKey): this;
  /**
   * Enqueues a message in the same commit (Deno KV's own queue); only a
   * redrive with `enqueue` uses it.
   */
  enqueue?(value: unknown, options?: KvEnqueueOptions): this;
  /** Commits all or nothing; a successful commit carries its versionstamp. */
  commit(): Promise<{ ok: true; versionstamp: string } | { ok: false }>;
}

/**
 * What {@linkcode KvStore} needs of a Deno KV handle: `Deno.Kv` (from
 * `Deno.openKv()`) and the `Kv` of the npm package `@deno/kv` both fit.
 *
 * @example Pass a Deno KV handle
 * ```ts
 * import { type KvLike, KvStore } from "@relayer/poison/kv";
 * import assert from "node:assert/strict";
 *
 * // `Deno.openKv()` fits, and so does `openKv()` from the npm package `@deno/kv`.
 * function relayerStore(kv: KvLike): KvStore {
 *   return new KvStore(kv, { prefix: ["relayer"] });
 * }
 * const kv = await Deno.openKv(":memory:");
 * const store = relayerStore(kv);
 * await store.createIntent({ id: "pi_0001" });
 * assert.equal((await store.getIntent("pi_0001"))?.state, "created");
 * kv.close(); // the caller opens and closes the handle
 * ```
 */
export interface KvLike {
  /** Reads up to 10 keys in one round trip. */
  getMany(keys: readonly KvKey[]): Promise<KvEntryMaybe<unknown>[]>;
  /** Lists entries by prefix, from `start` (inclusive) when given. */
  list(
    selector: { prefix: KvKey; start?: KvKey },
    options?: { limit?: number },
  ): AsyncIterable<KvEntryMaybe<unknown>>;
  /** Starts an atomic operation. */
  atomic(): KvAtomic;
}

/**
 * Options for {@linkcode KvStore}.
 *
 * @example Every key under the prefix
 * ```ts
 * import { KvStore, type KvStoreOptions } from "@relayer/poison/kv";
 * import assert from "node:assert/strict";
 *
 * const kv = await Deno.openKv(":memory:");
 * const options: KvStoreOptions = { prefix: ["payments", "relayer"] };
 * await new KvStore(kv, options).createIntent({ id: "pi_0001", hold: "pending" });
 * const keys = [];
 * for await (const entry of kv.list({ prefix: ["payments"] })) keys.push(entry.key);
 * assert.deepEqual(keys, [
 *   ["payments", "relayer", "hold", "pi_0001"],
 *   ["payments", "relayer", "intent", "pi_0001"],
 * ]);
 * kv.close();
 * ```
 */
export interface KvStoreOptions {
  /**
   * The key prefix every key of this store starts with, so several stores
   * (or tenants) share one database.
   *
   * @default {["relayer"]}
   */
  prefix?: KvKey;
  /**
   * The options of the message a redrive enqueues on Deno KV's queue,
   * asked once per redrive: a `backoffSchedule` for its redeliveries and
   * `keysIfUndelivered` where Deno KV keeps it if they run out, so a
   * redriven job is never dropped.
   *
   * @default {Deno KV's own: five redeliveries within about 96 s, then dropped}
   */
  enqueueOptions?: () => KvEnqueueOptions;
}

/** The options `KvStore` reads; any other is a typo. */
const KV_STORE_OPTIONS: readonly string[] = Object.keys(
  { prefix: true, enqueueOptions: true } satisfies Record<
    keyof KvStoreOptions,
    true
  >,
);

/**
 * What Deno KV's `enqueue` takes besides the message (its delay, its
 * redelivery schedule, and the keys it is kept under if that runs out).
 *
 * @example Keep a message Deno KV could not deliver
 * ```ts
 * import type { KvEnqueueOptions } from "@relayer/poison/kv";
 * import assert from "node:assert/strict";
 *
 * const options: KvEnqueueOptions = {
 *   backoffSchedule: [1_000, 60_000],
 *   keysIfUndelivered: [["undelivered", "m-1"]],
 * };
 * assert.equal(options.backoffSchedule?.length, 2);
 * ```
 */
export interface KvEnqueueOptions {
  /** Milliseconds before the message is delivered. */
  delay?: number;
  /** The waits between redeliveries of a message whose handler threw. */
  backoffSchedule?: number[];
  /** Where the message is kept if every redelivery fails. */
  keysIfUndelivered?: KvKey[];
}

/** An entry as this store reads it back: under a key it wrote itself. */
type Entry<T> = {
  readonly key: KvKey;
  readonly value: T | null;
  readonly versionstamp: string | null;
};

/** The entries of one read, each typed by what this store writes there. */
type Entries<T extends unknown[]> = { [K in keyof T]: Entry<T[K]> };

type StoredIntent = Omit<IntentRecord, "hold"> & Written;

/**
 * The id of the write that stored a record, kept in it (`w`): a commit
 * answered `{ ok: false }` may have landed all the same. A KV Connect
 * client (`Deno.openKv(url)`, `@deno/kv` on a URL) sends a commit again,
 * on its own, when the answer to the first was lost (a network error, a
 * 5xx), and the second then fails the checks the first passed. So a
 * write answered so reads back what it wrote: its id on a record is the
 * proof that it landed, and the record's versionstamp is its commit's.
 */
interface Written {
  readonly w?: string;
}

/** A stored dead letter: the letter and the id of the write that kept it. */
type StoredLetter = DeadLetter & Written;

/**
 * A delivery count as this store keeps it: with the ids of its last few
 * writes (`ws`, newest first), not only the last. Copies of one message
 * count under one key, so another copy's count may land between a write
 * answered `{ ok: false }` and its read-back.
 */
type StoredCount = CountRecord & { readonly ws?: readonly string[] };

/** How many write ids a count keeps (see {@linkcode StoredCount}). */
const COUNT_WRITES_KEPT = 8;

/** A redrive that landed, kept a day for its writer to find (see {@linkcode Written}). */
const REDRIVEN_TTL_MS = 24 * 60 * 60 * 1000;

/**
 * A job's last redrive as this store keeps it: its own write id, and the
 * write ids of the last few letters its redrives took (`took`, newest
 * first). A letter's writer answered `{ ok: false }` finds its id there
 * when a redrive took the letter before its read-back, though nothing
 * else it wrote (a claim, a mark) is left to keep it.
 */
interface Redriven extends Written {
  readonly took?: readonly string[];
}

/** How many taken letters' write ids a job's redrive record keeps (see {@linkcode Redriven}). */
const TAKEN_KEPT = 8;

/** The versionstamp of the first entry written by `w`, or `null`. */
function landedBy(w: string, ...entries: Entry<Written>[]): string | null {
  for (const entry of entries) {
    if (entry.value !== null && entry.value.w === w) return entry.versionstamp;
  }
  return null;
}

/**
 * The versionstamp of `entry` if it holds exactly the intent record a
 * write stored, else `null`. The write id alone is not enough for an
 * intent: a revision of this store from before write ids copies every
 * field it reads, `w` included, into its own writes, so a record another
 * writer changed since can carry this write's id.
 */
function landedAs(
  stored: StoredIntent,
  entry: Entry<StoredIntent>,
): string | null {
  return entry.value !== null && entry.value.w === stored.w &&
      sameValue(entry.value, stored)
    ? entry.versionstamp
    : null;
}

/**
 * Whether two records read back from a store hold the same values, in any
 * key order (an adapter behind `KvLike` need not keep it); a field set to
 * `undefined` counts as absent.
 */
function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (
    typeof a !== "object" || typeof b !== "object" || a === null ||
    b === null || Array.isArray(a) !== Array.isArray(b)
  ) return false;
  const left = a as Record<string, unknown>;
  const right = b as Record<string, unknown>;
  const keys = Object.keys(left).filter((key) => left[key] !== undefined);
  return keys.length ===
      Object.keys(right).filter((key) => right[key] !== undefined).length &&
    keys.every((key) => sameValue(left[key], right[key]));
}

/**
 * Adds a delivery write's lease to `atomic`: another's live lease throws a
 * `BusyError`; the writer's own is kept (set) or released, and another's
 * that lapsed is cleared, so the next look's "absent" holds. Checked at
 * commit even when untouched: a lease taken since the read refuses it.
 *
 * @returns The lease after the write: kept, `null` if cleared, or
 * `undefined` if there was none to clear.
 */
function addLease(
  atomic: KvAtomic,
  intentId: string,
  held: Entry<LeaseRecord>,
  lease: NonNullable<WriteOptions["lease"]>,
): LeaseRecord | null | undefined {
  const after = leaseAfter(intentId, held.value, lease);
  atomic.check(held);
  if (after !== null) {
    atomic.set(held.key, after, {
      expireIn: expireIn(lease.ttlMs + LEASE_KEY_GRACE_MS),
    });
  } else if (held.value !== null) atomic.delete(held.key);
  else return undefined;
  return after;
}

/**
 * How long past its lapse a lease key stays: Deno KV deletes an expired
 * key at the earliest when `expireIn` has passed on its own clock, so a
 * live lease could go only if the writer's clock ran an hour ahead of the
 * clocks that read it. A lease a crashed delivery or a give-up left is so
 * gone an hour after it lapsed, not kept until its intent's next write.
 */
const LEASE_KEY_GRACE_MS = 60 * 60 * 1000;

/** A dead letter as read, without the id of the write that kept it. */
function letterOf(stored: StoredLetter): DeadLetter {
  const { w: _, ...letter } = stored;
  return letter;
}

// How many times a read-then-commit retries when another writer raced it
// (counts and claims only: a versionstamp race on an intent is the
// caller's to see).
const RACE_RETRIES = 32;

const UTF8 = new TextEncoder();

/** Deno KV's largest key, encoded. */
const MAX_KEY_BYTES = 2048;

/**
 * A key's size as Deno KV encodes it: a type byte per part, then a
 * string's or bytes' content and a terminator (a NUL inside takes two), a
 * number's 8 bytes, a bigint's magnitude (and a length byte over 8 bytes).
 * An upper bound where it guesses.
 */
function keyBytes(key: KvKey): number {
  let n = 0;
  for (const part of key) {
    if (typeof part === "string" || part instanceof Uint8Array) {
      const bytes = typeof part === "string" ? UTF8.encode(part) : part;
      n += 2 + bytes.length + bytes.filter((b) => b === 0).length;
    } else if (typeof part === "number") n += 9;
    else if (typeof part === "bigint") {
      // A type byte (zero is that alone), a length byte when over 8
      // bytes, then the magnitude.
      const magnitude = part < 0n ? -part : part;
      const bytes = magnitude === 0n
        ? 0
        : Math.ceil(magnitude.toString(16).length / 2);
      n += bytes > 8 ? 2 + bytes : 1 + bytes;
    } else n += 1;
  }
  return n;
}

/**
 * An upper bound of {@linkcode keyBytes} for the parts of `key` from
 * `from` on, without encoding a string (at most 3 bytes per UTF-16 unit,
 * a NUL's 2 included): the check of a short key costs a few additions.
 */
function keyBytesAtMost(key: KvKey, from: number): number {
  let n = 0;
  for (let i = from; i < key.length; i++) {
    const part = key[i];
    n += typeof part === "string"
      ? 2 + 3 * part.length
      : typeof part === "number"
      ? 9
      : MAX_KEY_BYTES + 1; // not one this store adds: counted exactly
  }
  return n;
}

/**
 * The longest `expireIn` this store asks for. Deno KV adds `expireIn` to
 * its clock and refuses a sum past its calendar ("expireIn is too large",
 * about 8.2 × 10^15 ms from 1970); any `ttlMs` or `expiresAt` of a safe
 * integer is taken by the other stores. A key kept 1,000 years is kept
 * for good, and each record carries its own `expiresAt`, which decides.
 */
const MAX_EXPIRE_IN_MS = 1000 * 365 * 24 * 60 * 60 * 1000;

/** `ms` as an `expireIn` Deno KV takes: a whole number from 1 to {@linkcode MAX_EXPIRE_IN_MS}. */
function expireIn(ms: number): number {
  return Math.min(MAX_EXPIRE_IN_MS, Math.max(1, ms));
}

/**
 * A checked copy of a key prefix: every key of the store starts with it,
 * so a caller that changes its array later (to build another tenant's, say)
 * must not move this store's keys, and a string must not be spread into
 * one key part per character.
 */
function keyPrefix(prefix: unknown): KvKey {
  const part = (value: unknown) =>
    typeof value === "string" || typeof value === "number" ||
    typeof value === "bigint" || typeof value === "boolean" ||
    value instanceof Uint8Array;
  if (!Array.isArray(prefix) || !prefix.every(part)) {
    throw new TypeError(
      `Cannot create KvStore as 'prefix' must be an array of key parts (strings, numbers, bigints, booleans or Uint8Arrays), such as ["relayer"]: current value is ${
        show(prefix)
      }`,
    );
  }
  return Object.freeze(
    prefix.map((p) => p instanceof Uint8Array ? p.slice() : p),
  );
}

/**
 * A {@linkcode Store} on Deno KV.
 *
 * @example On an in-memory Deno KV
 * ```ts
 * import { KvStore } from "@relayer/poison/kv";
 * import assert from "node:assert/strict";
 *
 * const kv = await Deno.openKv(":memory:");
 * const store = new KvStore(kv, { prefix: ["payments", "relayer"] });
 * await store.createIntent({ id: "pi_0001", state: "authorized", hold: "pending" });
 * assert.equal((await store.getIntent("pi_0001"))?.state, "authorized");
 * kv.close();
 * ```
 */
export class KvStore implements Store {
  #kv: KvLike;
  // Every commit goes through it: writes that wait while a commit is in
  // flight go out together, as one commit (see `_group_commit.ts`).
  #group: GroupCommit;
  // Every read goes through it: reads that wait while two calls are out go
  // out together, as one `getMany` (see `_group_read.ts`).
  #reads: GroupRead;
  #prefix: KvKey;
  // The prefix's share of every key, encoded (see `#fits`).
  #prefixBytes: number;
  #enqueueOptions: (() => KvEnqueueOptions) | undefined;
  // What reads and writes saw, by intent and version: a write on a version
  // this store saw commits on those versionstamps with no read first.
  #seen = new Map<string, Seen>();
  // The ids of this store's writes (see `Written`): a prefix drawn at the
  // first write (never at construction), then a count.
  #writer: string | undefined;
  #writes = 0;

  /**
   * Constructs a new instance.
   *
   * @param kv An open Deno KV handle (`Deno.openKv()`, or `openKv` from
   * `@deno/kv`); the caller opens and closes it.
   * @param options The key prefix (copied) and the enqueue options.
   * @throws {TypeError} If `kv` does not look like a Deno KV handle,
   * `prefix` is not an array of key parts, or `enqueueOptions` is not a
   * function.
   */
  constructor(kv: KvLike, options?: KvStoreOptions) {
    // A misspelt `prefix` would put a tenant's intents under the default.
    assertOptionNames("create KvStore", options, KV_STORE_OPTIONS, {
      optional: true,
      example: '{ prefix: ["relayer"] }',
    });
    options ??= {};
    if (typeof kv?.atomic !== "function" || typeof kv?.getMany !== "function") {
      throw new TypeError(
        "Cannot create KvStore as 'kv' is not a Deno KV handle: pass the result of Deno.openKv() or openKv() from @deno/kv",
      );
    }
    this.#kv = kv;
    this.#group = new GroupCommit(kv);
    this.#reads = new GroupRead(kv);
    // Only left out is the default: a null (a tenant's prefix not filled
    // in) would put its intents beside another's.
    this.#prefix = keyPrefix(
      options.prefix === undefined ? ["relayer"] : options.prefix,
    );
    this.#prefixBytes = keyBytes(this.#prefix);
    if (
      options.enqueueOptions !== undefined &&
      typeof options.enqueueOptions !== "function"
    ) {
      throw new TypeError(
        `Cannot create KvStore as 'enqueueOptions' must be a function that returns the options: current value is ${
          show(options.enqueueOptions)
        }`,
      );
    }
    this.#enqueueOptions = options.enqueueOptions;
  }

  /** A new write id, unique to this write of this store. */
  #writeId(): string {
    this.#writer ??= Array.from(
      crypto.getRandomValues(new Uint8Array(8)),
      (b) => b.toString(16).padStart(2, "0"),
    ).join("");
    return `${this.#writer}.${++this.#writes}`;
  }

  #key(...parts: KvKeyPart[]): KvKey {
    return [...this.#prefix, ...parts];
  }

  /**
   * Whether Deno KV can write `key`: at most 2,048 bytes encoded. Exact
   * only for a key that may be over it; a short one costs a few additions.
   */
  #fits(key: KvKey): boolean {
    return this.#prefixBytes + keyBytesAtMost(key, this.#prefix.length) <=
        MAX_KEY_BYTES || keyBytes(key) <= MAX_KEY_BYTES;
  }

  /**
   * Refuses, before anything is read or written, a key made of a caller's
   * `field` that Deno KV could not write: its own words ("Key too large
   * for write") name neither the field nor the fix, and a read of a key
   * one byte longer (2,049) passes, so the refusal came only at a write.
   */
  #assertFits(op: string, field: string, key: KvKey): void {
    if (this.#fits(key)) return;
    const n = keyBytes(key);
    throw new TypeError(
      `Cannot ${op} as '${field}' makes a Deno KV key of ${n} bytes, over Deno KV's limit of ${MAX_KEY_BYTES}: shorten '${field}' by at least ${
        n - MAX_KEY_BYTES
      } bytes of UTF-8${
        this.#prefixBytes > 64
          ? `, or the store's prefix (${this.#prefixBytes} bytes of every key)`
          : ""
      }. Nothing was written.`,
    );
  }

  /** Refuses the keys a delivery write would make of what the caller passed (see `#assertFits`). */
  #assertWritable(
    op: string,
    options: Pick<WriteOptions, "claim" | "resetCount">,
    deadLetter?: Pick<DeadLetter, "jobId" | "poisonedAt">,
  ): void {
    if (options.claim && typeof options.claim.key === "string") {
      this.#assertFits(op, "claim.key", this.#key("claim", options.claim.key));
    }
    if (typeof options.resetCount === "string") {
      this.#assertFits(
        op,
        "resetCount",
        this.#key("deliveries", options.resetCount),
      );
    }
    if (
      deadLetter && typeof deadLetter.jobId === "string" &&
      Number.isSafeInteger(deadLetter.poisonedAt)
    ) {
      // Its longest key: the index by time.
      this.#assertFits(op, "jobId", this.#timeKey(deadLetter));
    }
  }

  /**
   * Reads keys in one round trip, typed by what this store writes there.
   * A key Deno KV could not write is absent, as it is in any store, without
   * being sent: Deno KV would refuse the whole read.
   */
  #get<T extends unknown[]>(...keys: KvKey[]): Promise<Entries<T>> {
    const read = keys.every((key) => this.#fits(key))
      ? this.#reads.getMany(keys)
      : this.#getFitting(keys);
    return read as Promise<Entries<T>>;
  }

  /** {@linkcode #get} with some keys over Deno KV's limit: those are absent. */
  async #getFitting(keys: readonly KvKey[]): Promise<KvEntryMaybe<unknown>[]> {
    const fitting = keys.filter((key) => this.#fits(key));
    const entries = fitting.length === 0
      ? []
      : await this.#reads.getMany(fitting);
    let at = 0;
    return keys.map((key) =>
      this.#fits(key)
        ? entries[at++]!
        : { key, value: null, versionstamp: null }
    );
  }

  #toIntent(
    intent: Entry<StoredIntent>,
    hold: Entry<HoldState>,
  ): Intent | null {
    if (intent.value === null) return null;
    return this.#intent(
      intent.value,
      hold.value,
      intent.versionstamp!,
      hold.versionstamp,
    );
  }

  #intent(
    stored: StoredIntent,
    hold: HoldState | null,
    intentStamp: string,
    holdStamp: string | null,
  ): Intent {
    // One copy of the stored fields, without the write id, completed in
    // place: a look builds one object, not two.
    const { w: _, ...fields } = stored;
    return Object.freeze(Object.assign(fields, {
      lastBroadcast: frozenBroadcast(stored.lastBroadcast),
      // Kept since 0.2; an intent stored before has its last sent hash.
      txHashes: knownTxHashes(
        (stored as Partial<StoredIntent>).txHashes,
        stored.lastBroadcast,
      ),
      hold,
      version: `${intentStamp}:${holdStamp ?? "-"}`,
    }));
  }

  #stored(record: IntentRecord, w: string): StoredIntent {
    const { hold: _, ...rest } = record;
    return { ...rest, w };
  }

  /** Adds a claim to `atomic`, checked against `existing` (read by the caller). */
  #addClaim(
    atomic: KvAtomic,
    claim: Claim,
    existing: Entry<ClaimValue>,
    w: string,
  ): void {
    assertClaimable(existing.value, claim);
    atomic.check(existing).set(
      this.#key("claim", claim.key),
      { expiresAt: claim.expiresAt, w } satisfies ClaimValue,
      // Deleted a grace after it lapses by the writer's clock: it must stay
      // while another instance's clock, a little behind, still needs it.
      { expireIn: expireIn(claim.expiresAt - claim.now + CLAIM_GRACE_MS) },
    );
  }

  /**
   * Creates an intent (setup and admin).
   *
   * @param intent The intent's fields.
   * @returns The intent as stored.
   * @throws {ConflictError} If an intent with that id exists.
   * @throws {TypeError} If a field is invalid or one a new intent does not
   * take (a misspelling; an intent's `version` is ignored).
   */
  async createIntent(intent: NewIntent): Promise<Intent> {
    const record = newIntentRecord(intent);
    const key = this.#key("intent", record.id);
    this.#assertFits("create intent", "id", key);
    const w = this.#writeId();
    const stored = this.#stored(record, w);
    const atomic = this.#group.atomic()
      .check({ key, versionstamp: null })
      .set(key, stored);
    if (record.hold !== null) {
      atomic.set(this.#key("hold", record.id), record.hold);
    } else atomic.delete(this.#key("hold", record.id));
    const result = await atomic.commit();
    // Answered "exists": it may be this very write (see `Written`).
    const stamp = result.ok
      ? result.versionstamp
      : landedAs(stored, ...await this.#get<[StoredIntent]>(key));
    if (stamp === null) {
      throw new ConflictError(
        `Cannot create intent ${record.id} as it exists`,
        {
          refused: true,
        },
      );
    }
    return this.#intent(
      stored,
      record.hold,
      stamp,
      record.hold === null ? null : stamp,
    );
  }

  /**
   * Reads an intent with its hold and last broadcast, in one round trip.
   *
   * @param id The intent id.
   * @returns The intent, or `null` if there is none.
   */
  async getIntent(id: string): Promise<Intent | null> {
    // Two keys, not three: the lease is not read but taken as absent, as
    // it is between deliveries (a write that ends a delivery deletes it,
    // and clears a lapsed one). A write on what this read saw commits with
    // no read of its own, on these versionstamps and on the lease key being
    // absent; a lease that exists (another delivery's, or one left by a
    // crash) fails that check, and the write is decided again on a fresh
    // read of all three. A third key cost a look about a third more
    // (`deno task kv-commits`).
    let entries: Entries<[StoredIntent, HoldState]>;
    try {
      entries = await this.#get<[StoredIntent, HoldState]>(
        this.#key("intent", id),
        this.#key("hold", id),
      );
    } catch (error) {
      throw closedRead(error); // a read's own: nothing read or written
    }
    const [intent, hold] = entries;
    const read = this.#toIntent(intent, hold);
    if (read !== null) {
      // A lease this store wrote on this very version (a delivery of this
      // process in the middle of its send) is better knowledge than
      // "absent": keep it, so neither that delivery's next write nor
      // another's pays a failed commit to learn it.
      const known = this.#seen.get(`${id}\n${read.version}`)?.lease;
      this.#remember(id, read.version, {
        intent,
        hold,
        lease: known ??
          { key: this.#key("lease", id), value: null, versionstamp: null },
      });
    }
    return read;
  }

  /** Keeps what a read or a write saw, for a write on that version (bounded). */
  #remember(id: string, version: string, seen: Seen): void {
    const key = `${id}\n${version}`;
    this.#seen.delete(key);
    this.#seen.set(key, seen);
    if (this.#seen.size > SEEN_LIMIT) {
      this.#seen.delete(this.#seen.keys().next().value!);
    }
  }

  /**
   * One delivery write in one commit: the intent (checked on the
   * versionstamps of the intent and its hold), the hold, the lease, the
   * claim and the dead letter, all read in one round trip first.
   */
  async #writeIntent(
    id: string,
    version: string,
    update: (record: IntentRecord) => IntentRecord,
    options: WriteOptions,
    deadLetter?: DeadLetter,
    late?: (record: IntentRecord) => IntentRecord | null,
  ): Promise<Intent> {
    // The arguments first: a malformed one is a TypeError whatever the
    // intent's state, in every store.
    checkWriteOptions(options, deadLetter);
    this.#assertWritable("write an intent", options, deadLetter);
    // The fast path: the versionstamps this store saw at `version` are the
    // checks, so the commit needs no read first. Anything that changed
    // since (the intent, its hold, the lease, a claim already made) fails
    // the commit, and the write is decided again on a fresh read below.
    const uncounted = uncountedKeys(options);
    const seen = deadLetter === undefined
      ? this.#seen.get(`${id}\n${version}`)
      : undefined;
    let unanswered: Unanswered | undefined;
    if (seen !== undefined) {
      const unclaimed = {
        key: this.#key("claim", options.claim?.key ?? ""),
        value: null,
        versionstamp: null,
      };
      try {
        const written = await this.#tryWrite(
          id,
          {
            ...seen,
            claim: unclaimed,
            // Checked absent in the commit: a give-up's mark fails it, and
            // the read below decides.
            counts: uncounted.map((key) => ({
              key: this.#key("deliveries", key),
              value: null,
              versionstamp: null,
            })),
          },
          update,
          options,
        );
        if (!("finish" in written)) return written;
        unanswered = written;
      } catch (error) {
        // A lease the cache shows as taken may have been released since;
        // a rule the cached record broke may hold on a fresh one (another
        // writer moved it): decide both again on a fresh read.
        if (!(error instanceof BusyError) && !isRefusal(error)) throw error;
      }
    }
    let read: Entries<
      [
        StoredIntent,
        HoldState,
        LeaseRecord,
        ClaimValue,
        DeadLetter,
        ...StoredCount[],
      ]
    >;
    try {
      read = await this.#get(
        this.#key("intent", id),
        this.#key("hold", id),
        this.#key("lease", id),
        this.#key("claim", options.claim?.key ?? ""),
        this.#key("dead", deadLetter?.jobId ?? ""),
        ...uncounted.map((key) => this.#key("deliveries", key)),
      );
    } catch (error) {
      // Before any commit of this write, nothing of it was sent; after
      // one answered as a race lost, it may have landed all the same.
      throw unanswered === undefined
        ? closedBeforeWrite(error) ?? error
        : error;
    }
    const [intent, hold, lease, claim, dead, ...counts] = read;
    // The write above, answered as a race lost, may have landed.
    const landed = unanswered &&
      (landedAs(unanswered.stored, intent) ?? landedBy(unanswered.w, claim));
    if (landed) return unanswered!.finish(landed);
    const current = this.#toIntent(intent, hold);
    if (current === null) {
      throw new ConflictError(
        `Cannot write intent ${id} as it does not exist`,
        {
          refused: true,
        },
      );
    }
    if (current.version !== version) {
      // A send that outlived its settling: its record, on the version it
      // read, is written on the intent as it is now
      // (lateBroadcastRecorded), checked on that; a race lost to another
      // write is decided again. A version the intent never had is a race
      // lost, as in every store.
      const stale = new ConflictError(
        `Cannot write intent ${id} as it changed since it was read; re-read it`,
      );
      if (late === undefined || !isEarlierVersion(version, current.version)) {
        throw stale;
      }
      return await this.#writeLate(id, options, late, stale, current, lease);
    }
    const written = await this.#tryWrite(
      id,
      { intent, hold, lease, claim, counts },
      update,
      options,
      deadLetter === undefined ? undefined : { deadLetter, old: dead },
    );
    if (!("finish" in written)) return written;
    const [after, claimAfter] = await this.#get<[StoredIntent, ClaimValue]>(
      this.#key("intent", id),
      this.#key("claim", options.claim?.key ?? ""),
    );
    const stamp = landedAs(written.stored, after) ??
      landedBy(written.w, claimAfter);
    if (stamp !== null) return written.finish(stamp);
    const stale = new ConflictError(
      `Cannot write intent ${id} as it changed since it was read; re-read it`,
    );
    if (late === undefined) throw stale;
    // The intent moved on between the read and the commit: a give-up that
    // put it in review meanwhile is met as by a read that found it there.
    const [i, h, l] = await this.#get<[StoredIntent, HoldState, LeaseRecord]>(
      this.#key("intent", id),
      this.#key("hold", id),
      this.#key("lease", id),
    );
    const now = this.#toIntent(i, h);
    if (now === null || !isEarlierVersion(version, now.version)) throw stale;
    return await this.#writeLate(id, options, late, stale, now, l);
  }

  /**
   * The record of a send that outlived its settling, on the version it
   * read, which met the intent at a newer one (`now`, with its lease
   * `held`): written on the intent as it is now, as `late`
   * (lateBroadcastRecorded) says, checked on that; a race lost to another
   * write is decided again, at most `LATE_ATTEMPTS`. `stale`, the race
   * lost, is the answer where the rule does not apply.
   */
  async #writeLate(
    id: string,
    options: WriteOptions,
    late: (record: IntentRecord) => IntentRecord | null,
    stale: ConflictError,
    now: Intent | null,
    held: Entry<LeaseRecord>,
  ): Promise<Intent> {
    let lease = held.value;
    for (let attempt = 1;; attempt++) {
      if (now === null) throw stale;
      const { version: at, ...record } = now;
      const next = late(record);
      if (next === null) throw stale;
      try {
        return await this.#writeIntent(
          id,
          at,
          () => next,
          lateOptions(options, lease),
        );
      } catch (lost) {
        if (!isRaceLost(lost) || attempt === LATE_ATTEMPTS) throw lost;
      }
      const [i, h, l] = await this.#get<
        [StoredIntent, HoldState, LeaseRecord]
      >(
        this.#key("intent", id),
        this.#key("hold", id),
        this.#key("lease", id),
      );
      now = this.#toIntent(i, h);
      lease = l.value;
    }
  }

  /**
   * Builds and commits one delivery write on what was read: the intent
   * (checked on the versionstamps of the intent and its hold), the hold,
   * the lease, the claim and the dead letter. Answered `{ ok: false }`,
   * it returns its write id and how to finish, for the caller to read
   * back whether it landed all the same.
   */
  async #tryWrite(
    id: string,
    read: Seen & {
      claim: Entry<ClaimValue>;
      counts: readonly Entry<StoredCount>[];
    },
    update: (record: IntentRecord) => IntentRecord,
    options: WriteOptions,
    dead?: { deadLetter: DeadLetter; old: Entry<DeadLetter> },
  ): Promise<Intent | Unanswered> {
    const { intent, hold, lease, counts } = read;
    for (const count of counts) {
      checkUncounted(
        id,
        String(count.key.at(-1)),
        count.value,
        options.lease?.now,
      );
    }
    const current = this.#toIntent(intent, hold)!;
    const { version: _, ...record } = current;
    const next = update(record);
    const w = this.#writeId();
    const stored = this.#stored(next, w);
    const atomic = this.#group.atomic()
      .check(intent, hold, ...counts)
      .set(this.#key("intent", id), stored);
    const holdChanged = next.hold !== record.hold && next.hold !== null;
    if (holdChanged) atomic.set(this.#key("hold", id), next.hold);
    const leaseAfterWrite = options.lease
      ? addLease(atomic, id, lease, options.lease)
      : undefined; // undefined: untouched
    if (options.claim) {
      this.#addClaim(atomic, options.claim, read.claim, w);
    }
    if (dead) {
      this.#addDeadLetter(
        atomic,
        dead.deadLetter,
        dead.old,
        options.resetCount,
        w,
      );
    }
    const finish = (stamp: string): Intent => {
      const written = this.#intent(
        stored,
        next.hold,
        stamp,
        holdChanged ? stamp : hold.versionstamp,
      );
      this.#remember(id, written.version, {
        intent: { key: intent.key, value: stored, versionstamp: stamp },
        hold: holdChanged
          ? { key: hold.key, value: next.hold, versionstamp: stamp }
          : hold,
        lease: leaseAfterWrite === undefined
          ? lease
          : leaseAfterWrite === null
          ? { key: lease.key, value: null, versionstamp: null }
          : { key: lease.key, value: leaseAfterWrite, versionstamp: stamp },
      });
      return written;
    };
    const result = await atomic.commit();
    return result.ok ? finish(result.versionstamp) : { w, stored, finish };
  }

  /**
   * Moves an intent along the transition table, in one commit with its
   * ledger change, dead letter, lease and claim.
   *
   * @param id The intent id.
   * @param change The move, checked on the version read.
   * @param options The delivery's lease and replay record.
   * @returns The intent after the move.
   * @throws {ConflictError} If the intent changed, or the move breaks a rule.
   * @throws {BusyError} If another delivery holds the lease.
   * @throws {ReplayError} If the claim was already used.
   */
  transition(
    id: string,
    change: Transition,
    options?: WriteOptions,
  ): Promise<Intent> {
    const refused = transitionRefusal(id, change);
    if (refused !== undefined) return Promise.reject(refused);
    options ??= {};
    return this.#writeIntent(
      id,
      change.version,
      (record) => transitioned(record, change),
      options,
      change.deadLetter,
    );
  }

  /**
   * Writes ahead of a broadcast on a `settling` intent.
   *
   * @param id The intent id.
   * @param version The version read.
   * @param at When, in milliseconds of the injected clock.
   * @param options The delivery's lease and replay record.
   * @returns The intent after the write.
   * @throws {ConflictError} If the intent changed or is not `settling`.
   * @throws {BusyError} If another delivery holds the lease.
   * @throws {ReplayError} If the claim was already used.
   */
  beginBroadcast(
    id: string,
    version: string,
    at: number,
    options?: WriteOptions,
  ): Promise<Intent> {
    options ??= {};
    return this.#writeIntent(
      id,
      version,
      (record) => broadcastBegun(record, at),
      options,
    );
  }

  /**
   * Records the outcome of a broadcast on a `settling` intent, or, on a
   * version older than the intent's, that of a send that outlived its
   * settling on the intent in review (see {@linkcode Store.recordBroadcast}).
   *
   * @param id The intent id.
   * @param version The version read.
   * @param broadcast The outcome.
   * @param options The delivery's lease and replay record.
   * @returns The intent after the write.
   * @throws {ConflictError} If the intent changed or is not `settling`.
   * @throws {BusyError} If another delivery holds the lease.
   * @throws {ReplayError} If the claim was already used.
   */
  recordBroadcast(
    id: string,
    version: string,
    broadcast: Broadcast,
    options?: WriteOptions,
  ): Promise<Intent> {
    options ??= {};
    return this.#writeIntent(
      id,
      version,
      (record) => broadcastRecorded(record, broadcast),
      options,
      undefined,
      (record) => lateBroadcastRecorded(record, broadcast),
    );
  }

  async #hold(
    id: string,
    op: "record" | "void" | "capture",
  ): Promise<HoldState> {
    // Idempotent (DESIGN §8): a race lost to the same change, or to any
    // other, is read again and decided on what won.
    for (let attempt = 1;; attempt++) {
      let read: Entries<[StoredIntent, HoldState]>;
      try {
        read = await this.#get(this.#key("intent", id), this.#key("hold", id));
      } catch (error) {
        // Only the first read comes before any commit of this call.
        throw attempt === 1 ? closedBeforeWrite(error) ?? error : error;
      }
      const [intent, hold] = read;
      if (intent.value === null) {
        throw new ConflictError(
          `Cannot ${op} the hold of ${id} as the intent does not exist`,
          { refused: true },
        );
      }
      const next = heldBy(
        this.#intent(intent.value, hold.value, intent.versionstamp!, null),
        op,
      );
      if (next === hold.value) return next;
      // The intent is checked too: its state is what allowed the change.
      const result = await this.#group.atomic().check(intent, hold)
        .set(this.#key("hold", id), next).commit();
      if (result.ok) return next;
      if (attempt === RACE_RETRIES) {
        throw new ConflictError(
          `Cannot ${op} the hold of ${id} as other writes keep changing it; try again`,
        );
      }
    }
  }

  /**
   * Records a `pending` hold before authorization. Idempotent.
   *
   * @param id The intent id.
   * @returns The hold.
   * @throws {ConflictError} If the ledger or the intent's state forbids it.
   */
  recordHold(id: string): Promise<HoldState> {
    return this.#hold(id, "record");
  }

  /**
   * Voids the hold. Idempotent.
   *
   * @param id The intent id.
   * @returns The hold.
   * @throws {ConflictError} If the ledger or the intent's state forbids it.
   */
  voidHold(id: string): Promise<HoldState> {
    return this.#hold(id, "void");
  }

  /**
   * Captures the hold. Idempotent.
   *
   * @param id The intent id.
   * @returns The hold.
   * @throws {ConflictError} If the ledger or the intent's state forbids it.
   */
  captureHold(id: string): Promise<HoldState> {
    return this.#hold(id, "capture");
  }

  /**
   * Counts a delivery and/or claims a replay record, in one commit. A
   * count expires 8 days after its last write, or `ttlMs` after it when
   * given.
   *
   * @param admission What to count and claim, and the time.
   * @returns The delivery number if counted, else `null`.
   * @throws {ReplayError} If the claim was already used.
   * @throws {BusyError} If concurrent admissions of the same job kept
   * winning the race: nothing was counted or claimed; retry later.
   */
  async admit(admission: Admission): Promise<number | null> {
    checkMs("now", admission.now);
    // At the entry, with a count or without, as the other stores do.
    if (admission.ttlMs !== undefined) checkCountTtl(admission.ttlMs);
    checkCount(admission.count);
    if (admission.claim) checkClaim(admission.claim);
    const countKey = this.#key("deliveries", admission.count ?? "");
    const claimKey = this.#key("claim", admission.claim?.key ?? "");
    this.#assertFits("admit a delivery", "count", countKey);
    this.#assertFits("admit a delivery", "claim.key", claimKey);
    // The last write answered as a race lost, and what it returns if it
    // landed all the same (see `Written`): each read below looks for it.
    let unanswered: { w: string; n: number | null } | undefined;
    if (admission.count === undefined && admission.claim === undefined) {
      return null; // nothing to write
    }
    if (admission.count === undefined && admission.claim !== undefined) {
      // A claim alone (a signed delivery that only looks): first try it as
      // a key that must be absent, with no read; only a claim that exists
      // (a replay, or a record past its expiry) reads it below.
      const atomic = this.#group.atomic();
      const w = this.#writeId();
      this.#addClaim(atomic, admission.claim, {
        key: claimKey,
        value: null,
        versionstamp: null,
      }, w);
      if ((await atomic.commit()).ok) return null;
      unanswered = { w, n: null };
    }
    for (let attempt = 0;; attempt++) {
      let read: Entries<[StoredCount, ClaimValue]>;
      try {
        read = await this.#get(countKey, claimKey);
      } catch (error) {
        // Before any commit of this call, nothing of it was sent.
        throw unanswered === undefined
          ? closedBeforeWrite(error) ?? error
          : error;
      }
      const [count, claim] = read;
      if (
        unanswered &&
        (landedBy(unanswered.w, claim) !== null ||
          count.value?.ws?.includes(unanswered.w) === true)
      ) {
        return unanswered.n;
      }
      if (attempt === RACE_RETRIES) break;
      const atomic = this.#group.atomic();
      const w = this.#writeId();
      if (admission.claim) this.#addClaim(atomic, admission.claim, claim, w);
      const next = admission.count === undefined ? null : {
        ...counted(count.value, admission.now, admission.ttlMs),
        ws: [w, ...(count.value?.ws ?? []).slice(0, COUNT_WRITES_KEPT - 1)],
      };
      if (next !== null) {
        atomic.check(count).set(countKey, next, {
          expireIn: expireIn(admission.ttlMs ?? COUNT_TTL_MS),
        });
      }
      if ((await atomic.commit()).ok) return next?.n ?? null;
      unanswered = { w, n: next?.n ?? null };
    }
    // Many copies of one job at once (a burst of redeliveries): busy, as a
    // held lease is, not a failure; nothing was written.
    throw new BusyError(
      `Cannot admit a delivery of ${
        admission.count ?? "a job"
      }: ${RACE_RETRIES} concurrent writers won the race; retry`,
    );
  }

  /**
   * The deliveries counted for a job so far.
   *
   * @param jobId The job id.
   * @param now The time, if known: a count that has lapsed by then reads 0
   * (Deno KV deletes an expired key some time after it expires).
   * @returns The count; 0 if none.
   * @throws {TypeError} If `now` is not a whole number of milliseconds.
   */
  async deliveries(jobId: string, now?: number): Promise<number> {
    if (now !== undefined) checkMs("now", now);
    if (unkeptKey(jobId)) return 0; // no write keeps such a key
    let entries: Entries<[StoredCount]>;
    try {
      entries = await this.#get<[StoredCount]>(this.#key("deliveries", jobId));
    } catch (error) {
      throw closedRead(error); // a read's own: nothing read or written
    }
    const count = entries[0].value;
    if (count === null) return 0;
    return now !== undefined && count.expiresAt <= now ? 0 : count.n;
  }

  /** Adds a dead letter to `atomic`, replacing `old` (read by the caller) and its index entry. */
  #addDeadLetter(
    atomic: KvAtomic,
    deadLetter: DeadLetter,
    old: Entry<StoredLetter>,
    resetCount: string | undefined,
    w: string,
  ): void {
    checkDeadLetter(deadLetter);
    checkResetCount(resetCount);
    if (resetCount !== undefined) {
      atomic.delete(this.#key("deliveries", resetCount));
    }
    atomic.check(old)
      // A copy to its last field: a commit may wait behind another, and
      // the caller may change what it passed meanwhile.
      .set(
        this.#key("dead", deadLetter.jobId),
        {
          ...keptLetter(deadLetter),
          ...(deadLetter.queue ? { queue: { ...deadLetter.queue } } : {}),
          w,
        } satisfies StoredLetter,
      )
      .set(this.#timeKey(deadLetter), deadLetter.jobId)
      // The poisoned run of deliveries ends here: a job published again
      // for the intent is counted from 1.
      .delete(this.#key("deliveries", deadLetter.jobId));
    if (old.value && old.value.poisonedAt !== deadLetter.poisonedAt) {
      atomic.delete(this.#timeKey(old.value));
    }
  }

  #timeKey(deadLetter: Pick<DeadLetter, "jobId" | "poisonedAt">): KvKey {
    return this.#key(
      "dead_by_time",
      Number.MAX_SAFE_INTEGER - deadLetter.poisonedAt,
      deadLetter.jobId,
    );
  }

  /**
   * Keeps a dead letter, replacing an older one for the same job.
   *
   * @param deadLetter The dead letter.
   * @param options The delivery's replay record and lease, and the
   * intent's version the caller read (the letter is kept only if it still
   * holds).
   * @throws {ReplayError} If the claim was already used.
   * @throws {BusyError} If another owner holds the intent's lease.
   */
  async putDeadLetter(
    deadLetter: DeadLetter,
    options?:
      & Pick<WriteOptions, "claim" | "resetCount" | "lease">
      & { readonly intentVersion?: string; readonly marks?: Marks },
  ): Promise<void> {
    options ??= {};
    checkDeadLetter(deadLetter);
    checkResetCount(options.resetCount);
    const { marks } = options;
    const markedKeys = markKeys(marks, deadLetter, options.resetCount)
      .map((key) => this.#key("deliveries", key));
    if (options.claim) checkClaim(options.claim);
    for (const key of markedKeys) {
      this.#assertFits("keep a dead letter", "marks.keys", key);
    }
    this.#assertWritable("keep a dead letter", options, deadLetter);
    if (options.lease && options.intentVersion === undefined) {
      throw new TypeError(
        "putDeadLetter: a lease needs options.intentVersion, the version of the intent the caller read",
      );
    }
    if (options.lease) checkLease(options.lease);
    // The marks' counts with the rest: 10 keys at most, one `getMany`.
    // Without a claim, the job's redrive record in its place, checked at
    // commit: a KV Connect client sends a commit whose answer was lost
    // again, and a letter written where none was (its intent unchanged, no
    // lease taken) would land a second time once a redrive took the first,
    // every check holding again. A claim's own check refuses that second
    // commit; without one, the record's does, as a redrive moves it.
    let read: Entries<
      [
        StoredLetter,
        ClaimValue | Redriven,
        StoredIntent,
        HoldState,
        LeaseRecord,
        ...StoredCount[],
      ]
    >;
    try {
      read = await this.#get(
        this.#key("dead", deadLetter.jobId),
        options.claim
          ? this.#key("claim", options.claim.key)
          : this.#key("redriven", deadLetter.jobId),
        this.#key("intent", deadLetter.intentId),
        this.#key("hold", deadLetter.intentId),
        this.#key("lease", deadLetter.intentId),
        ...markedKeys,
      );
    } catch (error) {
      throw closedBeforeWrite(error) ?? error; // nothing sent yet
    }
    const [old, guard, intent, hold, held, ...counts] = read;
    const atomic = this.#group.atomic();
    if (options.lease && intent.value === null) {
      throw new ConflictError(
        `Cannot keep the dead letter of ${deadLetter.jobId} as the intent does not exist`,
        { refused: true },
      );
    }
    if (options.intentVersion !== undefined) {
      const version = intent.value === null ? null : this.#intent(
        intent.value,
        hold.value,
        intent.versionstamp!,
        hold.versionstamp,
      ).version;
      if (version !== options.intentVersion) {
        throw new ConflictError(
          `Cannot keep the dead letter of ${deadLetter.jobId} as intent ${deadLetter.intentId} changed since it was read; re-read it`,
        );
      }
      // Checked again at commit: a write in between refuses this one.
      atomic.check(intent, hold);
    }
    // After the version, as a delivery write: a writer on a stale read
    // loses the race (and reads again), busy or not.
    if (options.lease) {
      addLease(atomic, deadLetter.intentId, held, options.lease);
    }
    const w = this.#writeId();
    if (options.claim) {
      this.#addClaim(atomic, options.claim, guard as Entry<ClaimValue>, w);
    } else atomic.check(guard);
    this.#addDeadLetter(atomic, deadLetter, old, options.resetCount, w);
    markedKeys.forEach((key, i) => {
      const count = counts[i]!;
      atomic.check(count).set(
        key,
        {
          ...counted(count.value, marks!.now, marks!.ttlMs),
          ws: [w, ...(count.value?.ws ?? []).slice(0, COUNT_WRITES_KEPT - 1)],
        } satisfies StoredCount,
        {
          expireIn: expireIn(marks!.ttlMs ?? COUNT_TTL_MS),
        },
      );
    });
    if ((await atomic.commit()).ok) return;
    // Answered as a race lost: it may have landed all the same (`Written`).
    // Its claim tells too, when another letter replaced this one since or
    // a redrive took it, and so does each of its marks, whose counts keep
    // the ids of their last writes, and the job's redrive record, which
    // keeps the ids of the letters its redrives took: answered as a race
    // lost, its caller would write it again, and bring back a letter a
    // redrive took. 8 keys at most.
    const [kept, claimed, redriven, ...marked] = await this.#get<
      [StoredLetter, ClaimValue, Redriven, ...StoredCount[]]
    >(
      this.#key("dead", deadLetter.jobId),
      this.#key("claim", options.claim?.key ?? ""),
      this.#key("redriven", deadLetter.jobId),
      ...markedKeys,
    );
    if (
      landedBy(w, kept, claimed) !== null ||
      redriven.value?.took?.includes(w) === true ||
      marked.some((count) => count.value?.ws?.includes(w) === true)
    ) return;
    throw new ConflictError(
      `Cannot keep the dead letter of ${deadLetter.jobId} as it changed since it was read; re-read it`,
    );
  }

  /**
   * Releases the intent's lease if `owner` holds it (live or lapsed): a
   * delete checked on the lease's versionstamp, so a lease another owner
   * took since the read stays, in one commit with the intent's record
   * written again as it is (checked on its versionstamp), which moves the
   * intent's version: a write decided on a read from before the release
   * is refused as a race lost.
   *
   * @param intentId The intent.
   * @param owner The delivery that took the lease.
   * @throws {TypeError} If either is not a non-empty string.
   * @throws {BusyError} If concurrent writes to the intent kept winning the
   * race; the lease then lapses by itself.
   */
  async releaseLease(intentId: string, owner: string): Promise<void> {
    checkRelease(intentId, owner);
    // No write keeps such an id or owner (a lone surrogate would be read as
    // U+FFFD: another owner's lease).
    if (unkeptKey(intentId) || unkeptKey(owner)) return;
    const key = this.#key("lease", intentId);
    const intentKey = this.#key("intent", intentId);
    // A commit answered as a race lost may have landed: the next read
    // finds the lease gone (or another's), and that is the answer.
    for (let attempt = 0; attempt < RACE_RETRIES; attempt++) {
      let read: Entries<[LeaseRecord, StoredIntent]>;
      try {
        read = await this.#get(key, intentKey);
      } catch (error) {
        // Only the first read comes before any commit of this call.
        throw attempt === 0 ? closedBeforeWrite(error) ?? error : error;
      }
      const [held, intent] = read;
      if (held.value?.owner !== owner) return;
      const atomic = this.#group.atomic();
      atomic.check(held, intent).delete(key);
      // The record as it is, its write id kept: a writer reading back
      // whether its own write landed still finds it.
      if (intent.value !== null) atomic.set(intentKey, intent.value);
      if ((await atomic.commit()).ok) return;
    }
    throw new BusyError(
      `Cannot release the lease of ${intentId}: ${RACE_RETRIES} concurrent writers won the race; it lapses by itself`,
    );
  }

  /**
   * Reads the dead letter of a job.
   *
   * @param jobId The job id.
   * @returns The dead letter with its version, or `null`.
   */
  async getDeadLetter(jobId: string): Promise<StoredDeadLetter | null> {
    if (unkeptKey(jobId)) return null; // no write keeps such a key
    let entries: Entries<[StoredLetter]>;
    try {
      entries = await this.#get<[StoredLetter]>(this.#key("dead", jobId));
    } catch (error) {
      throw closedRead(error); // a read's own: nothing read or written
    }
    const [entry] = entries;
    return entry.value === null
      ? null
      : { ...letterOf(entry.value), version: entry.versionstamp! };
  }

  /**
   * Lists dead letters, newest first.
   *
   * @param options The page size (1–1000, default 50) and the cursor of the previous page.
   * @returns One page.
   * @throws {RangeError} If `limit` is out of range.
   * @throws {TypeError} If `cursor` is not one this store returned.
   */
  async listDeadLetters(
    options?: { limit?: number; cursor?: string | null },
  ): Promise<DeadLetterPage> {
    options ??= {};
    const limit = pageLimit(options.limit);
    const after = options.cursor ? readCursor(options.cursor) : null;
    const prefix = this.#key("dead_by_time");
    // Our own cursor, the same in every store: Deno KV's is opaque, and
    // one it did not write fails in its own words, or lists nothing.
    // From the page's last key, inclusive (Deno KV's `start` is): that
    // entry, if it is still there, is skipped below.
    const start = after === null ? null : [
      ...prefix,
      Number.MAX_SAFE_INTEGER - after.poisonedAt,
      after.jobId,
    ];
    // A key no key of this store can be (Deno KV keys are at most 2 KiB):
    // refused as any other cursor it did not return.
    if (start !== null && keyBytes(start) > MAX_KEY_BYTES) {
      throw badCursor(options.cursor!);
    }
    const selector = start === null ? { prefix } : { prefix, start };
    // One entry more than the page, so that a full last page is known to
    // be the last, and one more for the cursor's own entry.
    const jobIds: string[] = [];
    let listed = 0;
    let end: PageEnd | null = null;
    let more = false;
    try {
      for await (
        const entry of this.#kv.list(selector, { limit: limit + 2 })
      ) {
        const [inverted, jobId] = entry.key.slice(-2);
        if (
          after !== null && jobId === after.jobId &&
          inverted === Number.MAX_SAFE_INTEGER - after.poisonedAt
        ) continue;
        if (listed === limit) {
          more = true;
          break;
        }
        listed++;
        if (typeof inverted === "number" && typeof jobId === "string") {
          end = { poisonedAt: Number.MAX_SAFE_INTEGER - inverted, jobId };
        }
        if (typeof entry.value === "string") jobIds.push(entry.value);
      }
    } catch (error) {
      // A read's own: on a closed handle, nothing read or written.
      throw damagedFile(error, "read") ?? closedRead(closedKv(error, "read")) ??
        error;
    }
    const items: StoredDeadLetter[] = [];
    for (let i = 0; i < jobIds.length; i += 10) {
      const keys = jobIds.slice(i, i + 10).map((jobId) =>
        this.#key("dead", jobId)
      );
      let entries: Entries<StoredLetter[]>;
      try {
        entries = await this.#get<StoredLetter[]>(...keys);
      } catch (error) {
        throw closedRead(error);
      }
      for (const entry of entries) {
        if (entry.value) {
          items.push({
            ...letterOf(entry.value),
            version: entry.versionstamp!,
          });
        }
      }
    }
    return { items, cursor: more && end !== null ? cursorAfter(end) : null };
  }

  /**
   * Takes out exactly the dead letter read, resets its job's count (left
   * as it is with `options.keepCount`) and, with `options.enqueue`,
   * enqueues that message on Deno KV's queue, all in one commit.
   *
   * @param jobId The job id.
   * @param version The version of the dead letter read.
   * @param options The message to enqueue in the same commit, and whether
   * to keep the count.
   * @returns The dead letter removed.
   * @throws {ConflictError} If the dead letter is gone or changed.
   * @throws {TypeError} If asked to enqueue on a handle without a queue.
   */
  async redrive(
    jobId: string,
    version: string,
    options?: { readonly enqueue?: unknown; readonly keepCount?: boolean },
  ): Promise<DeadLetter> {
    options ??= {};
    const key = this.#key("dead", jobId);
    const redriven = this.#key("redriven", jobId);
    let read: Entries<[StoredLetter, Redriven]>;
    try {
      read = await this.#get(key, redriven);
    } catch (error) {
      throw closedBeforeWrite(error) ?? error; // nothing sent yet
    }
    const [entry, last] = read;
    const changed = () =>
      new ConflictError(
        `Cannot redrive ${jobId} as its dead letter changed or is gone since it was read; re-read it`,
      );
    if (entry.value === null || entry.versionstamp !== version) {
      throw changed();
    }
    // The redrive leaves its id for a day: answered as a race lost, it
    // reads it back to know it landed (see `Written`). And the id of the
    // letter it takes, with those of the last few taken before (see
    // `Redriven`): unchecked, as only a redrive writes the record, and
    // each commits on a letter written after the last one's commit, so
    // read with it.
    const w = this.#writeId();
    const took = [
      ...(entry.value.w === undefined ? [] : [entry.value.w]),
      ...(last.value?.took ?? []),
    ].slice(0, TAKEN_KEPT);
    const atomic = this.#group.atomic().check(entry).delete(key)
      .delete(this.#timeKey(entry.value))
      .set(redriven, { w, took } satisfies Redriven, {
        expireIn: REDRIVEN_TTL_MS,
      });
    if (options.keepCount !== true) {
      atomic.delete(this.#key("deliveries", jobId));
    }
    if (options.enqueue !== undefined) {
      if (typeof atomic.enqueue !== "function") {
        throw new TypeError(
          "Cannot enqueue in a redrive as this KV handle has no queue: publish the job yourself",
        );
      }
      atomic.enqueue(options.enqueue, this.#enqueueOptions?.());
    }
    if (!(await atomic.commit()).ok) {
      const [mark] = await this.#get<[Written]>(redriven);
      if (landedBy(w, mark) === null) throw changed();
    }
    return letterOf(entry.value);
  }
}

/** An intent, its hold and its lease as one read or write saw them. */
interface Seen {
  readonly intent: Entry<StoredIntent>;
  readonly hold: Entry<HoldState>;
  readonly lease: Entry<LeaseRecord>;
}

/**
 * Whether `version` may be one an intent at `current` had before: both
 * `"<intent>:<hold>"` (`"-"` for no hold), each versionstamp spelt as the
 * current one (as long; lowercase hex where it is, as Deno KV's are) and
 * not after it, the hold's absent before it is recorded, and not both
 * the same. Versionstamps are the database's, so one that passes may be
 * another intent's, or made up (`"00000000000000000000:-"`): this store
 * cannot tell those from the intent's own. Only such a version carries
 * the record of a send that outlived its settling
 * (lateBroadcastRecorded): any other (`"garbage"`,
 * `""`, one ahead of the intent's, a value that is not a string) was
 * never the intent's, and is answered as a race lost, as every write on
 * a version no store made. Decided on the versions the store read with
 * the intent: no round trip of its own.
 */
function isEarlierVersion(version: unknown, current: string): boolean {
  if (typeof version !== "string" || version === current) return false;
  const parts = version.split(":");
  const now = current.split(":");
  if (parts.length !== 2 || now.length !== 2) return false;
  const [intent, hold] = parts as [string, string];
  const [intentNow, holdNow] = now as [string, string];
  return stampNotAfter(intent, intentNow) &&
    (hold === "-" || (holdNow !== "-" && stampNotAfter(hold, holdNow)));
}

/** Whether versionstamp `stamp` is spelt as `current` is and not after it. */
function stampNotAfter(stamp: string, current: string): boolean {
  const hex = /^[0-9a-f]+$/;
  return stamp.length === current.length && stamp <= current &&
    (!hex.test(current) || hex.test(stamp));
}

/** How many versions a store remembers (each a few hundred bytes). */
const SEEN_LIMIT = 1024;

/** A replay record as this store keeps it. */
interface ClaimValue extends Written {
  readonly expiresAt: number;
}

/**
 * A delivery write whose commit was answered `{ ok: false }`: `w` is the
 * id it wrote, and `finish` gives what it wrote, at the versionstamp of
 * the commit, if a read-back finds `w` (it landed all the same).
 */
interface Unanswered {
  readonly w: string;
  /** The intent record it stored. */
  readonly stored: StoredIntent;
  readonly finish: (versionstamp: string) => Intent;
}
