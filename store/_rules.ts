/**
 * The rules every store enforces, written once: the transition table, the
 * hold ledger and the shape of a broadcast. A store adds only the
 * compare-and-set on versions and its own persistence.
 *
 * @module
 */

import { BusyError } from "./busy_error.ts";
import { ConflictError } from "./conflict_error.ts";
import { ReplayError } from "./replay_error.ts";
import type {
  Broadcast,
  Claim,
  DeadLetter,
  DeadLetterPage,
  HoldState,
  Intent,
  Marks,
  NewIntent,
  StoredDeadLetter,
  Transition,
  WriteOptions,
} from "./store.ts";
import { canTransition, INTENT_STATES } from "./transitions.ts";
import { assertOptionNames, show } from "../policy/_validate.ts";

/** A `ConflictError` for a write the rules refuse, not a lost race. */
function refusal(message: string): ConflictError {
  return new ConflictError(message, { refused: true });
}

/**
 * Whether `error` is a write a store refused by its rules, not a
 * compare-and-set lost to another writer: a fresh read would meet the
 * same refusal.
 */
export function isRefusal(error: unknown): boolean {
  return error instanceof ConflictError && error.refused;
}

/**
 * Why the dead letter of `jobId` cannot be redriven, its intent being in
 * `state` (absent when the intent is gone), or `null` when a job can help.
 * A gone intent's job would only retry "not found" until it is poisoned
 * again, and its letter come back: `POST /v1/jobs` refuses such a job too.
 * A letter that records an unreadable message, not a job, is refused too.
 */
export function redriveRefusal(
  jobId: string,
  intentId: string,
  state: Intent["state"] | undefined,
): ConflictError | null {
  if (jobId !== `${intentId}/settle`) {
    // `<queue>/<id>/unreadable` records a message no job was read from:
    // its intentId is empty, or only what could be read of the message.
    return refusal(
      `Cannot redrive ${jobId} as it records an unreadable queue message, not a job: there is nothing to redrive. Publish a readable job for its intent (POST /v1/jobs) if it needs one, then discard the letter`,
    );
  }
  if (state === undefined) {
    return refusal(
      `Cannot redrive ${jobId} as intent ${intentId} does not exist: a job for it would only retry "not found" until poisoned again. Create the intent (POST /v1/intents), then redrive, or discard the letter`,
    );
  }
  if (state !== "settled" && state !== "failed" && state !== "needs_review") {
    return null;
  }
  // What to do instead, said here: an operator who redrives every letter
  // of a burst meets this refusal for each one that needs something else.
  return refusal(
    `Cannot redrive ${jobId} as intent ${intentId} is already ${state}: no job can help it${
      state === "needs_review"
        ? " (its dead letter is the record of why it is in review). Check the chain, resolve the review by hand (settle or fail the intent), then discard the letter"
        : ". Discard the letter once nobody needs the record"
    }`,
  );
}

/** An intent without its version: what a store persists. */
export type IntentRecord = Omit<Intent, "version">;

/** Not `.` or `..`: in a URL path (`/v1/intents/..`) it is resolved away. */
const INTENT_ID = /^(?!\.\.?$)[A-Za-z0-9_.:-]{1,128}$/;

/** What {@linkcode isIntentId} takes, in words, for every message that refuses an id. */
export const INTENT_ID_RULE =
  '1-128 characters of A-Z a-z 0-9 _ . : -, not "." or ".."';

/** Whether `id` is a usable intent id: 1–128 of `A–Z a–z 0–9 _ . : -`, not `.` or `..`. */
export function isIntentId(id: unknown): id is string {
  return typeof id === "string" && INTENT_ID.test(id);
}

/**
 * What a `Store`'s `getIntent` answered for `id`, refused unless an object
 * or `null`: `undefined` (a `Map`'s get) or a row's text, from a store of
 * one's own, named as it came, not met later as "Cannot read properties
 * of undefined".
 */
export function intentOrNull(id: string, intent: unknown): Intent | null {
  if (intent === null || typeof intent === "object") {
    return intent as Intent | null;
  }
  throw new TypeError(
    `Cannot read intent ${id} as the store returned ${
      show(intent)
    }, not an intent or null: fix the Store's getIntent, and run the store contract (@relayer/poison/testing) against it`,
  );
}

/**
 * What a `Store`'s `getDeadLetter` answered for `jobId`, refused unless an
 * object or `null`: `undefined` (a `Map`'s get) read as a letter that
 * failed to load, or as one whose fields could not be read.
 */
export function letterOrNull(
  jobId: string,
  letter: unknown,
): StoredDeadLetter | null {
  if (letter === null || typeof letter === "object") {
    return letter as StoredDeadLetter | null;
  }
  throw new TypeError(
    `Cannot read the dead letter of ${jobId} as the store returned ${
      show(letter)
    }, not a dead letter or null: fix the Store's getDeadLetter, and run the store contract (@relayer/poison/testing) against it`,
  );
}

/**
 * What a `Store`'s write (`transition`, `beginBroadcast`,
 * `recordBroadcast`) answered for intent `id`, refused unless an object: a
 * store of one's own that returns nothing (a `return` left out) met the
 * relayer as "Cannot read properties of undefined (reading 'id')". The
 * write may have landed: the refusal says to fix the store, not to retry.
 */
export function writtenIntent(
  method: string,
  id: string,
  intent: unknown,
): Intent {
  if (typeof intent === "object" && intent !== null) return intent as Intent;
  throw new TypeError(
    `Cannot read intent ${id} after the store's ${method}() as it returned ${
      show(intent)
    }, not the intent as written: fix the Store's ${method} to answer it, and run the store contract (@relayer/poison/testing) against it`,
  );
}

/**
 * What a `Store`'s `listDeadLetters` answered, refused unless a page
 * (`{ items, cursor }` with `items` an array): one that returned nothing
 * answered `GET /v1/dead-letters` with a 200 and no body.
 */
export function deadLetterPage(page: unknown): DeadLetterPage {
  if (
    typeof page === "object" && page !== null &&
    Array.isArray((page as { items?: unknown }).items)
  ) return page as DeadLetterPage;
  throw new TypeError(
    `Cannot list dead letters as the store's listDeadLetters() returned ${
      show(page)
    }, not a page of them ({ items, cursor }): fix the Store's listDeadLetters, and run the store contract (@relayer/poison/testing) against it`,
  );
}

