/**
 * Marks an error carries from where it is known to where it is decided:
 * {@linkcode poison} ("retrying will not help") and {@linkcode notSent}
 * ("nothing left the process").
 *
 * The marks are found anywhere in the `cause` chain, so wrapping an error
 * for context never hides its mark. Inside `AggregateError.errors` (several
 * attempts, as `Promise.any` fails) the poison mark is found on any member,
 * like Go's `errors.Is`, and the not-sent mark counts only when every member
 * carries it: one node's refusal beside another's timeout may still be a
 * sent tx. They are `Symbol.for(...)` keys, so an error
 * marked by another copy of this module (two versions in one dependency
 * tree) is still recognised.
 *
 * @module
 */

import { hasMark, hasMarkOnEvery, messageOf } from "./_walk.ts";

const POISON = Symbol.for("@relayer/poison.poison");
const NOT_SENT = Symbol.for("@relayer/poison.not_sent");

/**
 * An error its thrower declared poison: no further delivery can help.
 * Created by {@linkcode poison}; test for it with {@linkcode isPoison},
 * which also sees it through wrappers.
 *
 * @example Catch a declared poison
 * ```ts
 * import { PoisonError, poison } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const error = poison(new Error("card number is malformed"));
 * assert.ok(error instanceof PoisonError);
 * assert.equal(error.message, "card number is malformed");
 * ```
 */
export class PoisonError extends Error {
  /**
   * Constructs a new instance.
   *
   * @param cause What went wrong; its message becomes this error's message.
   */
  constructor(cause: unknown) {
    super(messageOf(cause), { cause });
    this.name = "PoisonError";
    Object.defineProperty(this, POISON, { value: true });
  }
}

/**
 * An error its thrower declared "not sent": the broadcast did not leave
 * the process, so the chain is clean. Created by {@linkcode notSent}; test
 * for it with {@linkcode isNotSent}.
 *
 * @example Catch a declared not-sent
 * ```ts
 * import { NotSentError, notSent } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const error = notSent(new Error("signer refused: insufficient gas"));
 * assert.ok(error instanceof NotSentError);
 * assert.equal(error.name, "NotSentError");
 * ```
 */
export class NotSentError extends Error {
  /**
   * Constructs a new instance.
   *
   * @param cause What went wrong; its message becomes this error's message.
   */
  constructor(cause: unknown) {
    super(messageOf(cause), { cause });
    this.name = "NotSentError";
    Object.defineProperty(this, NOT_SENT, { value: true });
  }
}

/**
 * Declares that retrying will not help: `decide` poisons the job at once,
 * whatever the delivery number, instead of spending deliveries to confirm.
 *
 * @param cause The error (or any throwable) to wrap; kept as `cause`.
 * @returns A {@linkcode PoisonError} with the cause's message.
 *
 * @example Declare a permanent failure
 * ```ts
 * import { decide, poison } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const decision = decide(poison(new Error("unknown chain id")), 1);
 * assert.deepEqual(decision, {
 *   action: "poison",
 *   cause: "declared",
 *   reason: "retrying will not help",
 * });
 * ```
 */
export function poison(cause: unknown): PoisonError {
  return new PoisonError(cause);
}

/**
 * Declares that a broadcast did not leave the process. Only a Sender that
 * knows it should say so: an undeclared error is taken as "maybe sent",
 * because a wrong guess the other way could fail a payment whose money
 * moved.
 *
 * @param cause The error (or any throwable) to wrap; kept as `cause`.
 * @returns A {@linkcode NotSentError} with the cause's message.
 *
 * @example Declare that nothing was sent
 * ```ts
 * import { isNotSent, notSent } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const error = notSent(new Error("signer rejected the nonce"));
 * assert.ok(isNotSent(new Error("send failed", { cause: error })));
 * ```
 */
export function notSent(cause: unknown): NotSentError {
  return new NotSentError(cause);
}

/**
 * Whether `error`, or anything in its `cause` chain or inside an
 * `AggregateError`, was declared poison. Never throws and always ends,
 * whatever is thrown at it (strings, `null`, cyclic chains, hostile
 * getters, graphs without end): it reads 100,000 values at most.
 *
 * @param error Any throwable.
 * @returns `true` when a poison mark is found.
 *
 * @example Find the mark through wrappers
 * ```ts
 * import { isPoison, poison } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const deep = new Error("settle", {
 *   cause: new AggregateError([new Error("a"), poison("bad intent")]),
 * });
 * assert.equal(isPoison(deep), true);
 * assert.equal(isPoison(new Error("timeout")), false);
 * assert.equal(isPoison("a string"), false);
 * ```
 */
export function isPoison(error: unknown): boolean {
  return hasMark(error, POISON);
}

/**
 * Whether `error`, or anything in its `cause` chain, was declared not sent;
 * an `AggregateError` (a send given to several nodes, as `Promise.any`
 * fails) only when every member was. Pessimistic: a member without the
 * mark, a cycle, or a value that cannot be read may be a sent tx, so the
 * answer is then `false`. Never throws.
 *
 * @param error Any throwable.
 * @returns `true` when every attempt the error stands for was declared not sent.
 *
 * @example A timeout is not "not sent"
 * ```ts
 * import { isNotSent, notSent } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * assert.equal(isNotSent(notSent(new Error("bad signature"))), true);
 * assert.equal(isNotSent(new Error("request timed out")), false);
 * ```
 */
export function isNotSent(error: unknown): boolean {
  return hasMarkOnEvery(error, NOT_SENT);
}
