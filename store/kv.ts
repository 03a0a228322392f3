/**
 * The Deno KV store: local SQLite for development (`Deno.openKv("./data/relayer.kv")`),
 * a managed Deno KV or a self-hosted `denokv` over KV Connect at scale, and
 * `openKv` from the npm package `@deno/kv` on Node. It takes an open handle
 * and never opens one itself.
 *
 * Every write is one `atomic()` guarded by `check()` on the versionstamps
 * it read: a lost race surfaces as a `ConflictError`, never as a silent
 * overwrite. The hold void and `settling` → `failed` (with the dead letter)
 * are one commit.
 *
 * Keys, under `prefix` (default `["relayer"]`):
 *
 * | key | value | written by |
 * |---|---|---|
 * | `[…prefix, "intent", intentId]` | the intent without its hold | `createIntent`, `transition`, `beginBroadcast`, `recordBroadcast` |
 * | `[…prefix, "hold", intentId]` | `"pending"` \| `"voided"` \| `"captured"` | `createIntent`, `recordHold`, `voidHold`, `captureHold`, `transition` (ledger) |
 * | `[…prefix, "deliveries", jobId]` | delivery count (number) | `countDelivery`; deleted by `redrive` |
 * | `[…prefix, "lease", intentId]` | `{ owner, expiresAt }` | `acquireLease`, `renewLease`; deleted by `releaseLease` |
 * | `[…prefix, "dead", jobId]` | the dead letter | `transition` (poison resolution), `putDeadLetter`; deleted by `redrive` |
 * | `[…prefix, "dead_by_time", MAX_SAFE_INTEGER − poisonedAt, jobId]` | the job id | with the dead letter: lists newest first |
 *
 * An intent's version is its two versionstamps, `"<intent>:<hold>"`.
 *
 * @module
 */

import { ConflictError } from "./conflict_error.ts";
import {
  broadcastBegun,
  broadcastRecorded,
  type IntentRecord,
  newIntentRecord,
  nextHold,
  pageLimit,
  transitioned,
} from "./_rules.ts";
import type {
  Broadcast,
  DeadLetter,
  DeadLetterPage,
  HoldState,
  Intent,
  LeaseRequest,
  NewIntent,
  Store,
  Transition,
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
  set(key: KvKey, value: unknown): this;
  /** Deletes a key. */
  delete(key: KvKey): this;
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
  /** Lists entries by prefix. */
  list(
    selector: { prefix: KvKey },
    options?: { limit?: number; cursor?: string },
  ): AsyncIterable<KvEntryMaybe<unknown>> & { readonly cursor: string };
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
}

interface Lease {
  owner: string;
  expiresAt: number;
}

/** An entry as this store reads it back: under a key it wrote itself. */
type Entry<T> = {
  readonly key: KvKey;
  readonly value: T | null;
  readonly versionstamp: string | null;
};

type StoredIntent = Omit<IntentRecord, "hold">;

