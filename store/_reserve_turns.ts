/**
 * One `reserve()` of a postgres.js client waiting in its pool's queue at a
 * time, so that no connection is handed to two of them.
 *
 * postgres.js 3.4.9 hands an idle connection to the `reserve()` at the
 * head of its queue inside the pool's `onopen`, and marks the connection
 * reserved only when that `reserve()`'s `await` resumes, a microtask
 * later. When `onopen` first sent queries queued ahead of the `reserve()`
 * on that connection, their answers come back while it is still unmarked;
 * and Deno's `node:net` can emit a socket's next chunk before the
 * microtasks queued while the last one was read. If the last of those
 * answers is read so, the connection looks idle and unreserved, and
 * `onopen` hands it to the next waiting `reserve()` as well. Two writes
 * then share one server session: one's `BEGIN` runs inside the other's
 * transaction, one's `COMMIT` commits the other's statements with its own,
 * and the statements the first had queued behind its connection are never
 * sent (its write unanswered; the second failing with "current transaction
 * is aborted" when the first's check failed). Two relayer processes on one
 * database met it about once in 60 runs of their race test.
 *
 * A `reserve()` made after the one before it settled cannot meet it: by
 * then that connection is marked.
 *
 * Until it is marked, the connection is among the pool's busy ones, and a
 * plain query handed to the pool then goes out on it, ahead of the
 * write's first query. So the store's plain requests take turns too:
 * while a `reserve()` made here waits, they are held back, and go out
 * when the turn passes, before the next `reserve()` is made
 * ({@linkcode plainInTurn}).
 *
 * A close of a connection of the pool hands the head of postgres.js's queue
 * to that connection to open it again. A `reserve()` handed so is never
 * handed a connection: dropped once the connection is open, it never settles
 * (porsager/postgres#1195); failing to open, or opening on the server's
 * goodbye kept from the session that ended, it is rejected. One behind
 * another request stays queued, and is handed a connection later
 * (`tests/store/postgres_reserve_closes_test.ts`). Which of them the holder
 * is cannot be seen from here. So after a close, a round of probes goes out
 * at once: one more than the pool has connections, each a `SELECT 1` after
 * which its connection takes no other query until it is answered. While a
 * `reserve()` waits, no connection is idle, and each takes at most one
 * probe: a closed one opens for it; a busy one, or one freed meanwhile, is
 * full with it until its answer, which comes in a later turn of the event
 * loop. So one probe at least goes into the queue behind the holder, if the
 * holder is still there, and the queue is served in order: once every probe
 * settled, the holder left it, handed a connection (and settled, before) or
 * handed to a closed connection (never to be handed one). The turn passes on
 * then. Passing it at the close itself had two `reserve()`s waiting at once
 * whenever a request was ahead of the holder. A probe that never settles
 * (postgres.js 3.4.9 loses a query handed to a connection between its
 * socket's error and its close) holds the turn until that close, whose round
 * passes it.
 *
 * @module
 */

import { onPoolClose } from "./_postgres_closes.ts";

/** A client whose `reserve()` takes turns here, and that sends the probes after a close. */
type Reserving<T> = {
  readonly options?: unknown;
  reserve(): Promise<T>;
  unsafe?(
    query: string,
    args: never[],
    options: Record<string, unknown>,
  ): { execute(): PromiseLike<unknown> };
};

/**
 * Per pool: whether a `reserve()` of its is waiting, and who waits for the
 * turn. Keyed by the client's `options`, the one object of its pool
 * (postgres.js's closes are watched on it too), so that a wrapper of the
 * client (a `Proxy`, as an instrumentation makes, passes `options`
 * through) takes turns with the client itself; by the client where it has
 * none.
 */
const TURNS = new WeakMap<object, Turns>();

/** A pool's turn: whether a `reserve()` of its is waiting, and who waits for the turn. */
interface Turns {
  held: boolean;
  queue: Waiter[];
  /** The queue's length at which the callers that gave up are let go (see `reserveInTurn`). */
  pruneAt: number;
  /**
   * The plain requests (a query handed to the pool, a `begin()`) made
   * through {@linkcode plainInTurn} while the turn was held: sent, in
   * order, when it passes, before the next `reserve()` is made.
   */
  plain: (() => void)[];
}

