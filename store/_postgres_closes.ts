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
  let watchers = WATCHERS.get(options);
  if (watchers === undefined) {
    const set = new Set<() => void>();
    watchers = set;
    WATCHERS.set(options, set);
    const chained = options as ClientOptions;
    const theirs = chained.onclose;
    let due = false;
    chained.onclose = function (this: unknown, id: number) {
      if (set.size > 0 && !due) {
        due = true;
        queueMicrotask(() => {
          due = false;
          for (const watch of [...set]) watch();
        });
      }
      return theirs?.call(this, id);
    };
  }
  const set = watchers;
  set.add(watcher);
  return () => void set.delete(watcher);
}
