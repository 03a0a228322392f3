/**
 * Group commit for Deno KV: atomic operations that wait while a commit is
 * in flight go out together, as one commit.
 *
 * A Deno KV on a SQLite file commits one transaction at a time, and a
 * commit costs little more for holding more (on our machines about 1,900
 * one-write commits/s with 50 in flight, 1,700 with 1, and 60,000 writes/s
 * at 64 a commit: `deno task kv-commits`), so a delivery's write is bound
 * by the commit rate, not by its size. Databases answer this with group commit;
 * this is that, above the KV handle:
 *
 * - an operation that finds fewer than {@linkcode IN_FLIGHT} commits in
 *   flight commits at once, alone: no added latency when the store is
 *   quiet;
 * - operations that arrive while commits are in flight queue, and when a
 *   commit returns, the queue goes out as one commit (its checks and
 *   mutations side by side), within Deno KV's limits;
 * - two operations that touch a common key (checked or written) never
 *   share a commit: both checks would pass on the same versionstamp and
 *   both writes would land, a lost update. The later one waits for the
 *   next commit;
 * - a group commit all of whose checks pass is exactly the operations
 *   committed one by one. If any check fails, or the commit throws (a
 *   value too large, a key of the wrong type), nothing of it was written,
 *   and every operation is committed again on its own, so each gets its
 *   own answer: `ok`, a failed check, or its own error.
 *
 * Every operation in a group gets the group's versionstamp, which is the
 * versionstamp of every key it wrote.
 *
 * @module
 */

import type { KvAtomic, KvKey, KvLike } from "./kv.ts";

/** How many commits may be in flight at once; the rest wait and group. */
export const IN_FLIGHT = 1;
/** Deno KV's limits on one atomic operation (Deno 2). */
const MAX_CHECKS = 100;
const MAX_MUTATIONS = 1000;
/** At most this many operations in one group: keeps a group's size well under Deno KV's 800 KiB. */
const MAX_OPS = 64;

type Result = { ok: true; versionstamp: string } | { ok: false };

type Mutation =
  | {
    readonly type: "set";
    readonly key: KvKey;
    readonly value: unknown;
    readonly options: { expireIn?: number } | undefined;
  }
  | { readonly type: "delete"; readonly key: KvKey }
  | {
    readonly type: "enqueue";
    readonly value: unknown;
    readonly options: { delay?: number } | undefined;
  };

interface Op {
  readonly checks: { key: KvKey; versionstamp: string | null }[];
  readonly mutations: Mutation[];
  /** Enqueues commit alone: Deno KV's queue is not something to mix. */
  solo: boolean;
  /** The keys it checks or writes, as strings; made when first needed. */
  keys?: string[];
  resolve(result: Result): void;
  reject(error: unknown): void;
}

/** The commit pipeline of one KV handle. */
export class GroupCommit {
  #kv: KvLike;
  #queue: Op[] = [];
  #inFlight = 0;
  #canEnqueue: boolean | undefined;

  /** @param kv The handle every commit goes to. */
  constructor(kv: KvLike) {
    this.#kv = kv;
  }

  /** An atomic operation that records what it is given and commits through the group. */
  atomic(): KvAtomic {
    // Whether the handle has a queue (`@deno/kv` may not), asked once.
    this.#canEnqueue ??= typeof this.#kv.atomic().enqueue === "function";
    return this.#canEnqueue ? new QueueRecorder(this) : new Recorder(this);
  }

  /** Queues an operation; it commits at once if few commits are in flight. */
  submit(
    checks: Op["checks"],
    mutations: Mutation[],
    solo: boolean,
  ): Promise<Result> {
    return new Promise<Result>((resolve, reject) => {
      this.#queue.push({ checks, mutations, solo, resolve, reject });
      this.#pump();
    });
  }