/**
 * What a `Store`'s `deliveries` answered for `key`, refused unless a count
 * (an integer >= 0): a store of one's own that answers `"0"` (a driver's
 * int8 read as text) made a give-up mark that is not on record read as on
 * record (`"0" === 0` is false), and the ops route answered the count as
 * text. One `typeof` on the common path.
 */
export function countOrThrow(key: string, count: unknown): number {
  if (
    typeof count === "number" && Number.isSafeInteger(count) && count >= 0
  ) return count;
  throw new TypeError(
    `Cannot read the delivery count of ${key} as the store's deliveries() returned ${
      show(count)
    }, not a count (an integer >= 0): fix the Store's deliveries (a count read as text or as a BigInt must be made a number), and run the store contract (@relayer/poison/testing) against it`,
  );
}

/** The fields of a `NewIntent`; any other but `version` is a misspelling. */
const NEW_INTENT_FIELDS: readonly string[] = Object.keys(
  {
    id: true,
    state: true,
    hold: true,
    lastBroadcast: true,
    broadcasting: true,
    mayHaveSent: true,
    txHashes: true,
    settlingSince: true,
  } satisfies Record<keyof NewIntent, true>,
);

/**
 * Refuses a field of `intent` that a new intent does not take: a misspelt
 * one (`satte`, `hld`) created the intent with the default the caller did
 * not mean, a created intent or one with no hold. Named (its first 40
 * characters), never its value. An intent's `version`, as a read returns
 * it, is ignored: an intent read from one store and created in another
 * carries it, and the new intent has a version of its own.
 */
function checkNewIntentFields(intent: object): void {
  for (const name of Object.keys(intent)) {
    if (name === "version" || NEW_INTENT_FIELDS.includes(name)) continue;
    const id = (intent as { id?: unknown }).id;
    throw new TypeError(
      `Cannot create intent${isIntentId(id) ? ` ${id}` : ""} as ${
        JSON.stringify(name.slice(0, 40))
      } is not a field of a new intent (${
        NEW_INTENT_FIELDS.join(", ")
      }; the version of an intent read is ignored): check its spelling`,
    );
  }
}

/** Checks the fields of a new intent and fills in the defaults. */
export function newIntentRecord(intent: NewIntent): IntentRecord {
  if (typeof intent !== "object" || intent === null) {
    throw new TypeError(
      `Cannot create intent as 'intent' must be an object such as { id, state, hold }: current value is ${
        show(intent)
      }`,
    );
  }
  checkNewIntentFields(intent);
  if (!isIntentId(intent.id)) {
    throw new TypeError(
      `Cannot create intent as 'id' must be ${INTENT_ID_RULE}: current value is ${
        show(intent.id)
      }`,
    );
  }
  const state = intent.state ?? "created";
  if (!INTENT_STATES.includes(state)) {
    throw new TypeError(
      `Cannot create intent as 'state' is not an intent state: current value is ${
        show(state)
      }`,
    );
  }
  const hold = intent.hold ?? null;
  if (
    hold !== null && hold !== "pending" && hold !== "voided" &&
    hold !== "captured"
  ) {
    throw new TypeError(
      `Cannot create intent as 'hold' must be "pending", "voided", "captured" or null: current value is ${
        show(hold)
      }`,
    );
  }
  if (
    (state === "failed" && (hold === "pending" || hold === "captured")) ||
    (state === "settled" && hold === "voided")
  ) {
    // No write of the rules reaches these (I2, I6): a failed payment's
    // funds reserved forever, or taken while it did not happen; a settled
    // one's released while the payee was paid.
    throw new TypeError(
      `Cannot create intent ${intent.id} as ${state} with its hold ${hold}: a ${state} intent's hold is ${
        state === "failed" ? "voided" : "captured"
      } (or not recorded). Import it with the hold it has on the ledger, or in the state its hold says`,
    );
  }
  const settlingSince = intent.settlingSince ?? null;
  if (state === "settling" && !Number.isFinite(settlingSince)) {
    throw new TypeError(
      `Cannot create intent ${intent.id} in settling without a finite 'settlingSince'`,
    );
  }
  const lastBroadcast = intent.lastBroadcast ?? null;
  const broadcasting = intent.broadcasting ?? null;
  const txHashes = intent.txHashes ?? [];
  if (
    !Array.isArray(txHashes) ||
    !txHashes.every((hash) => typeof hash === "string")
  ) {
    throw new TypeError(
      `Cannot create intent ${intent.id} as 'txHashes' must be an array of tx hashes`,
    );
  }
  // Unless the caller says, anything that could have left counts: a send
  // in flight or not declared unsent, a tx hash on record, a settling
  // intent with no broadcast on record (entering settling is the
  // write-ahead of a send, so one may be hidden; DESIGN §5), or an intent
  // in review, whatever its record: it is there because money may have
  // moved (DESIGN §2), and false would let its hold be voided alone and
  // the resolve route fail it without a look at its nonce.
  const mayHaveSent = intent.mayHaveSent ??
    (broadcasting !== null ||
      (lastBroadcast !== null && lastBroadcast.outcome !== "not_sent") ||
      txHashes.length > 0 ||
      (state === "settling" && lastBroadcast === null) ||
      state === "needs_review");
  checkImportedSends(intent.id, state, {
    lastBroadcast,
    broadcasting,
    txHashes,
    mayHaveSent,
    told: intent.mayHaveSent,
  });
  return checkRecord({
    id: intent.id,
    state,
    hold,
    lastBroadcast: frozenBroadcast(keptBroadcast(lastBroadcast)),
    broadcasting,
    mayHaveSent,
    txHashes: knownTxHashes(txHashes, lastBroadcast),
    settlingSince,
  });
}

/**
 * Refuses an import whose record contradicts itself about what may have
 * left, where the rules would read it as clean: `mayHaveSent: false`
 * beside a send on record (a sent or unknown last broadcast, a tx hash, a
 * send in flight before the move to settling), or a `created` intent with
 * a send at all. The relayer takes `mayHaveSent` for its nonce (a send
 * afresh while it is false) and the void and fail rules take it for the
 * chain, so either would pay twice, or release the payer's funds, while
 * that send may still land. No store write reaches such a record.
 */
