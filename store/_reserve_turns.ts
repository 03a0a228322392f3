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
 * then that connection is marked. A close of a connection of the pool
 * passes the turn on too, as it may have stranded the `reserve()` that
 * held it (porsager/postgres#1195).
 *
 * @module
 */

import { onPoolClose } from "./_postgres_closes.ts";

/** A client whose `reserve()` takes turns here. */
type Reserving<T> = { readonly options?: unknown; reserve(): Promise<T> };

/** Per client: whether a `reserve()` of its is waiting, and who waits for the turn. */
const TURNS = new WeakMap<object, { held: boolean; queue: (() => void)[] }>();

/**
 * `client.reserve()`, once no other `reserve()` made through this is
 * waiting for a connection of the same client.
 *
 * @param client A postgres.js client.
 * @param gaveUp Whether the caller stopped waiting: asked when its turn
 * comes, and then no `reserve()` is made.
 * @returns The reserved connection, or `null` when the caller gave up
 * before its turn; rejects as `client.reserve()` does.
 */
export function reserveInTurn<T>(
  client: Reserving<T>,
  gaveUp: () => boolean,
): Promise<T | null> {
  let turns = TURNS.get(client);
  if (turns === undefined) {
    turns = { held: false, queue: [] };
    TURNS.set(client, turns);
  }
  const mine = turns;
  return new Promise<T | null>((resolve, reject) => {
    const take = () => {
      if (gaveUp()) {
        resolve(null);
        passOn(mine);
        return;
      }
      mine.held = true;
      let passed = false;
      const pass = () => {
        if (passed) return;
        passed = true;
        stopWatch();
        passOn(mine);
      };
      const stopWatch = onPoolClose(client, pass);
      // Settled once postgres.js marked the connection reserved: the next
      // `reserve()` can no longer be handed it.
      client.reserve().then((connection) => {
        pass();
        resolve(connection);
      }, (error) => {
        pass();
        reject(error);
      });
    };
    if (mine.held) mine.queue.push(take);
    else take();
  });
}

/** Gives the turn to the next waiting `reserve()`, if any. */
function passOn(turns: { held: boolean; queue: (() => void)[] }): void {
  turns.held = false;
  turns.queue.shift()?.();
}
