/**
 * A Deno KV handle whose commits land but answer `{ ok: false }`: what a
 * KV Connect client (`Deno.openKv(url)`, `@deno/kv` on a URL) returns when
 * the answer to a commit that landed was lost and it sent the commit
 * again, on its own, and the second commit failed its checks (denokv's
 * `remote/lib.rs` re-sends after a network error or a 5xx, as its
 * protocol asks).
 *
 * @module
 */

import { type KvAtomic, type KvLike, KvStore } from "../../store/kv.ts";

/**
 * `kv`, with each commit for which `lose()` answers true (every one, by
 * default) answered `{ ok: false }` once it has landed. A commit that
 * fails on its own is answered as it failed. `beforeAnswer` runs before
 * each `{ ok: false }` is answered, the lost ones and those that failed
 * on their own: another instance's write that lands before the writer
 * reads back what its commit did.
 */
export function resendingKv(
  kv: KvLike,
  lose: () => boolean = () => true,
  beforeAnswer: () => Promise<unknown> = () => Promise.resolve(),
): KvLike & { lost: number } {
  return committing(kv, async (commit, handle) => {
    const result = await commit();
    if (result.ok && !lose()) return result;
    if (result.ok) handle.lost++;
    await beforeAnswer();
    return { ok: false };
  });
}

/**
 * `kv`, with each commit for which `lose()` answers true (every one, by
 * default) sent again once it has landed, as a KV Connect client does
 * after a lost answer, and answered as that second commit is. `between`
 * runs between the two: another instance's write that lands before the
 * commit is sent again. The second lands too if none of its checks is on
 * a key the first wrote or `between` moved.
 */
export function sentTwiceKv(
  kv: KvLike,
  lose: () => boolean = () => true,
  between: () => Promise<unknown> = () => Promise.resolve(),
): KvLike & { lost: number } {
  return committing(kv, async (commit, handle) => {
    const result = await commit();
    if (!result.ok || !lose()) return result;
    handle.lost++;
    await between();
    // Deno KV's atomic operation commits again as it was built.
    return await commit();
  });
}

/**
 * A `lose` for {@linkcode resendingKv} and {@linkcode sentTwiceKv} that
 * answers true once after each `loseNext()` (and at first, if `first`),
 * false otherwise: one commit's answer lost, where a test wants it.
 */
export function losingOnce(
  first = false,
): { lose: () => boolean; loseNext: () => void } {
  let armed = first;
  return {
    lose: () => {
      const now = armed;
      armed = false;
      return now;
    },
    loseNext: () => {
      armed = true;
    },
  };
}

/**
 * An operator on another instance (`operator`) redriving the letter of
 * `jobId` it keeps, if any: what can land while a commit's answer is lost.
 */
export async function redriveKept(
  operator: KvStore,
  jobId: string,
): Promise<void> {
  const kept = await operator.getDeadLetter(jobId);
  if (kept !== null) await operator.redrive(jobId, kept.version);
}

/**
 * A `KvStore` over `kv` wrapped by `wrap` ({@linkcode resendingKv} or
 * {@linkcode sentTwiceKv}), whose next commit after `loseNext()` has its
 * answer lost and, meanwhile, an operator on another instance redrives
 * the letter of `jobId`: what a KV Connect client meets beside a redrive.
 */
export function lostBesideRedrive(
  kv: KvLike,
  wrap: typeof resendingKv | typeof sentTwiceKv,
  jobId: string,
): { store: KvStore; lost: () => number; loseNext: () => void } {
  const operator = new KvStore(kv);
  const { lose, loseNext } = losingOnce();
  const lossy = wrap(kv, lose, () => redriveKept(operator, jobId));
  return { store: new KvStore(lossy), lost: () => lossy.lost, loseNext };
}

type Commit = ReturnType<KvAtomic["commit"]>;

/** `kv`, each atomic operation's commit answered by `answer`, given it. */
function committing(
  kv: KvLike,
  answer: (commit: () => Commit, handle: { lost: number }) => Commit,
): KvLike & { lost: number } {
  const handle = {
    lost: 0,
    getMany: (keys: Parameters<KvLike["getMany"]>[0]) => kv.getMany(keys),
    list: (
      selector: Parameters<KvLike["list"]>[0],
      options?: Parameters<KvLike["list"]>[1],
    ) => kv.list(selector, options),
    atomic(): KvAtomic {
      const atomic = kv.atomic();
      const commit = atomic.commit.bind(atomic);
      atomic.commit = () => answer(commit, handle);
      return atomic;
    },
  };
  return handle;
}