function checkImportedSends(
  id: string,
  state: Intent["state"],
  record:
    & Pick<
      IntentRecord,
      "lastBroadcast" | "broadcasting" | "txHashes" | "mayHaveSent"
    >
    & { readonly told: boolean | undefined },
): void {
  const { lastBroadcast, broadcasting, txHashes, told } = record;
  const outcome = lastBroadcast?.outcome;
  const onRecord = outcome === "sent" || outcome === "unknown"
    ? `its last broadcast is ${outcome}`
    : txHashes.length > 0
    ? `it has a tx hash on record (${JSON.stringify(txHashes[0])})`
    : null;
  if (
    state === "created" &&
    (record.mayHaveSent || onRecord !== null || broadcasting !== null)
  ) {
    const why = onRecord ??
      (broadcasting !== null
        ? "it has a broadcast in flight ('broadcasting')"
        : "'mayHaveSent' is true");
    throw new TypeError(
      `Cannot create intent ${id} as created with a send that may have left (${why}): a created intent has sent nothing, as its first send follows its authorization, and its hold could be voided while that send may still land. Import it as authorized with its hold pending (its job then sends on that send's nonce, and its hold is released only through review), or leave out the fields of a send you know never left`,
    );
  }
  if (told !== false) return;
  if (onRecord !== null) {
    throw new TypeError(
      `Cannot create intent ${id} with 'mayHaveSent' false as ${onRecord}: that send may have left${
        outcome === "unknown" ? "" : " (the node accepted it)"
      }, and on a record that says nothing did, a send may follow on a fresh nonce, which could land beside it and pay twice, or the hold be voided while it may still land. Leave 'mayHaveSent' out (it then counts that send) or pass true${
        outcome === "unknown"
          ? ", or record that broadcast as not_sent if you know nothing of it left"
          : ""
      }`,
    );
  }
  if (broadcasting !== null && state === "authorized") {
    throw new TypeError(
      `Cannot create intent ${id} with 'mayHaveSent' false as it is authorized with a broadcast in flight ('broadcasting'): a send before the move to settling is another process's, which may have left, and its job would send again on a fresh nonce, which could land beside it and pay twice. Leave 'mayHaveSent' out (it then counts that send, and its job sends on that send's nonce) or pass true, or leave 'broadcasting' out if you know that send never left`,
    );
  }
}

/** How many tx hashes an intent keeps (the newest): far more than any payment's rescues. */
export const MAX_TX_HASHES = 32;

/**
 * The tx hashes on record: `txHashes` (absent in an intent stored before
 * they were kept, or written by such a process), with the last broadcast's
 * hash if it was sent and is missing there; frozen, the newest
 * {@linkcode MAX_TX_HASHES}.
 */
/**
 * A broadcast no caller can change: a frozen copy, or itself if frozen.
 * Every intent a store hands out carries one, since a store may build its
 * next write on what it handed out.
 */
export function frozenBroadcast(
  broadcast: Broadcast | null,
): Broadcast | null {
  return broadcast === null || Object.isFrozen(broadcast)
    ? broadcast
    : Object.freeze({ ...broadcast });
}

export function knownTxHashes(
  txHashes: readonly string[] | undefined,
  lastBroadcast: Broadcast | null,
): readonly string[] {
  const hashes = txHashes ?? [];
  const last = lastBroadcast?.outcome === "sent"
    ? lastBroadcast.txHash
    : undefined;
  return Object.freeze(
    (last === undefined || hashes.includes(last) ? [...hashes] : [
      ...hashes,
      last,
    ]).slice(-MAX_TX_HASHES),
  );
}

/**
 * The hold after `op`, or a `ConflictError` when the ledger forbids it. A
 * hold is recorded only before the intent moves past `authorized`, so no
 * terminal intent can grow a pending hold.
 */
export function nextHold(
  intent: Pick<IntentRecord, "id" | "state" | "hold">,
  op: "record" | "void" | "capture",
): HoldState {
  const { id, hold } = intent;
  const target = op === "record"
    ? "pending"
    : op === "void"
    ? "voided"
    : "captured";
  if (hold === target) return hold;
  if (op === "record" && hold === null) {
    if (intent.state === "created" || intent.state === "authorized") {
      return "pending";
    }
    throw refusal(
      `Cannot record a hold for ${id} as it is ${intent.state}: holds are recorded before authorization`,
    );
  }
  if (op !== "record" && hold === "pending") return target;
  throw refusal(
    `Cannot ${op} the hold of ${id} as it is ${hold ?? "not recorded"}`,
  );
}

/**
 * Checks that an operator's (or the payments API's) direct hold change
 * fits the intent's state, then returns the hold after it. Voiding is
 * refused where money may have moved (`settled`, or `settling` or
 * `authorized`, imported so, with a broadcast that may have left); a
 * `needs_review` intent with one is
 * voided only in a move out of review (`to`, the state of the move the
 * change rides in: the resolution's move to `failed`), never alone.
 * Capturing only fits the states that move to `settled` (`settling`,
 * `needs_review`).
 */