// How many times a read-then-commit retries when another writer raced it
// (counters and leases only: a versionstamp race on an intent is the
// caller's to see).
const RACE_RETRIES = 32;

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
  #prefix: KvKey;
  // Versionstamps of the leases this process holds, so a release needs no read.
  #held = new Map<string, string>();

  /**
   * Constructs a new instance.
   *
   * @param kv An open Deno KV handle (`Deno.openKv()`, or `openKv` from
   * `@deno/kv`); the caller opens and closes it.
   * @param options The key prefix (`["relayer"]`).
   * @throws {TypeError} If `kv` does not look like a Deno KV handle.
   */
  constructor(kv: KvLike, options?: KvStoreOptions) {
    if (typeof kv?.atomic !== "function" || typeof kv?.getMany !== "function") {
      throw new TypeError(
        "Cannot create KvStore as 'kv' is not a Deno KV handle: pass the result of Deno.openKv() or openKv() from @deno/kv",
      );
    }
    this.#kv = kv;
    this.#prefix = options?.prefix ?? ["relayer"];
  }

  #key(...parts: KvKeyPart[]): KvKey {
    return [...this.#prefix, ...parts];
  }

  /** Reads keys in one round trip, typed by what this store writes there. */
  #get<T extends unknown[]>(
    ...keys: KvKey[]
  ): Promise<{ [K in keyof T]: Entry<T[K]> }> {
    return this.#kv.getMany(keys) as Promise<
      { [K in keyof T]: Entry<T[K]> }
    >;
  }

  /** Reads the intent and its hold, and any `extra` keys, in one round trip. */
  async #readIntent<T = never>(id: string, extra?: KvKey) {
    const keys = [
      this.#key("intent", id),
      this.#key("hold", id),
      ...(extra ? [extra] : []),
    ];
    const [intent, hold, more] = await this.#get<[StoredIntent, HoldState, T]>(
      ...keys,
    );
    return { intent, hold, extra: more };
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
    return Object.freeze({
      ...stored,
      hold,
      version: `${intentStamp}:${holdStamp ?? "-"}`,
    });
  }

  /** Reads the intent at `version`, or throws a `ConflictError`. */
  async #expect<T = never>(id: string, version: string, extra?: KvKey) {
    const read = await this.#readIntent<T>(id, extra);
    const current = this.#toIntent(read.intent, read.hold);
    if (current === null) {
      throw new ConflictError(`Cannot write intent ${id} as it does not exist`);
    }
    if (current.version !== version) {
      throw new ConflictError(
        `Cannot write intent ${id} as it changed since it was read; re-read it`,
      );
    }
    const { version: _, ...record } = current;
    return { read, record: record as IntentRecord };
  }

  /** Commits, or throws a `ConflictError`; returns the commit's versionstamp. */
  async #commit(atomic: KvAtomic, what: string): Promise<string> {
    const result = await atomic.commit();
    if (!result.ok) {
      throw new ConflictError(
        `Cannot ${what} as it changed since it was read; re-read it`,
      );
    }
    return result.versionstamp;
  }

  #stored(record: IntentRecord): StoredIntent {
    const { hold: _, ...rest } = record;
    return rest;
  }

  /**
   * Creates an intent (setup and admin). See {@linkcode Store.createIntent}.
   */
  async createIntent(intent: NewIntent): Promise<Intent> {
    const record = newIntentRecord(intent);
    const atomic = this.#kv.atomic()
      .check({ key: this.#key("intent", record.id), versionstamp: null })
      .set(this.#key("intent", record.id), this.#stored(record));
    if (record.hold !== null) {
      atomic.set(this.#key("hold", record.id), record.hold);
    } else atomic.delete(this.#key("hold", record.id));
    const result = await atomic.commit();
    if (!result.ok) {
      throw new ConflictError(`Cannot create intent ${record.id} as it exists`);
    }
    const stamp = result.versionstamp;
    return this.#intent(
      this.#stored(record),
      record.hold,
      stamp,
      record.hold === null ? null : stamp,
    );
  }

  /**
   * Reads an intent with its hold and last broadcast. See {@linkcode
   * Store.getIntent}.
   */
  async getIntent(id: string): Promise<Intent | null> {
    const { intent, hold } = await this.#readIntent(id);
    return this.#toIntent(intent, hold);
  }

  /**
   * Moves an intent along the transition table, as a compare-and-set on
   * `change.version`, with the ledger change and dead letter it carries. See
   * {@linkcode Store.transition}.
   */
  async transition(id: string, change: Transition): Promise<Intent> {
    const deadKey = change.deadLetter
      ? this.#key("dead", change.deadLetter.jobId)
      : undefined;
    const { read, record } = await this.#expect<DeadLetter>(
      id,
      change.version,
      deadKey,
    );
    const next = transitioned(record, change);
    const atomic = this.#kv.atomic()
      .check(read.intent, read.hold)
      .set(this.#key("intent", id), this.#stored(next));
    const holdChanged = next.hold !== record.hold && next.hold !== null;
    if (holdChanged) atomic.set(this.#key("hold", id), next.hold);
    if (change.deadLetter && read.extra) {
      this.#addDeadLetter(atomic, change.deadLetter, read.extra);
    }
    const stamp = await this.#commit(
      atomic,
      `move ${id} from ${change.from} to ${change.to}`,
    );
    return this.#intent(
      this.#stored(next),
      next.hold,
      stamp,
      holdChanged ? stamp : read.hold.versionstamp,
    );
  }

  async #writeIntent(
    id: string,
    version: string,
    update: (record: IntentRecord) => IntentRecord,
  ) {
    const { read, record } = await this.#expect(id, version);
    const next = update(record);
    const stamp = await this.#commit(
      this.#kv.atomic().check(read.intent, read.hold).set(
        this.#key("intent", id),
        this.#stored(next),
      ),
      `write intent ${id}`,
    );
    return this.#intent(
      this.#stored(next),
      next.hold,
      stamp,
      read.hold.versionstamp,
    );
  }

  /**
   * Writes ahead of a broadcast on a `settling` intent. See {@linkcode
   * Store.beginBroadcast}.
   */
  beginBroadcast(id: string, version: string, at: number): Promise<Intent> {
    return this.#writeIntent(
      id,
      version,
      (record) => broadcastBegun(record, at),
    );
  }

  /**
   * Records the outcome of a broadcast on a `settling` intent, as a compare-
   * and-set on `version`. See {@linkcode Store.recordBroadcast}.
   */
  recordBroadcast(
    id: string,
    version: string,
    broadcast: Broadcast,
  ): Promise<Intent> {
    return this.#writeIntent(
      id,
      version,
      (record) => broadcastRecorded(record, broadcast),
    );
  }

  async #hold(
    id: string,
    op: "record" | "void" | "capture",
  ): Promise<HoldState> {
    const { intent, hold } = await this.#readIntent(id);
    if (intent.value === null) {
      throw new ConflictError(
        `Cannot ${op} the hold of ${id} as the intent does not exist`,
      );
    }
    const next = nextHold({ ...intent.value, id, hold: hold.value }, op);
    if (next === hold.value) return next;
    await this.#commit(
      this.#kv.atomic().check(hold).set(this.#key("hold", id), next),
      `${op} the hold of ${id}`,
    );
    return next;
  }

  /** Records a `pending` hold. See {@linkcode Store.recordHold}. */
  recordHold(id: string): Promise<HoldState> {
    return this.#hold(id, "record");
  }

  /** Voids the hold. See {@linkcode Store.voidHold}. */
  voidHold(id: string): Promise<HoldState> {
    return this.#hold(id, "void");
  }

  /** Captures the hold. See {@linkcode Store.captureHold}. */
  captureHold(id: string): Promise<HoldState> {
    return this.#hold(id, "capture");
  }

  /**
   * Counts one more delivery of a job, atomically, for queues that report no
   * count of their own. See {@linkcode Store.countDelivery}.
   */
  async countDelivery(jobId: string): Promise<number> {
    const key = this.#key("deliveries", jobId);
    for (let attempt = 0; attempt < RACE_RETRIES; attempt++) {
      const [entry] = await this.#get<[number]>(key);
      const n = (entry.value ?? 0) + 1;
      const { ok } = await this.#kv.atomic().check(entry).set(key, n).commit();
      if (ok) return n;
    }
    throw new ConflictError(
      `Cannot count a delivery of ${jobId}: ${RACE_RETRIES} concurrent writers won the race; retry`,
    );
  }

  /**
   * The deliveries counted for a job so far. See {@linkcode Store.deliveries}.
   */
  async deliveries(jobId: string): Promise<number> {
    const [entry] = await this.#get<[number]>(this.#key("deliveries", jobId));
    return entry.value ?? 0;
  }

  /**
   * Takes the per-intent lease if it is free or expired. See {@linkcode
   * Store.acquireLease}.
   */
  acquireLease(intentId: string, request: LeaseRequest): Promise<boolean> {
    return this.#lease(
      intentId,
      request,
      (lease) =>
        !lease || lease.owner === request.owner ||
        lease.expiresAt <= request.now,
    );
  }

  /**
   * Extends a lease its owner still holds. See {@linkcode Store.renewLease}.
   */
  renewLease(intentId: string, request: LeaseRequest): Promise<boolean> {
    return this.#lease(
      intentId,
      request,
      (lease) => lease?.owner === request.owner,
    );
  }

  /**
   * Writes `request.owner`'s lease if `allowed` says so of the current one,
   * as a compare-and-set: a writer that raced us holds it instead.
   */
  async #lease(
    intentId: string,
    request: LeaseRequest,
    allowed: (lease: Lease | null) => boolean,
  ): Promise<boolean> {
    const key = this.#key("lease", intentId);
    const [entry] = await this.#get<[Lease]>(key);
    if (!allowed(entry.value)) return false;
    const value: Lease = {
      owner: request.owner,
      expiresAt: request.now + request.ttlMs,
    };
    const result = await this.#kv.atomic().check(entry).set(key, value)
      .commit();
    if (!result.ok) return false;
    this.#held.set(`${intentId}\n${request.owner}`, result.versionstamp);
    return true;
  }

  /**
   * Releases the lease if `owner` holds it. See {@linkcode Store.releaseLease}.
   */
  async releaseLease(intentId: string, owner: string): Promise<void> {
    const key = this.#key("lease", intentId);
    const held = `${intentId}\n${owner}`;
    let versionstamp = this.#held.get(held) ?? null;
    this.#held.delete(held);
    if (versionstamp === null) {
      const [entry] = await this.#get<[Lease]>(key);
      if (entry.value?.owner !== owner) return;
      versionstamp = entry.versionstamp;
    }
    // If it changed, it expired and someone else took it: leave theirs alone.
    await this.#kv.atomic().check({ key, versionstamp }).delete(key).commit();
  }

  /** Adds a dead letter to `atomic`, replacing `old` (read by the caller) and its index entry. */
  #addDeadLetter(
    atomic: KvAtomic,
    deadLetter: DeadLetter,
    old: Entry<DeadLetter>,
  ): void {
    atomic.check(old)
      .set(this.#key("dead", deadLetter.jobId), { ...deadLetter })
      .set(this.#timeKey(deadLetter), deadLetter.jobId);
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
   * Keeps a dead letter, replacing an older one for the same job. See
   * {@linkcode Store.putDeadLetter}.
   */
  async putDeadLetter(deadLetter: DeadLetter): Promise<void> {
    const [old] = await this.#get<[DeadLetter]>(
      this.#key("dead", deadLetter.jobId),
    );
    const atomic = this.#kv.atomic();
    this.#addDeadLetter(atomic, deadLetter, old);
    await this.#commit(atomic, `keep the dead letter of ${deadLetter.jobId}`);
  }

  /** Reads the dead letter of a job. See {@linkcode Store.getDeadLetter}. */
  async getDeadLetter(jobId: string): Promise<DeadLetter | null> {
    const [entry] = await this.#get<[DeadLetter]>(this.#key("dead", jobId));
    return entry.value;
  }

  /**
   * Lists dead letters, newest first. See {@linkcode Store.listDeadLetters}.
   */
  async listDeadLetters(
    options?: { limit?: number; cursor?: string | null },
  ): Promise<DeadLetterPage> {
    options ??= {};
    const limit = pageLimit(options.limit);
    const iterator = this.#kv.list(
      { prefix: this.#key("dead_by_time") },
      { limit, ...(options.cursor ? { cursor: options.cursor } : {}) },
    );
    const jobIds: string[] = [];
    for await (const entry of iterator) {
      if (typeof entry.value === "string") jobIds.push(entry.value);
    }
    const items: DeadLetter[] = [];
    for (let i = 0; i < jobIds.length; i += 10) {
      const keys = jobIds.slice(i, i + 10).map((jobId) =>
        this.#key("dead", jobId)
      );
      const entries = await this.#get<DeadLetter[]>(...keys);
      for (const entry of entries) if (entry.value) items.push(entry.value);
    }
    return {
      items,
      cursor: jobIds.length === limit && iterator.cursor
        ? iterator.cursor
        : null,
    };
  }

  /**
   * Takes a dead letter out and resets its job's delivery count, in one write,
   * so the job can be delivered afresh. See {@linkcode Store.redrive}.
   */
  async redrive(jobId: string): Promise<DeadLetter | null> {
    const key = this.#key("dead", jobId);
    const [entry] = await this.#get<[DeadLetter]>(key);
    const atomic = this.#kv.atomic().check(entry).delete(key).delete(
      this.#key("deliveries", jobId),
    );
    if (entry.value) atomic.delete(this.#timeKey(entry.value));
    await this.#commit(atomic, `redrive ${jobId}`);
    return entry.value;
  }
}
