/**
 * Every Store the foundation tests run on: the memory store, Deno KV
 * (`:memory:`, also with every commit answered as a race lost once it has
 * landed) and PostgresStore on a real server of the run (skipped with
 * one loud line where there are no server binaries, outside CI).
 *
 * @module
 */

import {
  type Admission,
  MemoryStore,
  type Store,
  type WriteOptions,
} from "../mod.ts";
import { KvStore } from "../store/kv.ts";
import { postgresAvailable, postgresBackend } from "./_postgres.ts";
import { resendingKv } from "./store/_resending_kv.ts";

export { postgresAvailable, postgresBackend };

/** An open store and how to close it. */
export interface OpenStore {
  readonly store: Store;
  close(): void | Promise<void>;
}

/** A store implementation under test. */
export interface Backend {
  readonly name: string;
  open(): Promise<OpenStore>;
}

/** The in-memory store. */
export const memoryBackend: Backend = {
  name: "MemoryStore",
  open: () => Promise.resolve({ store: new MemoryStore(), close: () => {} }),
};

/** Deno KV in memory. */
export const kvBackend: Backend = {
  name: "KvStore",
  async open() {
    const kv = await Deno.openKv(":memory:");
    return { store: new KvStore(kv), close: () => kv.close() };
  },
};

/**
 * Deno KV in memory, each commit answered as a race lost once it has
 * landed: what a KV Connect client that sent it again returns.
 */
export const resentKvBackend: Backend = {
  name: "KvStore, every commit re-sent",
  async open() {
    const kv = await Deno.openKv(":memory:");
    return { store: new KvStore(resendingKv(kv)), close: () => kv.close() };
  },
};

/** All three, KvStore also with its commits re-sent (PostgresStore only where a server can run). */
export const BACKENDS: readonly Backend[] = [
  memoryBackend,
  kvBackend,
  resentKvBackend,
  ...(postgresAvailable ? [postgresBackend] : []),
];

/** Three instances' stores over one database, and how to close it. */
export interface SharedStores {
  readonly stores: Store[];
  close(): void | Promise<void>;
}

/** A store opened as three instances over one database, with the seeded histories a fuzz test runs on it. */
export interface SharedBackend {
  readonly name: string;
  readonly seeds: number;
  open(): Promise<SharedStores>;
}

/**
 * Every store opened as three instances over one database, for the fuzz
 * tests that race three relayers: one MemoryStore three times, three
 * KvStores on one Deno KV, three on one SQLite file opened three times,
 * and one PostgresStore pool (only where a server can run), whose
 * relayers' writes race in the server. `seeds` says how many histories
 * each runs.
 */
export function sharedBackends(
  seeds: { memory: number; kv: number; sqlite: number; postgres: number },
): SharedBackend[] {
  return [
    {
      name: "MemoryStore",
      seeds: seeds.memory,
      open() {
        const one = new MemoryStore();
        return Promise.resolve({ stores: [one, one, one], close() {} });
      },
    },
    {
      name: "KvStore, three instances on one Deno KV",
      seeds: seeds.kv,
      async open() {
        const kv = await Deno.openKv(":memory:");
        return {
          stores: [new KvStore(kv), new KvStore(kv), new KvStore(kv)],
          close: () => kv.close(),
        };
      },
    },
    {
      name: "KvStore, one SQLite file opened three times",
      seeds: seeds.sqlite,
      async open() {
        const dir = await Deno.makeTempDir();
        const path = `${dir}/relayer.kv`;
        const kvs = [
          await Deno.openKv(path),
          await Deno.openKv(path),
          await Deno.openKv(path),
        ];
        return {
          stores: kvs.map((kv) => new KvStore(kv)),
          async close() {
            for (const kv of kvs) kv.close();
            await Deno.remove(dir, { recursive: true });
          },
        };
      },
    },
    ...(postgresAvailable
      ? [{
        name: "PostgresStore",
        seeds: seeds.postgres,
        async open() {
          const { store, close } = await postgresBackend.open();
          return { stores: [store, store, store], close };
        },
      }]
      : []),
  ];
}

const READS = new Set([
  "getIntent",
  "deliveries",
  "getDeadLetter",
  "listDeadLetters",
]);