export function heldBy(
  intent: Pick<
    IntentRecord,
    "id" | "state" | "hold" | "mayHaveSent" | "broadcasting" | "txHashes"
  >,
  op: "record" | "void" | "capture",
  to?: Intent["state"],
): HoldState {
  const next = nextHold(intent, op);
  if (next === intent.hold) return next;
  const { id, state } = intent;
  if (
    op === "void" &&
    (state === "settled" || (state === "settling" && mayHaveMoved(intent)))
  ) {
    throw refusal(
      `Cannot void the hold of ${id} as it is ${state} and money may have moved: resolve it through review`,
    );
  }
  if (op === "void" && state === "authorized" && mayHaveMoved(intent)) {
    // Imported with a send on record: its tx may still land, and would
    // pay the payee with the payer's funds released. The payments API's
    // cancel meets this: the way out starts on the chain, not here.
    throw refusal(
      `Cannot void the hold of ${id} as it is authorized with a send on record (imported so) and money may have moved: that tx may still land, and would pay the payee with the payer's funds released. Look its txs and its nonce up on the chain. Deliver its job (POST /v1/jobs): it sends again on that nonce, and the payment settles, or goes to review, where the resolve route (POST /v1/intents/${id}/resolve) settles it, or fails it and voids the hold once the chain shows none of its txs can land. To cancel the payment instead, first use its nonce with a tx of your own (a cancel on it), then deliver its job: none of its txs can land, and the resolve route fails it with "nonceChecked":true`,
    );
  }
  if (
    op === "void" && state === "needs_review" && to === undefined &&
    mayHaveMoved(intent)
  ) {
    // A void alone skips what the resolution checks first (the receipts,
    // the nonce): a tx that confirms after it pays the payee with the
    // payer's funds released, and the payment can never settle.
    throw refusal(
      `Cannot void the hold of ${id} alone as it is needs_review and money may have moved: a tx of it that confirms after the void would pay the payee with the payer's funds released. Check the chain, then resolve it through the resolve route (POST /v1/intents/${id}/resolve with "to":"failed"), or transition it to failed with ledger "void", which voids the hold in the same write`,
    );
  }
  if (op === "capture" && state !== "settling" && state !== "needs_review") {
    throw refusal(
      `Cannot capture the hold of ${id} as it is ${state}: only a settling or needs_review intent can be captured`,
    );
  }
  if (
    op === "capture" && state === "settling" &&
    (intent.txHashes.length === 0 || intent.broadcasting !== null)
  ) {
    // A settling intent is captured once a tx of it confirmed: the payee
    // was paid by a recorded send, and no other send is in flight.
    throw refusal(
      `Cannot capture the hold of ${id} as it is settling ${
        intent.txHashes.length === 0
          ? "without a sent broadcast on record"
          : "with a broadcast in flight"
      }: capture it once its tx confirms, or through review`,
    );
  }
  return next;
}

/** Whether a broadcast of the intent may have left: one in flight, or one on record that was not declared `not_sent`. */
function mayHaveMoved(
  intent: Pick<IntentRecord, "mayHaveSent" | "broadcasting">,
): boolean {
  // Only an explicit false is clean (see planResolution).
  return intent.mayHaveSent !== false || intent.broadcasting !== null;
}

/** A lease as stores keep it. */
export interface LeaseRecord {
  /** The delivery that holds it. */
  readonly owner: string;
  /** When it lapses, in milliseconds of the injected clock. */
  readonly expiresAt: number;
}

/**
 * The lease after a write that carries `lease`: the writer's own lease
 * (kept), or `null` (released, or none). Throws a `BusyError` if another
 * owner holds a live lease. `current` is the lease on record.
 */
export function leaseAfter(
  intentId: string,
  current: LeaseRecord | null,
  lease: NonNullable<WriteOptions["lease"]>,
): LeaseRecord | null {
  checkLease(lease);
  if (
    current !== null && current.owner !== lease.owner &&
    current.expiresAt > lease.now
  ) {
    throw new BusyError(
      `Cannot write intent ${intentId} as another delivery holds its lease`,
      { leaseExpiresAt: current.expiresAt },
    );
  }
  return lease.keep
    ? { owner: lease.owner, expiresAt: lease.now + lease.ttlMs }
    : null;
}

/**
 * How many times a late record (see {@linkcode lateBroadcastRecorded}) is
 * decided again on a race lost to another write of the intent.
 */
export const LATE_ATTEMPTS = 5;

/** Whether `error` is a race lost: a `ConflictError` that is no refusal. */
export function isRaceLost(error: unknown): boolean {
  return error instanceof ConflictError && !error.refused;
}

/**
 * What a late record (see {@linkcode lateBroadcastRecorded}) carries of
 * `options`: its lease only where the lease on record (`held`) is the
 * writer's own, released or kept as by any write. Another's lease, live
 * or lapsed, neither refuses it (the send's tx would then be on no record
 * again) nor is touched: it adds a fact, and the holder's next write, on
 * the version it read, meets it as a race lost.
 */
export function lateOptions(
  options: WriteOptions,
  held: LeaseRecord | null,
): WriteOptions {
  if (options.lease === undefined || held?.owner === options.lease.owner) {
    return options;
  }
  const { lease: _, ...rest } = options;
  return rest;
}

/** Throws a `ReplayError` if `existing` (the record under `claim.key`) is still live. */
export function assertClaimable(
  existing: { readonly expiresAt: number } | null,
  claim: Claim,
): void {
  checkClaim(claim);
  if (existing !== null && existing.expiresAt > claim.now) {
    throw new ReplayError(
      "Cannot accept the delivery as its signature was already used",
    );
  }
}

/**
 * How long past its `expiresAt` a replay record stays before a store may
 * delete it. The record's expiry is compared with the admitting instance's
 * clock, which decides a replay; deleting it is another matter: Deno KV's
 * `expireIn` counts from the writer's clock and PostgreSQL's sweep deletes
 * by the sweeper's. Without the grace, an instance whose clock ran more
 * than the record's minute of margin ahead of another's would forget it
 * while that other still accepts its signature, and admit a replay. (A
 * lease's key or row waits an hour for the same reason.)
 */
export const CLAIM_GRACE_MS = 10 * 60 * 1000;

/**
 * How long a delivery count lives after its last write. A Pub/Sub
 * subscription keeps a message up to 31 days, but each delivery rewrites
 * the count, and Pub/Sub redelivers each failed push (its ack deadline at
 * most 600 s) after its `maximum_backoff` (at most 600 s, best effort): a
 * count never idles this long while its message is still delivered.
 */
export const COUNT_TTL_MS = 8 * 24 * 60 * 60 * 1000;

/**
 * The longest a delivery count lives: 1,000 years, so that the store's
 * `now + ttlMs` stays a safe integer whatever the policy's cap.
 */
const MAX_COUNT_TTL_MS = 1000 * 365 * 24 * 60 * 60 * 1000;

/**
 * How long the relayer keeps what it knows of a job between two of its
 * messages (the count a store keeps, the local queue's line): 8 days
 * ({@linkcode COUNT_TTL_MS}) past the longest wait asked between two
 * deliveries, the policy's cap (its delay, and a failed delivery's wait on
 * the local queue), or a busy one's, which waits out the lease and the
 * clock skew twice. With 8 days alone, a wait past that let it lapse
 * between two deliveries: each came as the first again.
 *
 * @example
 * ```ts
 * import { COUNT_TTL_MS, countKeptMs } from "./_rules.ts";
 * import assert from "node:assert/strict";
 *
 * assert.equal(countKeptMs(120_000, 35_000, 5_000), COUNT_TTL_MS + 120_000);
 * assert.equal(countKeptMs(60_000, 864_000_000, 0), COUNT_TTL_MS + 864_000_000);
 * ```
 */
