/**
 * Group read for Deno KV: reads that wait while others are in flight go
 * out together, as one `getMany`.
 *
 * Every Deno KV operation goes to the thread (or the server) that holds
 * the database and back, and on a SQLite file that trip, not the keys it
 * reads, is most of a read's cost (`deno task kv-commits`: about 35,000
 * one-key reads/s, 23,000 of two keys). Group commit already sends
 * concurrent writes as one commit; this does the same for reads:
 *
 * - a read that finds fewer than {@linkcode READS_IN_FLIGHT} reads in
 *   flight goes at once, alone: no added latency when the store is quiet;
 * - reads that arrive while that many are in flight queue, and the next
 *   read to return sends them, as one `getMany` of up to Deno KV's 10
 *   keys;
 * - queued reads that fill a `getMany` go at once, whatever is in flight.
 *   So the wait is never longer than one read's trip, and a handle whose
 *   trips are long (a remote KV) is not held to a few reads at a time: its
 *   reads go in full batches, as many at once as its callers ask for;
 * - a read of no key, or of more than 10, goes alone: Deno KV answers it.
 *
 * Every read is one `getMany`, so each caller's keys are read in one
 * consistent snapshot, as alone; callers in one group share it. A read is
 * made between its call and its answer, so a read made after a commit's
 * answer sees that commit. If Deno KV refuses a group (a key it cannot
 * read), or fails it (the handle closed), each read of the group is made
 * again alone, so each gets the answer it would have had alone.
 *
 * @module
 */

import type { KvEntryMaybe, KvKey, KvLike } from "./kv.ts";

/**
 * How many reads may be in flight before the rest wait to go together.
 * Two, not one, because a read and a commit then still overlap on the
 * database's thread; measured with `deno task bench:app --store kv` (see
 * `docs/performance_http.md`).
 */
export const READS_IN_FLIGHT = 2;
/** Deno KV's limit on the keys of one `getMany` (Deno 2). */
const MAX_KEYS = 10;

type Entries = KvEntryMaybe<unknown>[];

interface Read {
  readonly keys: readonly KvKey[];
  resolve(entries: Entries): void;
  reject(error: unknown): void;
}

/** The read pipeline of one KV handle. */
export class GroupRead {
  #kv: Pick<KvLike, "getMany">;
  #queue: Read[] = [];
  /** The keys of the queued reads. */
  #waiting = 0;
  #inFlight = 0;

  /** @param kv The handle every read goes to. */
  constructor(kv: Pick<KvLike, "getMany">) {
    this.#kv = kv;
  }

  /** Reads `keys` in one snapshot, through the group: Deno KV's `getMany`. */
  getMany(keys: readonly KvKey[]): Promise<Entries> {
    if (keys.length === 0 || keys.length > MAX_KEYS) {
      return this.#alone(keys);
    }
    return new Promise<Entries>((resolve, reject) => {
      this.#queue.push({ keys, resolve, reject });
      this.#waiting += keys.length;
      this.#pump();
    });
  }

  #pump(): void {
    while (
      this.#queue.length > 0 &&
      (this.#inFlight < READS_IN_FLIGHT || this.#waiting >= MAX_KEYS)
    ) {
      const group = this.#take();
      this.#inFlight++;
      this.#run(group).finally(() => {
        this.#inFlight--;
        this.#pump();
      });
    }
  }

  /** Takes the first queued read and, in order, every one that still fits. */
  #take(): Read[] {
    const group: Read[] = [];
    const left: Read[] = [];
    let keys = 0;
    for (const read of this.#queue) {
      if (keys + read.keys.length <= MAX_KEYS) {
        keys += read.keys.length;
        group.push(read);
      } else left.push(read);
    }
    this.#queue = left;
    this.#waiting -= keys;
    return group;
  }

  /** Reads a group; settles every one of its reads, never rejects. */
  async #run(group: readonly Read[]): Promise<void> {
    if (group.length === 1) {
      const [read] = group as [Read];
      try {
        read.resolve(await this.#alone(read.keys));
      } catch (error) {
        read.reject(error);
      }
      return;
    }
    let entries: Entries;
    try {
      entries = await this.#kv.getMany(group.flatMap((read) => read.keys));
    } catch {
      // Refused or failed whole: each read alone gets its own answer.
      await Promise.all(group.map((read) => this.#run([read])));
      return;
    }
    let at = 0;
    for (const read of group) {
      read.resolve(entries.slice(at, at += read.keys.length));
    }
  }

  /** One `getMany` of its own; a synchronous throw becomes a rejection. */
  async #alone(keys: readonly KvKey[]): Promise<Entries> {
    return await this.#kv.getMany(keys);
  }
}
