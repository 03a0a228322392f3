/**
 * Group read for Deno KV: reads that wait while others are in flight go
 * out together, as one `getMany`.
 *
 * Every Deno KV operation goes to the thread (or the server) that holds
 * the database and back, and pays for that trip whatever it reads: on a
 * SQLite file, about 14 µs for each key beyond the first, and a read of
 * one key about twice that (`deno task kv-commits`: about 35,000 one-key
 * reads/s, 23,000 of two keys). Group commit already sends concurrent
 * writes as one commit; this does the same for reads:
 *
 * - a read that finds fewer than {@linkcode READS_IN_FLIGHT} `getMany`
 *   calls in flight goes at once, alone: no added latency when the store
 *   is quiet;
 * - reads that arrive while that many are in flight queue, and the next
 *   call to return sends them, as one `getMany` of up to Deno KV's 10
 *   keys;
 * - once the queued reads hold a `getMany`'s worth of keys (10), the
 *   first group goes at once, whatever is in flight, so a handle whose
 *   trips are long (a remote KV) is not held to two calls at a time when
 *   many reads wait. That group is full when the reads pack into 10 (five
 *   looks of two keys); reads that do not (two of six keys) go as they
 *   pack, since waiting would not fill their group. When few wait (fewer
 *   than five looks), they wait for a call in flight to return: up to one
 *   trip;
 * - a read of no key, or of more than 10, goes alone: Deno KV answers it.
 *
 * Every read is one `getMany`, so each caller's keys are read in one
 * consistent snapshot, as alone; callers in one group share it. A read is
 * made between its call and its answer, so a read made after a commit's
 * answer sees that commit. If Deno KV refuses a group (a key it cannot
 * read), or fails it (the handle closed), each read of the group is made
 * again alone, so each gets the answer it would have had alone; those
 * reads count as in flight until they return.
 *
 * @module
 */

import type { KvEntryMaybe, KvKey, KvLike } from "./kv.ts";
import { damagedFile } from "./_damaged_file.ts";
import { closedKv } from "./_closed_kv.ts";

/**
 * How many `getMany` calls may be in flight before reads wait to go
 * together. One served as two do in `deno task bench:app --store kv` (see
 * `docs/performance_http.md`); with two, a read waits only when two calls
 * are out, so a single slow trip holds no read back.
 */
export const READS_IN_FLIGHT = 2;
/** Deno KV's limit on the keys of one `getMany` (Deno 2). */
const MAX_KEYS = 10;

type Entries = KvEntryMaybe<unknown>[];

/** A caller's read, queued: its keys and how to answer it. */
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

  /**
   * Constructs a new instance. It does no I/O until the first read.
   *
   * @param kv The handle every read goes to.
   */
  constructor(kv: Pick<KvLike, "getMany">) {
    this.#kv = kv;
  }

  /**
   * Reads `keys` in one snapshot, through the group: Deno KV's `getMany`.
   *
   * @param keys The keys to read, at most 10 to be grouped.
   * @returns Their entries, in the order of `keys`.
   */
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

  /**
   * Takes the first queued read (whatever its size: alone, it gets Deno
   * KV's own answer) and, in order, every one that still fits.
   */
  #take(): Read[] {
    const group: Read[] = [];
    const left: Read[] = [];
    let keys = 0;
    for (const read of this.#queue) {
      if (group.length === 0 || keys + read.keys.length <= MAX_KEYS) {
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
      // Refused or failed whole: each read alone gets its own answer, and
      // each is in flight (this group already counts as one).
      this.#inFlight += group.length - 1;
      try {
        await Promise.all(group.map((read) => this.#run([read])));
      } finally {
        this.#inFlight -= group.length - 1;
      }
      return;
    }
    let at = 0;
    for (const read of group) {
      read.resolve(entries.slice(at, at += read.keys.length));
    }
  }

  /** One `getMany` of its own; a synchronous throw becomes a rejection. */
  async #alone(keys: readonly KvKey[]): Promise<Entries> {
    try {
      return await this.#kv.getMany(keys);
    } catch (error) {
      throw damagedFile(error, "read") ?? closedKv(error, "read") ?? error;
    }
  }
}