export function countKeptMs(
  capMs: number,
  leaseMs: number,
  clockSkewMs: number,
): number {
  return Math.min(
    MAX_COUNT_TTL_MS,
    COUNT_TTL_MS + Math.max(capMs, leaseMs + 2 * clockSkewMs),
  );
}

/** A delivery count as stores keep it. */
export interface CountRecord {
  /** Deliveries counted. */
  readonly n: number;
  /** When the count lapses (restarts at 1), in milliseconds of the injected clock. */
  readonly expiresAt: number;
}

/** The count after one more delivery at `now`, living `ttlMs` from then. */
export function counted(
  current: CountRecord | null,
  now: number,
  ttlMs: number = COUNT_TTL_MS,
): CountRecord {
  checkMs("now", now);
  checkCountTtl(ttlMs);
  const n = current !== null && current.expiresAt > now ? current.n + 1 : 1;
  return { n, expiresAt: now + ttlMs };
}

/**
 * Throws the refusal of a write whose `unlessCounted` names `key`, a count
 * on record (`count`) that has not lapsed by `now` (any count, without a
 * time). Nothing otherwise.
 */
export function checkUncounted(
  id: string,
  key: string,
  count: CountRecord | null,
  now: number | undefined,
): void {
  if (count === null || (now !== undefined && count.expiresAt <= now)) return;
  throw countedRefusal(id, key);
}

/** The refusal of a write whose `unlessCounted` names `key`, on record. */
export function countedRefusal(id: string, key: string): ConflictError {
  return new ConflictError(
    `Cannot write intent ${id} as ${key} is on record: the queue gave up on the message this delivery carries, so a late copy of it writes and sends nothing`,
    { refused: true },
  );
}

/**
 * The most count keys a write's `unlessCounted` may name: `KvStore` reads
 * them with the intent, its hold, lease, claim and dead letter in one
 * `getMany` (Deno KV reads 10 keys at most), and checks them beside those
 * in one commit (`@deno/kv` and `denokv` take 10 checks). A delivery names
 * one from the webhook or the Cloudflare handler, at most 2 from a
 * library caller naming both ids (`deliveryMarks` in relayer/relayer.ts).
 */
export const MAX_UNLESS_COUNTED = 5;

/** The keys of a write's `unlessCounted`, checked: strings, at most {@linkcode MAX_UNLESS_COUNTED}. */
export function uncountedKeys(options: WriteOptions): readonly string[] {
  const keys = options.unlessCounted ?? [];
  if (
    !Array.isArray(keys) || keys.length > MAX_UNLESS_COUNTED ||
    !keys.every((key) => typeof key === "string" && key !== "")
  ) {
    throw new TypeError(
      `Cannot write intent as 'unlessCounted' must be at most ${MAX_UNLESS_COUNTED} count keys (non-empty strings): current value is ${
        JSON.stringify(keys)
      }`,
    );
  }
  for (const key of keys) {
    checkNoNul("unlessCounted", key, "Cannot write intent");
  }
  return keys;
}

/**
 * The keys of a dead letter's `marks`, checked with their time and life:
 * at most {@linkcode MAX_UNLESS_COUNTED} distinct non-empty strings (a
 * `KvStore` reads and checks them beside the letter's own five keys), none
 * the count the letter resets (its job's, or `resetCount`). None without
 * marks.
 */
export function markKeys(
  marks: Marks | undefined,
  deadLetter: DeadLetter,
  resetCount: string | undefined,
): readonly string[] {
  if (marks === undefined) return [];
  const keys = marks?.keys;
  if (
    !Array.isArray(keys) || keys.length > MAX_UNLESS_COUNTED ||
    !keys.every((key) => typeof key === "string" && key !== "") ||
    new Set(keys).size !== keys.length ||
    keys.some((key) => key === deadLetter.jobId || key === resetCount)
  ) {
    throw new TypeError(
      `Cannot keep the dead letter of ${deadLetter.jobId} as 'marks.keys' must be at most ${MAX_UNLESS_COUNTED} distinct count keys (non-empty strings), none the count the letter resets: current value is ${
        JSON.stringify(keys)
      }`,
    );
  }
  const what = `Cannot keep the dead letter of ${deadLetter.jobId}`;
  for (const key of keys) checkNoNul("marks.keys", key, what);
  checkMs("marks.now", marks.now, what);
  if (marks.ttlMs !== undefined) {
    checkCountTtl(marks.ttlMs, "marks.ttlMs", what);
  }
  return keys;
}

/**
 * Throws a `TypeError` unless `ttlMs` is a whole number of milliseconds
 * above 0, naming it `name` in a message that starts with `what`.
 */
export function checkCountTtl(
  ttlMs: unknown,
  name = "ttlMs",
  what = "Cannot count a delivery",
): asserts ttlMs is number {
  checkMs(name, ttlMs, what);
  if ((ttlMs as number) < 1) {
    throw new TypeError(
      `${what} as '${name}' must be at least 1: current value is ${
        String(ttlMs)
      }`,
    );
  }
}

/** The fields of a `Transition`; any other is a misspelling. */
const TRANSITION_FIELDS: readonly string[] = Object.keys(
  {
    from: true,
    to: true,
    version: true,
    at: true,
    ledger: true,
    confirmed: true,
    deadLetter: true,
  } satisfies Record<keyof Transition, true>,
);

/**
 * Why a store refuses `change` before it reads anything, or `undefined`.
 * From JavaScript or JSON, a misspelt `version` was told the intent
 * changed since it was read (a caller that re-reads and tries again does
 * for ever), and a misspelt `ledger` moved the intent without the hold
 * change it asked for. Returned, not thrown: `transition` rejects.
 */