/** A store that counts the write calls made through it. */
export function watchWrites(store: Store): { store: Store; writes(): number } {
  let writes = 0;
  const watched = new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        if (!READS.has(String(key))) writes++;
        return value.apply(target, args);
      };
    },
  });
  return { store: watched, writes: () => writes };
}

/**
 * `store` with its every `recordBroadcast` failing, as a store down for
 * them: a send's tx is then on no record, known to its process alone.
 */
export function recordsFail(store: Store): Store {
  return new Proxy(store, {
    get(target, key) {
      if (key === "recordBroadcast") {
        return () => Promise.reject(new Error("store down"));
      }
      const value = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/**
 * A store whose `transition` calls wait at the gate: `reached` resolves
 * when the first one arrives (a delivery that read the intent is at its
 * write-ahead), and `release()` lets them all through.
 */
export function gateTransitions(store: Store): {
  store: Store;
  reached: Promise<void>;
  release(): void;
} {
  let reach!: () => void;
  const reached = new Promise<void>((r) => reach = r);
  let release!: () => void;
  const gate = new Promise<void>((r) => release = r);
  const gated = new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      if (key !== "transition") return value.bind(target);
      return async (...args: unknown[]) => {
        reach();
        await gate;
        return await value.apply(target, args);
      };
    },
  });
  return { store: gated, reached, release };
}

/**
 * A store whose write-ahead (the write that keeps the lease across the
 * send) takes `delayMs` of the injected clock `clock`.
 */
export function slowWriteAhead(
  store: Store,
  clock: { t: number },
  delayMs: number,
): Store {
  return new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      return async (...args: unknown[]) => {
        const written = await value.apply(target, args);
        const options = args.at(-1) as WriteOptions | undefined;
        if (options?.lease?.keep) clock.t += delayMs;
        return written;
      };
    },
  });
}

/**
 * `store` with some of its methods replaced; the others are its own,
 * bound to it (its private fields need the real receiver).
 */
export function overriding(store: Store, methods: Partial<Store>): Store {
  return new Proxy(store, {
    get(target, key) {
      if (Object.hasOwn(methods, key)) {
        return methods[key as keyof Store];
      }
      const value = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/**
 * `store` as a store of one's own that ignores a write's `unlessCounted`
 * (the give-up marks a late copy's write ahead of its send carries): the
 * relayer's guard against a late copy is then left out.
 */
export function ignoringUnlessCounted(store: Store): Store {
  const strip = (options: WriteOptions = {}): WriteOptions => {
    const { unlessCounted: _, ...rest } = options;
    return rest;
  };
  return overriding(store, {
    transition: (id, change, options) =>
      store.transition(id, change, strip(options)),
    beginBroadcast: (id, version, at, options) =>
      store.beginBroadcast(id, version, at, strip(options)),
    recordBroadcast: (id, version, broadcast, options) =>
      store.recordBroadcast(id, version, broadcast, strip(options)),
  });
}

/**
 * A fresh store on `backend` holding one authorized intent with its hold
 * pending: where most relayer tests start. Closed again if that fails.
 */
export async function openAuthorized(
  backend: Backend,
  id: string,
): Promise<OpenStore> {
  const opened = await backend.open();
  try {
    await opened.store.createIntent({
      id,
      state: "authorized",
      hold: "pending",
    });
  } catch (error) {
    await opened.close();
    throw error;
  }
  return opened;
}

/**
 * `store`, whose admissions of a claim answer `ms` after they landed, or,
 * with `lose`, fail then as a connection lost after the commit does.
 */
export function slowClaims(store: Store, ms: number, lose = false): Store {
  return new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key);
      if (typeof value !== "function") return value;
      if (key !== "admit") return value.bind(target);
      return async (admission: Admission) => {
        const admitted = await target.admit(admission);
        if (admission.claim !== undefined) {
          await new Promise((resolve) => setTimeout(resolve, ms));
          if (lose) {
            throw new Error(
              "PostgreSQL lost the connection during the write (Error: write CONNECTION_CLOSED): it may have landed or not; the next read says which",
            );
          }
        }
        return admitted;
      };
    },
  });
}
