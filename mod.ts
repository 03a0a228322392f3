/**
 * A poison-job policy for a payment relayer: when a delivery of a job
 * fails, decide whether the job deserves another delivery and after how
 * long; when it does not, resolve the payment intent by the state it is in.
 *
 * - {@linkcode decide}: declared poison first, then the delivery limit,
 *   then a retry after {@linkcode backoff} (5 s doubling, capped at 2 min)
 *   with {@linkcode jitter} (equal by default: never below half).
 * - {@linkcode createRelayer}: the settle worker that runs a delivery,
 *   holds a per-intent lease, and after a poison re-reads the intent and
 *   drops the job, voids the hold then fails the intent (only if nothing was
 *   sent), or sends it to review.
 * - {@linkcode MemoryStore}: the store for tests and library use; `KvStore`
 *   (Deno KV) lives in its own entry point.
 *
 * The module uses Web APIs only: it runs unchanged on Deno, Node (20, 22, 24
 * and 26), Bun and Cloudflare Workers, and CI runs it on each.
 *
 * @example Decide after a failed delivery
 * ```ts
 * import { decide, notSent, poison } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * // A timeout at the first delivery: retry after 2.5–5 s (equal jitter).
 * const retry = decide(new Error("rpc timeout"), 1, {}, { random: () => 0 });
 * assert.deepEqual(retry, { action: "retry", delayMs: 2500, reason: "rpc timeout" });
 *
 * // A Sender that knows retrying will not help says so, anywhere in the chain.
 * const declared = new Error("send", { cause: poison(notSent(new Error("bad chain id"))) });
 * assert.equal(decide(declared, 1).action, "poison");
 * ```
 *
 * @module
 */

export * from "./policy/backoff.ts";
export * from "./policy/jitter.ts";
export * from "./policy/policy.ts";
export * from "./policy/decide.ts";
export * from "./policy/sentinels.ts";
export * from "./policy/format_duration.ts";
export * from "./policy/parse_duration.ts";
export * from "./policy/describe_policy.ts";
export * from "./policy/rescue_window.ts";
export * from "./policy/queue.ts";
export * from "./policy/check_queue.ts";
export * from "./policy/resolution.ts";
export * from "./store/store.ts";
export * from "./store/transitions.ts";
export * from "./store/conflict_error.ts";
export * from "./store/busy_error.ts";
export * from "./store/replay_error.ts";
export * from "./store/memory.ts";
export * from "./relayer/sender.ts";
export * from "./relayer/scripted_sender.ts";
export * from "./relayer/relayer.ts";
export * from "./relayer/http_sender.ts";