export function transitionRefusal(
  id: string,
  change: unknown,
): TypeError | undefined {
  const what = `move ${id}`;
  if (typeof change !== "object" || change === null) {
    return new TypeError(
      `Cannot ${what} as 'change' must be an object such as { from, to, version, at }: current value is ${
        show(change)
      }`,
    );
  }
  try {
    assertOptionNames(what, change, TRANSITION_FIELDS);
  } catch (error) {
    return error as TypeError;
  }
  const { version, ledger, to, at } = change as Partial<
    Record<string, unknown>
  >;
  if (typeof version !== "string") {
    return new TypeError(
      `Cannot ${what} as 'version' must be the version its read returned (a string): current value is ${
        show(version)
      }; pass intent.version from getIntent() or the last write`,
    );
  }
  if (to === "settling" && !Number.isSafeInteger(at)) {
    // The payment's clock starts there: named as given, not as the
    // `settlingSince` it would become.
    return new TypeError(
      `Cannot ${what} as 'at', the 'settlingSince' it sets, must be a whole number of milliseconds: current value is ${
        show(at)
      }`,
    );
  }
  if (ledger !== undefined && ledger !== "void" && ledger !== "capture") {
    return new TypeError(
      `Cannot ${what} as 'ledger' must be "void" or "capture" (or left out): current value is ${
        show(ledger)
      }`,
    );
  }
  return undefined;
}

/**
 * The intent after `change`, or a `ConflictError` naming the rule it
 * breaks. The caller has already checked the version.
 */
export function transitioned(
  current: IntentRecord,
  change: Transition,
): IntentRecord {
  const { id } = current;
  if (current.state !== change.from) {
    throw refusal(
      `Cannot move ${id} from ${change.from} to ${change.to} as it is ${current.state}; re-read it`,
    );
  }
  if (!canTransition(change.from, change.to)) {
    throw refusal(
      `Cannot move ${id} from ${change.from} to ${change.to}: the transition table has no such move`,
    );
  }
  // A tx on record confirmed: the payee was paid, and a send in flight,
  // written ahead once a tx of the intent may have left, is a rescue with
  // that tx's nonce, which cannot land beside it. The move settles, and
  // clears the write-ahead with the capture.
  const paid = change.from === "settling" && change.to === "settled" &&
    change.ledger === "capture" && current.broadcasting !== null &&
    current.mayHaveSent !== false && typeof change.confirmed === "string" &&
    current.txHashes.includes(change.confirmed);
  const read = paid ? { ...current, broadcasting: null } : current;
  // A hold change that rides in the move obeys the rules of a direct one,
  // but a review's void, which only a move out of review may carry.
  const hold = change.ledger === undefined
    ? current.hold
    : heldBy(read, change.ledger, change.to);
  if (change.to === "settling" && hold !== "pending") {
    throw refusal(
      `Cannot settle ${id} as its hold is ${
        hold ?? "not recorded"
      }: nothing may be broadcast without reserved funds`,
    );
  }
  if (change.to === "authorized" && hold !== "pending") {
    throw refusal(
      `Cannot authorize ${id} before its hold is recorded`,
    );
  }
  if (
    change.from === "settling" && change.to === "failed" &&
    (mayHaveMoved(current) || current.lastBroadcast?.outcome !== "not_sent")
  ) {
    // I1: only a payment whose every broadcast stayed home can fail.
    throw refusal(
      `Cannot fail ${id} unless its last broadcast was declared not_sent and no earlier one may have left: send it to review`,
    );
  }
  if (change.to === "failed" && (hold === "pending" || hold === "captured")) {
    // A captured hold means the money moved: that payment cannot fail.
    throw refusal(
      hold === "captured"
        ? `Cannot fail ${id} as its hold is captured: the money moved`
        : current.state === "needs_review"
        // A void alone is refused on a review that may have sent: the move
        // carries it, after the chain was checked.
        ? `Cannot fail ${id} while its hold is pending: once the chain shows none of its txs can land, fail it with ledger "void", which voids the hold in the same write (as the resolve route does)`
        : `Cannot fail ${id} while its hold is pending: void the hold first`,
    );
  }
  if (change.to === "settled" && hold !== "captured") {
    throw refusal(
      `Cannot settle ${id} unless its hold is captured: capture the hold first`,
    );
  }
  return checkRecord({
    ...read,
    state: change.to,
    hold,
    ...(change.to === "settling"
      ? { settlingSince: change.at, broadcasting: change.at }
      : {}),
  });
}

/** The intent after recording `broadcast`, or a `ConflictError`. */
export function broadcastRecorded(
  current: IntentRecord,
  broadcast: Broadcast,
): IntentRecord {
  if (current.state !== "settling") {
    throw refusal(
      `Cannot record a broadcast for ${current.id} as it is ${current.state}, not settling`,
    );
  }
  return withBroadcast(current, broadcast);
}

/**
 * The record of a send that outlived its settling: `broadcast`, on an
 * intent a give-up put in review while the send ran, which the stores take
 * on a version older than the intent's (the send's), where any other write
 * is a race lost. Its tx goes on record, as any send's (DESIGN: the intent
 * store is the only truth), so every instance reads its receipt before a
 * fail; and the version moves, so a fail decided on the review as read
 * before is a race lost. Neither the state nor the hold changes. `null`
 * where the rule does not apply (not in review, or `not_sent`: nothing
 * left to keep): the stale version is then answered as a race lost.
 */
export function lateBroadcastRecorded(
  current: IntentRecord,
  broadcast: Broadcast,
): IntentRecord | null {
  if (current.state !== "needs_review") return null;
  if (broadcast?.outcome !== "sent" && broadcast?.outcome !== "unknown") {
    return null;
  }
  return withBroadcast(current, broadcast);
}

/**
 * Whether `version` is one an intent at `current` had before, in a store
 * whose versions count the intent's writes from 1 (`MemoryStore`,
 * `PostgresStore`): `"1"` to `current - 1`, spelt as the store spells it
 * (decimal digits, no sign, no leading zero). Only such a version carries
 * the record of a send that outlived its settling
 * ({@linkcode lateBroadcastRecorded}): any other (`"garbage"`, `""`, a
 * number ahead of the intent's, one spelt `"03"`, a value that is not a
 * string) was never the intent's, and is answered as a race lost, as
 * every write on a version no store made. Decided on the version the
 * store read with the intent: no round trip of its own.
 */
export function isEarlierCount(
  version: unknown,
  current: number | bigint | string,
): boolean {
  return typeof version === "string" && /^[1-9][0-9]{0,18}$/.test(version) &&
    BigInt(version) < BigInt(current);
}