/** A caller waiting for the turn. */
interface Waiter {
  /** Whether it stopped waiting. */
  readonly gaveUp: () => boolean;
  /** Answers it `null`, its turn not taken. */
  readonly passOver: () => void;
  /** Takes the turn for it. */
  readonly take: () => void;
}

/**
 * The least queue length at which the callers that gave up are let go: a
 * `reserve()` may hold the turn for as long as every connection of the
 * pool is busy, and each write that waits behind it gives up after its
 * `connectionWaitMs`, so the queue would otherwise keep every write of
 * that time. Let go whenever the queue doubled since it was last let go
 * or the turn last passed, it holds at most twice the callers waiting
 * then, or this, and each caller costs O(1) of the work.
 */
const PRUNE_AT = 64;

/** The object a client's turns are kept under. */
function pool(client: Reserving<unknown>): object {
  const options = client.options;
  return typeof options === "object" && options !== null ? options : client;
}

/**
 * `client.reserve()`, once no other `reserve()` made through this is
 * waiting for a connection of the same client (or of a wrapper of it).
 *
 * @param client A postgres.js client.
 * @param gaveUp Whether the caller stopped waiting: asked when its turn
 * comes, and then no `reserve()` is made; asked as well while it waits,
 * so that a caller that gave up is let go (answered `null`) before its
 * turn: the queue holds at most 64, or twice the callers still waiting
 * when it was last let go or the turn last passed, however long a
 * `reserve()` holds the turn.
 * @returns The reserved connection, or `null` when the caller gave up
 * before its turn; rejects as `client.reserve()` does.
 */
export function reserveInTurn<T>(
  client: Reserving<T>,
  gaveUp: () => boolean,
): Promise<T | null> {
  const key = pool(client);
  let turns = TURNS.get(key);
  if (turns === undefined) {
    turns = { held: false, queue: [], pruneAt: PRUNE_AT, plain: [] };
    TURNS.set(key, turns);
  }
  const mine = turns;
  return new Promise<T | null>((resolve, reject) => {
    const take = () => {
      mine.held = true;
      // A microtask later: postgres.js hands a query to its pool a
      // microtask after it is awaited, so one awaited before the turn was
      // taken (a `begin()`'s `BEGIN` among them) is on a connection before
      // this `reserve()` is in the pool's queue (see `plainInTurn`).
      queueMicrotask(() => {
        let passed = false;
        const pass = () => {
          if (passed) return;
          passed = true;
          stopWatch();
          passOn(mine);
        };
        // After a close, once a round of probes settled while this waits:
        // it is out of postgres.js's queue, never to be handed a connection.
        const stopWatch = onPoolClose(client, () => {
          void probesSettled(client).then(pass);
        });
        // Settled once postgres.js marked the connection reserved: the next
        // `reserve()` can no longer be handed it.
        client.reserve().then((connection) => {
          pass();
          resolve(connection);
        }, (error) => {
          pass();
          reject(error);
        });
      });
    };
    const waiter: Waiter = { gaveUp, passOver: () => resolve(null), take };
    if (!mine.held) {
      if (gaveUp()) waiter.passOver();
      else take();
      return;
    }
    mine.queue.push(waiter);
    if (mine.queue.length >= mine.pruneAt) {
      mine.queue = mine.queue.filter((queued) => {
        if (!queued.gaveUp()) return true;
        queued.passOver();
        return false;
      });
      mine.pruneAt = Math.max(PRUNE_AT, 2 * mine.queue.length);
    }
  });
}

/**
 * Gives the turn to the next waiting `reserve()`, if any, passing over
 * (in a loop: thousands may have given up while the turn was held) the
 * callers that gave up.
 */
function passOn(turns: Turns): void {
  turns.held = false;
  // Out before the next `reserve()` is in the pool's queue.
  for (const send of turns.plain.splice(0)) send();
  for (let next = turns.queue.shift(); next; next = turns.queue.shift()) {
    if (next.gaveUp()) {
      next.passOver();
      continue;
    }
    next.take();
    break;
  }
  // Served ones leave no room for as many that gave up: the next let-go
  // comes once the queue doubled from what is left.
  turns.pruneAt = Math.min(
    turns.pruneAt,
    Math.max(PRUNE_AT, 2 * turns.queue.length),
  );
}

/**
 * Settles once each of a round of probes settled: one more than the pool
 * of `client` has connections, all sent at once, each a `SELECT 1` after
 * which its connection takes nothing more until the server answered it
 * (postgres.js's `onexecute` answering no, as its `sql.begin()` does for
 * its `BEGIN`).
 */