  #pump(): void {
    while (this.#inFlight < IN_FLIGHT && this.#queue.length > 0) {
      const group = this.#take();
      this.#inFlight++;
      this.#run(group).finally(() => {
        this.#inFlight--;
        this.#pump();
      });
    }
  }

  /**
   * Takes the next group off the queue: the first operation (whatever its
   * size: alone, it gets Deno KV's own answer), then, in order, every one
   * that fits within the limits and shares no key with the group.
   */
  #take(): Op[] {
    const first = this.#queue.shift()!;
    if (first.solo || this.#queue.length === 0) return [first];
    const group: Op[] = [first];
    const keys = new Set<string>();
    addKeys(first, keys);
    let checks = first.checks.length;
    let mutations = first.mutations.length;
    const left: Op[] = [];
    for (const [i, op] of this.#queue.entries()) {
      if (group.length === MAX_OPS) {
        left.push(...this.#queue.slice(i));
        break;
      }
      const fits = !op.solo &&
        checks + op.checks.length <= MAX_CHECKS &&
        mutations + op.mutations.length <= MAX_MUTATIONS &&
        disjoint(op, keys);
      if (!fits) {
        left.push(op);
        continue;
      }
      addKeys(op, keys);
      checks += op.checks.length;
      mutations += op.mutations.length;
      group.push(op);
    }
    this.#queue = left;
    return group;
  }

  async #run(group: Op[]): Promise<void> {
    if (group.length === 1) {
      const [op] = group as [Op];
      try {
        op.resolve(await this.#commit([op]));
      } catch (error) {
        op.reject(error);
      }
      return;
    }
    let result: Result | undefined;
    try {
      result = await this.#commit(group);
    } catch {
      // Nothing was written: each operation is tried on its own below,
      // and the one at fault gets its own error.
    }
    if (result?.ok) {
      for (const op of group) op.resolve(result);
      return;
    }
    await Promise.all(group.map(async (op) => {
      try {
        op.resolve(await this.#commit([op]));
      } catch (error) {
        op.reject(error);
      }
    }));
  }

  #commit(ops: readonly Op[]): Promise<Result> {
    const atomic = this.#kv.atomic();
    for (const op of ops) {
      if (op.checks.length > 0) atomic.check(...op.checks);
      for (const mutation of op.mutations) {
        if (mutation.type === "set") {
          if (mutation.options === undefined) {
            atomic.set(mutation.key, mutation.value);
          } else atomic.set(mutation.key, mutation.value, mutation.options);
        } else if (mutation.type === "delete") atomic.delete(mutation.key);
        else if (mutation.options === undefined) {
          atomic.enqueue!(mutation.value);
        } else atomic.enqueue!(mutation.value, mutation.options);
      }
    }
    return atomic.commit();
  }
}

/** The keys `op` checks or writes, as strings (made once per operation). */
function keysOf(op: Op): string[] {
  if (op.keys !== undefined) return op.keys;
  const keys: string[] = [];
  for (const { key } of op.checks) keys.push(keyOf(key));
  for (const mutation of op.mutations) {
    if (mutation.type !== "enqueue") keys.push(keyOf(mutation.key));
  }
  return op.keys = keys;
}

/** Adds the keys `op` checks or writes to `keys`. */
function addKeys(op: Op, keys: Set<string>): void {
  for (const key of keysOf(op)) keys.add(key);
}

/** Whether none of `op`'s keys is among `keys`. */
function disjoint(op: Op, keys: ReadonlySet<string>): boolean {
  for (const key of keysOf(op)) if (keys.has(key)) return false;
  return true;
}

/**
 * A key as a string: equal keys give equal strings. (Two different keys
 * may, in contrived cases, give the same string; that only keeps them in
 * different groups.)
 */
function keyOf(key: KvKey): string {
  let text = "";
  for (const part of key) text += `${typeof part}:${String(part)}\u0000`;
  return text;
}

/** An atomic operation that records, then commits through the group. */
class Recorder implements KvAtomic {
  #group: GroupCommit;
  protected checks: { key: KvKey; versionstamp: string | null }[] = [];
  protected mutations: Mutation[] = [];
  protected solo = false;
  #committed = false;

  constructor(group: GroupCommit) {
    this.#group = group;
  }

  check(...checks: { key: KvKey; versionstamp: string | null }[]): this {
    for (const { key, versionstamp } of checks) {
      this.checks.push({ key, versionstamp });
    }
    return this;
  }

  set(key: KvKey, value: unknown, options?: { expireIn?: number }): this {
    this.mutations.push({ type: "set", key, value, options });
    return this;
  }

  delete(key: KvKey): this {
    this.mutations.push({ type: "delete", key });
    return this;
  }

  commit(): Promise<Result> {
    if (this.#committed) {
      return Promise.reject(
        new TypeError("Cannot commit an atomic operation twice"),
      );
    }
    this.#committed = true;
    return this.#group.submit(this.checks, this.mutations, this.solo);
  }
}

/** A recorder on a handle that has a queue: it can enqueue too. */
class QueueRecorder extends Recorder {
  enqueue(value: unknown, options?: { delay?: number }): this {
    this.solo = true;
    this.mutations.push({ type: "enqueue", value, options });
    return this;
  }
}