/** `current` with `broadcast` on record, its write-ahead cleared. */
function withBroadcast(
  current: IntentRecord,
  broadcast: Broadcast,
): IntentRecord {
  if (!["sent", "not_sent", "unknown"].includes(broadcast.outcome)) {
    throw new TypeError(
      `Cannot record a broadcast as 'outcome' must be "sent", "not_sent" or "unknown": current value is ${
        JSON.stringify(broadcast.outcome)
      }`,
    );
  }
  if (broadcast.outcome === "sent" && typeof broadcast.txHash !== "string") {
    throw new TypeError(
      `Cannot record a sent broadcast for ${current.id} without its 'txHash'`,
    );
  }
  const { txHash } = broadcast;
  return checkRecord({
    ...current,
    lastBroadcast: Object.freeze({ ...keptBroadcast(broadcast) }),
    broadcasting: null,
    mayHaveSent: current.mayHaveSent || broadcast.outcome !== "not_sent",
    // Every hash a send returned stays on record: a rescue whose outcome
    // is unknown must not erase the tx that may confirm meanwhile.
    txHashes:
      broadcast.outcome === "sent" && !current.txHashes.includes(txHash!)
        ? Object.freeze([...current.txHashes, txHash!].slice(-MAX_TX_HASHES))
        : current.txHashes,
  });
}

/** The intent after writing ahead of a broadcast, or a `ConflictError`. */
export function broadcastBegun(
  current: IntentRecord,
  at: number,
): IntentRecord {
  if (current.state !== "settling") {
    throw refusal(
      `Cannot start a broadcast for ${current.id} as it is ${current.state}, not settling`,
    );
  }
  if (current.hold !== "pending") {
    // I6: nothing is broadcast without reserved funds.
    throw refusal(
      `Cannot start a broadcast for ${current.id} as its hold is ${
        current.hold ?? "not recorded"
      }: nothing may be broadcast without reserved funds`,
    );
  }
  // An earlier broadcast still unrecorded may have left the process.
  return checkRecord({
    ...current,
    broadcasting: at,
    mayHaveSent: current.mayHaveSent || current.broadcasting !== null,
  });
}

/** Checks a list limit: an integer in 1 … 1000 (default 50). */
export function pageLimit(limit: number | undefined): number {
  const value = limit ?? 50;
  if (!Number.isInteger(value) || value < 1 || value > 1000) {
    throw new RangeError(
      `Cannot list dead letters as 'limit' must be an integer in 1..1000: current value is ${
        String(limit)
      }`,
    );
  }
  return value;
}

/** Where a page of dead letters ends: the last letter's time and job id. */
export interface PageEnd {
  readonly poisonedAt: number;
  readonly jobId: string;
}

/**
 * The cursor after `letter`, the same in every store of this package:
 * `<poisonedAt>|<jobId>`.
 */
export function cursorAfter(letter: PageEnd): string {
  return `${letter.poisonedAt}|${letter.jobId}`;
}

/** `<poisonedAt>|<jobId>`: a job id holds no U+0000 (PostgreSQL text cannot). */
const CURSOR = /^(-?\d{1,16})\|([^\0]+)$/;

/**
 * Reads a cursor that {@linkcode cursorAfter} wrote.
 *
 * @throws {TypeError} Naming 'cursor', if it is not one: the ops route
 * answers that with a 400, and any other error with a 500.
 */
export function readCursor(cursor: string): PageEnd {
  const match = CURSOR.exec(cursor);
  const poisonedAt = Number(match?.[1]);
  if (match === null || !Number.isSafeInteger(poisonedAt)) {
    throw badCursor(cursor);
  }
  return { poisonedAt, jobId: match[2]! };
}

/** The refusal of a cursor no store of this package returned. */
export function badCursor(cursor: string): TypeError {
  return new TypeError(
    `Cannot list dead letters as 'cursor' is not one this store returned: current value is ${
      JSON.stringify(cursor.length > 100 ? `${cursor.slice(0, 100)}…` : cursor)
    }. Pass the cursor of the previous page, or none for the first page.`,
  );
}

/**
 * Every value a write keeps is checked before anything is written, the
 * same in every store: times are whole milliseconds of the injected clock
 * (PostgreSQL keeps them as bigint), and texts are strings (postgres.js
 * would fail a value it cannot send only after the rest of its pipelined
 * transaction went out).
 */
export function checkMs(
  name: string,
  value: unknown,
  what = "Cannot write to the store",
): void {
  if (!Number.isSafeInteger(value)) {
    throw new TypeError(
      `${what} as '${name}' must be a whole number of milliseconds: current value is ${
        show(value)
      }`,
    );
  }
}

function checkString(name: string, value: unknown): void {
  if (typeof value !== "string") {
    throw new TypeError(
      `Cannot write to the store as '${name}' must be a string: current value is ${
        show(value)
      }`,
    );
  }
}

/** A UTF-16 surrogate not in a pair. */
const LONE_SURROGATE =
  /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** U+0000, or a UTF-16 surrogate not in a pair. */
const UNKEPT = new RegExp(`\\0|${LONE_SURROGATE.source}`, "g");

/**
 * Free text as every store keeps it: each U+0000 (PostgreSQL text cannot
 * hold it) and each lone surrogate (UTF-8 has no code for it, and
 * PostgreSQL's client writes U+FFFD) as U+FFFD. The memory store and Deno
 * KV, which could keep either, keep what PostgreSQL reads back.
 */
export function keptText(text: string): string {
  return text.replace(UNKEPT, "\uFFFD");
}

/**
 * Whether `id` holds U+0000 or a lone surrogate, which no store keeps in
 * an id or key (see `checkNoNul`): a read under it finds nothing, in every
 * store. Deno KV and PostgreSQL would read the id with U+FFFD in its place.
 */
export function unkeptKey(id: unknown): boolean {
  return typeof id === "string" &&
    (id.includes("\0") || LONE_SURROGATE.test(id));
}

/** `broadcast` with its error as {@linkcode keptText} keeps it. */
function keptBroadcast<T extends Broadcast | null>(broadcast: T): T {
  const error = broadcast?.error;
  return typeof error !== "string" || keptText(error) === error
    ? broadcast
    : { ...broadcast!, error: keptText(error) };
}

/** `letter` with its reason, resolution and last error as {@linkcode keptText} keeps them. */
export function keptLetter(letter: DeadLetter): DeadLetter {
  const { reason, resolution, lastError } = letter;
  if (
    keptText(reason) === reason && keptText(resolution) === resolution &&
    keptText(lastError) === lastError
  ) return letter;
  return {
    ...letter,
    reason: keptText(reason),
    resolution: keptText(resolution),
    lastError: keptText(lastError),
  };
}