function probesSettled(client: Reserving<unknown>): Promise<unknown> {
  const { max } = (client.options ?? {}) as { max?: unknown };
  const probes = Array.from(
    { length: (Number(max) || 1) + 1 },
    () => client.unsafe?.("SELECT 1", [], ALONE).execute(),
  );
  return Promise.allSettled(probes);
}

/**
 * The options of a probe: postgres.js 3.4.9 moves a connection that
 * executed it to its full connections, handed no more queries until its
 * answer came (an option of `sql.unsafe()` its types leave out).
 */
const ALONE = { onexecute: () => false } as Record<string, unknown>;

/** Per client: the client whose plain requests take turns with its `reserve()`s (see `plainInTurn`). */
const PLAIN = new WeakMap<object, unknown>();

/**
 * `client`, its plain requests held back while one of its `reserve()`s
 * made through {@linkcode reserveInTurn} waits, and sent when the turn
 * passes: a query with values (the tagged template, `unsafe()`) when
 * postgres.js hands it to its pool, a `begin()` when it is called.
 *
 * postgres.js 3.4.9 hands an idle connection to the `reserve()` at the
 * head of its queue and moves it out of its busy connections only when
 * that `reserve()`'s `await` resumes, a microtask later. A query handed to
 * the pool meanwhile (one awaited a microtask before; Deno's `node:net`
 * reads a socket's chunk in a microtask of its own) can go out on that
 * connection; and a `reserve()`'s first query is written at once, behind
 * it. A query postgres.js describes first (one with parameters on its
 * first run on a connection; every one with `prepare: false`) has only
 * its `Parse` and `Describe` out then, and its answers are matched to
 * queries by their order: it took the other's answers as its own (a read
 * of an intent answered with a write's rows) and the write was refused
 * "unnamed prepared statement does not exist"
 * (`tests/store/postgres_reserve_window_test.ts`). A `BEGIN` of
 * `begin()` there would give the connection two owners. Held back while
 * the turn is held, none is handed to the pool in that window. A query
 * without values is sent whole, and answered before the write's: it goes
 * at once (the store's question that lets go of a connection it holds is
 * one; held back, it waited for the very `reserve()` waiting for that
 * connection, `tests/store/postgres_offset_answer_test.ts`).
 *
 * @param client A postgres.js client.
 * @returns The same client for everything else, one per client.
 */
export function plainInTurn<C extends object>(client: C): C {
  const known = PLAIN.get(client);
  if (known !== undefined) return known as C;
  const key = pool(client as Reserving<unknown>);
  /** Sends `send` now, or when the turn passes if it is held. */
  const inTurn = (send: () => void) => {
    const turns = TURNS.get(key);
    if (turns?.held) turns.plain.push(send);
    else send();
  };
  /**
   * `query`, handed to the pool in turn if it is a postgres.js query that
   * may be described first: one with values. One without (a simple query,
   * a tagged template with none) is sent whole, its answers before the
   * write's; and the store's queries that let a connection it holds go
   * are such (a write waiting for the turn may wait for that connection).
   */
  const held = <Q>(query: Q): Q => {
    const q = query as {
      handler?: unknown;
      handle?: unknown;
      args?: unknown;
      options?: { simple?: unknown };
    };
    if (
      typeof q?.handler === "function" && typeof q.handle === "function" &&
      q.options?.simple !== true &&
      !(Array.isArray(q.args) && q.args.length === 0)
    ) {
      const send = q.handler as (self: unknown) => void;
      q.handler = (self: unknown) => inTurn(() => send(self));
    }
    return query;
  };
  const gated = new Proxy(client, {
    apply: (target, self, args) =>
      held(Reflect.apply(target as () => unknown, self, args)),
    get(target, name) {
      const value = Reflect.get(target, name);
      if (typeof value !== "function") return value;
      if (name === "unsafe") {
        return (...args: unknown[]) => held(Reflect.apply(value, target, args));
      }
      if (name === "begin") {
        return (...args: unknown[]) =>
          new Promise((resolve, reject) =>
            inTurn(() => {
              try {
                resolve(Reflect.apply(value, target, args));
              } catch (error) {
                reject(error);
              }
            })
          );
      }
      return value;
    },
  });
  PLAIN.set(client, gated);
  return gated;
}
