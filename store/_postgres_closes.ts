/**
 * How PostgresStore learns that a connection of its client's pool closed:
 * postgres.js's `onclose` option, chained after the caller's own.
 *
 * postgres.js 3.4.9 hands the request at the head of its queue to a
 * connection that closes, to open it again for that request; a
 * `reserve()` handed so is dropped once the connection is open
 * (porsager/postgres#1195), and never settles. Its connection then goes
 * to the next request, or sits idle. A store's wait for a connection
 * that was queued when a connection closed may be that request: it asks
 * again, and takes whichever `reserve()` settles first.
 *
 * @module
 */

/** The options object of a postgres.js client: read again at each close. */
type ClientOptions = { onclose?: (id: number) => void };

/** Per client's options: the watchers of its closes, once the chain is installed. */
const WATCHERS = new WeakMap<object, Set<() => void>>();

/** Per client's options: how many connections of its pool closed since the chain was installed. */
const CLOSES = new WeakMap<object, { count: number }>();

/** The count of a client without options (a stand-in): none is seen. */
const UNSEEN: { readonly count: number } = { count: 0 };

/**
 * How many connections of `client`'s pool closed since the first call of
 * this or {@linkcode onPoolClose} for it (which installs the chain): a
 * count that moves, in the close's own turn (before what waited on the
 * connection hears of it), at each close after that call.
 *
 * @param client A postgres.js client (`postgres(url)`); one without
 * options (a stand-in) is not watched, and its count stays 0.
 * @returns The client's count, shared by every caller.
 */
export function poolCloses(
  client: { readonly options?: unknown },
): { readonly count: number } {
  const options = client.options;
  if (typeof options !== "object" || options === null) return UNSEEN;
  chain(options);
  return CLOSES.get(options)!;
}

/**
 * Calls `watcher` after each close of a connection of `client`'s pool,
 * until the returned function is called. The watcher runs in a microtask
 * after the close, once postgres.js handed the head of its queue on (it
 * does so right after it calls `onclose`; a `reserve()` made inside
 * `onclose` would be handed the closed connection and open it twice).
 * Several closes in one turn call it once. The caller's own `onclose` is
 * called as before, first.
 *
 * @param client A postgres.js client (`postgres(url)`); one without
 * options (a stand-in) is not watched.
 * @param watcher What to do after a close.
 * @returns What stops the watch.
 */
export function onPoolClose(
  client: { readonly options?: unknown },
  watcher: () => void,
): () => void {
  const options = client.options;
  if (typeof options !== "object" || options === null) return () => {};
  const set = chain(options);
  set.add(watcher);
  return () => void set.delete(watcher);
}

/** The watchers of `options`' closes, the chain installed first if it is not yet. */
function chain(options: object): Set<() => void> {
  const watchers = WATCHERS.get(options);
  if (watchers !== undefined) return watchers;
  const set = new Set<() => void>();
  const closes = { count: 0 };
  WATCHERS.set(options, set);
  CLOSES.set(options, closes);
  const chained = options as ClientOptions;
  const theirs = chained.onclose;
  let due = false;
  chained.onclose = function (this: unknown, id: number) {
    closes.count++;
    if (set.size > 0 && !due) {
      due = true;
      queueMicrotask(() => {
        due = false;
        for (const watch of [...set]) watch();
      });
    }
    return theirs?.call(this, id);
  };
  return set;
}