/**
 * Refuses U+0000 in a value a store keeps as a key or an id (a job id, a
 * count, a claim, a lease's owner, a queue's id, a mark, a tx hash):
 * PostgreSQL text cannot hold it, and a write the memory store and Deno KV
 * took failed on PostgresStore alone. Free text (a reason, an error) is
 * not refused: PostgresStore keeps its NUL as U+FFFD.
 */
function checkNoNul(
  name: string,
  value: unknown,
  what = "Cannot write to the store",
): void {
  if (typeof value !== "string") return;
  if (value.includes("\0")) {
    throw new TypeError(
      `${what} as '${name}' holds the character U+0000 (NUL), which PostgreSQL text cannot hold: remove it from the id, key or tx hash`,
    );
  }
  if (LONE_SURROGATE.test(value)) {
    // Deno KV and PostgreSQL would keep it as U+FFFD: the key of another
    // id, which the memory store keeps apart.
    throw new TypeError(
      `${what} as '${name}' holds a lone surrogate (half of a UTF-16 pair), which UTF-8 cannot encode: remove it from the id, key or tx hash`,
    );
  }
}

/** Checks an optional string (`undefined` is kept as absent). */
function checkOptionalString(name: string, value: unknown): void {
  if (value !== undefined) checkString(name, value);
}

/** Checks a write's lease. */
export function checkLease(lease: NonNullable<WriteOptions["lease"]>): void {
  checkString("lease.owner", lease.owner);
  checkNoNul("lease.owner", lease.owner);
  checkMs("lease.now", lease.now);
  checkMs("lease.ttlMs", lease.ttlMs);
}

/** Checks a lease release: the intent's id and the owner, non-empty strings. */
export function checkRelease(intentId: unknown, owner: unknown): void {
  for (const [name, value] of [["intentId", intentId], ["owner", owner]]) {
    if (typeof value !== "string" || value === "") {
      throw new TypeError(
        `Cannot release a lease as '${name}' must be a non-empty string: current value is ${
          typeof value === "string" ? '""' : String(value)
        }`,
      );
    }
  }
}

/**
 * Checks what rides in a delivery write besides its change (its lease,
 * claim, dead letter, the count it resets and its `unlessCounted`), before
 * anything is read: a malformed one is a `TypeError` whatever the
 * intent's state, in every store.
 */
export function checkWriteOptions(
  options: WriteOptions,
  deadLetter?: DeadLetter,
): void {
  if (options.lease) checkLease(options.lease);
  if (options.claim) checkClaim(options.claim);
  if (deadLetter) checkDeadLetter(deadLetter);
  if (deadLetter) checkResetCount(options.resetCount);
  uncountedKeys(options);
}

/**
 * Checks an admission's `count`, when given: a job id (a string), before
 * anything is claimed or counted, in every store.
 */
export function checkCount(count: unknown): void {
  if (count !== undefined && typeof count !== "string") {
    throw new TypeError(
      `Cannot count a delivery as 'count' must be a job id: current value is ${
        JSON.stringify(count)
      }`,
    );
  }
  checkNoNul("count", count, "Cannot count a delivery");
}

/** Checks the count a dead letter's write resets besides the job's own. */
export function checkResetCount(resetCount: string | undefined): void {
  if (resetCount !== undefined) checkString("resetCount", resetCount);
  checkNoNul("resetCount", resetCount);
}

/** Checks a replay record. */
export function checkClaim(claim: Claim): void {
  checkString("claim.key", claim.key);
  checkNoNul("claim.key", claim.key);
  checkMs("claim.now", claim.now);
  checkMs("claim.expiresAt", claim.expiresAt);
}

/** Checks a dead letter's fields. */
export function checkDeadLetter(letter: DeadLetter): void {
  checkString("jobId", letter.jobId);
  checkString("intentId", letter.intentId);
  checkNoNul("jobId", letter.jobId);
  checkNoNul("intentId", letter.intentId);
  if (letter.cause !== "declared" && letter.cause !== "exhausted") {
    throw new TypeError(
      `Cannot write to the store as 'cause' must be "declared" or "exhausted": current value is ${
        String(letter.cause)
      }`,
    );
  }
  checkString("reason", letter.reason);
  checkString("resolution", letter.resolution);
  checkString("lastError", letter.lastError);
  checkMs("poisonedAt", letter.poisonedAt);
  if (letter.poisonedAt < 0) {
    // No reading of the relayer's clock (checkedClock), and Deno KV's
    // newest-first key (MAX_SAFE_INTEGER − poisonedAt) rounds past 2^53:
    // listed there alone out of order.
    throw new TypeError(
      `Cannot write to the store as 'poisonedAt' must be a whole number of milliseconds from 0 (1970): current value is ${letter.poisonedAt}`,
    );
  }
  checkMs("deliveries", letter.deliveries);
  if (letter.queue !== undefined) {
    checkString("queue.queue", letter.queue?.queue);
    checkOptionalString("queue.messageId", letter.queue.messageId);
    checkOptionalString("queue.dlqId", letter.queue.dlqId);
    checkNoNul("queue.queue", letter.queue.queue);
    checkNoNul("queue.messageId", letter.queue.messageId);
    checkNoNul("queue.dlqId", letter.queue.dlqId);
  }
}

/** Checks an intent record's times and its last broadcast; returns it. */
export function checkRecord(record: IntentRecord): IntentRecord {
  if (record.settlingSince !== null) {
    checkMs("settlingSince", record.settlingSince);
  }
  if (record.broadcasting !== null) {
    checkMs("broadcasting", record.broadcasting);
  }
  const last = record.lastBroadcast;
  if (last !== null) {
    if (!["sent", "not_sent", "unknown"].includes(last.outcome)) {
      throw new TypeError(
        `Cannot write to the store as 'lastBroadcast.outcome' must be "sent", "not_sent" or "unknown": current value is ${
          JSON.stringify(last.outcome)
        }`,
      );
    }
    checkMs("lastBroadcast.at", last.at);
    if (last.outcome === "sent") {
      checkString("lastBroadcast.txHash", last.txHash);
    } else checkOptionalString("lastBroadcast.txHash", last.txHash);
    checkNoNul("lastBroadcast.txHash", last.txHash);
    checkOptionalString("lastBroadcast.error", last.error);
  }
  return record;
}
