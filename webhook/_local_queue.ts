/**
 * The consumer of the local Deno KV queue (`KV_QUEUE=1`), kept apart from
 * `main.ts` so that it touches no `Deno.*`: the queue is given as
 * `enqueue`.
 *
 * @module
 */

import { describeError, oneLine } from "../policy/_walk.ts";
import { outageDelayMs } from "../policy/_doubled.ts";
import { intentIdSeen } from "../relayer/_job_text.ts";
import {
  formatOutcome,
  type Job,
  jobIdOf,
  type Outcome,
  parseJob,
  type Relayer,
} from "../relayer/relayer.ts";

/** How many ended messages a consumer remembers, to ack Deno KV's late copies of them. */
const ENDED_KEPT = 4096;

/** A message on the local queue. */
export interface LocalQueueMessage {
  /** The job. */
  readonly job: Job;
  /**
   * How many deliveries of the job in a row failed unexpectedly (the store
   * was down); absent on a message of the policy's own retries.
   */
  readonly failures?: number;
  /**
   * The message's own id, set where it is enqueued and the same on each of
   * Deno KV's redeliveries of it: a redelivery that arrives while the
   * message is still being handled here waits for that, and starts no
   * second line of retries.
   */
  readonly id?: string;
  /**
   * Set on a message that took its job's line where it was enqueued
   * ({@linkcode LocalLine}): once a newer message of the job took it, this
   * one is acked unhandled. Absent (a redrive's message, one enqueued by an
   * older version), the message is handled.
   */
  readonly line?: boolean;
}

/**
 * A job's line, as read before a delivery: the id of the message of the
 * job enqueued last (`null`: none kept), whether that message's delivery
 * ended the job since (done, or dropped), and the versionstamp the line's
 * key had, which marking it ended checks. A job goes on as one line of
 * retries: queued twice, or delivered again after its retry was enqueued
 * (the process killed before Deno KV's ack), it would go on as two, its
 * deliveries running out in half the policy's window.
 *
 * Every enqueue of a job's message takes the line, unconditionally: a
 * delivery's retry is never held back (the delivery may have sent, and
 * only its retry follows the send up). Only a delivery of a message the
 * line no longer names is skipped, so the line's message is always live
 * until its job ends, and two messages at once merge at the next round.
 *
 * @example A line read from Deno KV
 * ```ts ignore
 * const entry = await kv.get<string>(["relayer_line", jobId]);
 * const line: LocalLine = { id: entry.value, ended: false, versionstamp: entry.versionstamp };
 * ```
 */
export interface LocalLine {
  /** The id of the message of the job enqueued last, or `null`. */
  readonly id: string | null;
  /** Whether that message's delivery ended the job, and none came since. */
  readonly ended: boolean;
  /** The versionstamp of the line's key as read (`null`: absent). */
  readonly versionstamp: string | null;
}

/**
 * Puts a message on the queue after `delayMs`. A message of a job takes
 * the job's line, in the commit that enqueues it.
 */
export type LocalEnqueue = (
  message: LocalQueueMessage,
  delayMs: number,
) => Promise<void>;

/** What {@linkcode localQueueConsumer} needs. */
export interface LocalQueueOptions {
  /** The relayer that delivers the jobs, and keeps a malformed message. */
  readonly relayer: Pick<Relayer, "deliver" | "policy" | "keepUnreadable">;
  /** The queue's own enqueue. */
  readonly enqueue: LocalEnqueue;
  /**
   * Reads a job's line (by its job id); absent, every message is handled
   * and every retry enqueued.
   */
  readonly line?: (jobId: string) => Promise<LocalLine>;
  /**
   * Marks a job's line ended by the message `id`, if the line is still as
   * `read` (a message enqueued since carries the job on); `false` if it
   * was not. With `line`.
   */
  readonly endLine?: (
    jobId: string,
    id: string,
    read: LocalLine,
  ) => Promise<boolean>;
  /** One line per message. */
  readonly log: (line: string) => void;
}

/**
 * A listener for `kv.listenQueue`. Deno KV's own redelivery has a fixed
 * schedule, passes no attempt count and drops the message after a few
 * tries, so every retry is a fresh message: the policy's delay after a
 * delivery that failed; after one that threw (the store was unreachable;
 * the signer's failures are the policy's), a wait that doubles from the policy's base to its cap,
 * with no limit, as a dropped message would strand its intent. A message
 * that is not a job is kept as a dead letter (`relayer.keepUnreadable`)
 * and not retried; if the store cannot keep it, it comes back the same
 * way. A throw of `enqueue` itself leaves the original message to Deno
 * KV's redelivery. With `line`, a job goes on as one line of messages: a
 * message a newer one of its job superseded is acked unhandled, and so is
 * one whose own delivery ended its job, delivered again after a kill lost
 * its ack ({@linkcode LocalLine}).
 */
export function localQueueConsumer(
  options: LocalQueueOptions,
): (message: unknown) => Promise<void> {
  const { relayer, enqueue } = options;
  // One line, whatever a message put in the text it quotes.
  const log = (line: string): void => options.log(oneLine(line));
  // The messages being handled, by id. Deno KV delivers a message again
  // while its handler still runs once the wall clock passes the deadline it
  // keeps on it, 5 s after the message was due and never renewed (a
  // handler that ran past it, a clock stepped forward). Handled again,
  // the copy would re-enqueue a retry of its own, and the job would go on
  // as two messages counted under one id, its deliveries running out in
  // half the policy's window. The copy waits for the first and ends as it
  // ends: acked once that one enqueued its retry, redelivered if it threw.
  const running = new Map<string, Promise<void>>();
  // The last messages whose delivery ended well, oldest first. Deno KV's
  // copy is put back 1 s out, and the first delivery's ack does not remove
  // it: one that ended within that second (a look takes milliseconds)
  // meets its copy only afterwards, which is acked as that delivery was.
  // Bounded: a copy comes within seconds, or a schedule's delay later.
  const ended = new Set<string>();
  return (message: unknown): Promise<void> => {
    const id = (message as LocalQueueMessage | null)?.id;
    if (typeof id !== "string") return handle(message);
    const first = running.get(id);
    if (first !== undefined) {
      log(
        `queue   message ${id} delivered again while it is being handled (put back by Deno KV: running 5 s past its due time, or the wall clock stepped): it ends as that delivery ends`,
      );
      return first;
    }
    if (ended.has(id)) {
      log(
        `queue   message ${id} delivered again after its delivery ended (put back by Deno KV: it ran 5 s past its due time, or the wall clock stepped): acked, as that delivery ended it`,
      );
      return Promise.resolve();
    }
    const handled = handle(message).then(
      () => {
        running.delete(id);
        ended.add(id);
        if (ended.size > ENDED_KEPT) {
          ended.delete(ended.values().next().value!);
        }
      },
      (error: unknown) => {
        // Deno KV delivers it again, and that delivery is handled.
        running.delete(id);
        throw error;
      },
    );
    running.set(id, handled);
    return handled;
  };

  async function handle(message: unknown): Promise<void> {
    let job: Job;
    try {
      job = parseJob((message as LocalQueueMessage | null)?.job);
    } catch (error) {
      // Kept as a dead letter, so that it is seen. If the store fails, it
      // goes back on the queue like a delivery that threw: Deno KV's own
      // redelivery gives up after a few tries.
      const detail = (error as Error).message;
      const seen = (message as { job?: unknown } | null)?.job;
      let kept: string;
      try {
        kept = await relayer.keepUnreadable({
          queue: "local",
          raw: rawOf(message),
          // A job encoded twice names its intent too; so does a message
          // with no `job` that is a job itself (enqueued bare, as QStash,
          // Pub/Sub and Cloudflare take it), or its JSON text.
          seen: {
            intentId: intentIdSeen(seen === undefined ? message : seen),
          },
          detail,
        });
      } catch (failure) {
        const failures = failuresAfter(message);
        const { baseMs, capMs } = relayer.policy;
        const delayMs = outageDelayMs(failures, baseMs, capMs);
        log(
          `queue   a malformed message could not be kept (${failures} in a row), again in ${
            delayMs / 1000
          }s: ${describeError(failure)}`,
        );
        // The message as it came, still unreadable: read again, kept
        // then. Whole: put back as its `job` alone, a message that held
        // its job elsewhere (bare, or as text) came back with nothing in
        // it, and its letter named no intent, its only job lost.
        await enqueue(putBack(message, failures), delayMs);
        return;
      }
      log(
        `queue   acked a malformed message unread, kept as ${kept}: ${detail}`,
      );
      return;
    }
    const jobId = jobIdOf(job);
    const line = await options.line?.(jobId);
    const self = (message as LocalQueueMessage).id;
    if (
      line !== undefined && line.id !== null &&
      (message as LocalQueueMessage).line === true
    ) {
      // The line moves only forward, each move in the commit that
      // enqueues its message: one it does not name was superseded.
      if (line.id !== self) {
        log(
          `queue   ${
            jobId.padEnd(16)
          } acked message ${self} unhandled: a newer message of its job (${line.id}) ${
            line.ended ? "ended it" : "carries it"
          }`,
        );
        return;
      }
      if (line.ended) {
        // Its delivery ended the job (done, or dropped with its letter),
        // and a kill lost the ack: handled again, a dropped job's count
        // would start again at 1, and it would send.
        log(
          `queue   ${
            jobId.padEnd(16)
          } acked message ${self} unhandled: its delivery ended its job`,
        );
        return;
      }
    }
    let outcome: Outcome;
    try {
      // Named by its id, a drop of its job marks the message in the
      // letter's own commit, and a copy of it (Deno KV's redelivery after
      // a kill between the letter and the line's ended mark, its ack
      // lost) sends nothing: its count starts again at 1 with the letter.
      outcome = await relayer.deliver(
        job,
        undefined,
        typeof self === "string"
          ? { message: { queue: "local", messageId: self } }
          : undefined,
      );
    } catch (error) {
      const failures = failuresAfter(message);
      const { baseMs, capMs } = relayer.policy;
      const delayMs = outageDelayMs(failures, baseMs, capMs);
      log(
        `queue   ${
          jobIdOf(job).padEnd(16)
        } failed unexpectedly (${failures} in a row), again in ${
          delayMs / 1000
        }s: ${describeError(error)}`,
      );
      await enqueue({ job, failures }, delayMs);
      return;
    }
    log(`queue   ${formatOutcome(job, outcome)}`);
    if (outcome.action === "retry") {
      // Always, whatever the line says now: this delivery may have sent,
      // and only its retry follows the send up. A message enqueued since
      // is acked unhandled when it comes, as this one takes the line.
      await enqueue({ job }, outcome.delayMs);
      return;
    }
    if (
      line === undefined || options.endLine === undefined || self === undefined
    ) return;
    // The job ended here: said on its line, if no message of the job was
    // enqueued since (that one carries it on). Not thrown: Deno KV would
    // deliver this message again, and a dropped job's would send.
    try {
      if (!await options.endLine(jobId, self, line)) {
        log(
          `queue   ${
            jobId.padEnd(16)
          } ended; its line was not marked ended, as a newer message of its job carries it`,
        );
      }
    } catch (error) {
      log(
        `queue   ${
          jobId.padEnd(16)
        } ended; its line could not be marked ended: ${describeError(error)}`,
      );
    }
  }
}

/**
 * A `listenQueue` handler that fails in one line. The consumer throws only
 * when it could not even put a message back (the same KV is failing);
 * Deno KV then redelivers the message, and prints what the handler threw,
 * stack and all. This logs one line and throws an error whose stack is
 * that line.
 */
export function quietly(
  handler: (message: unknown) => Promise<void>,
  log: (line: string) => void,
): (message: unknown) => Promise<void> {
  return async (message) => {
    try {
      await handler(message);
    } catch (error) {
      const line = describeError(error);
      // The job named, as every other queue line names it: an operator
      // looking for what an outage held up greps the log by job id.
      let what = "a message";
      try {
        what = jobIdOf(parseJob((message as LocalQueueMessage | null)?.job))
          .padEnd(16);
      } catch {
        // Not a job: it was kept as a dead letter, or is being.
      }
      log(
        `queue   ${what} could not be handled; Deno KV redelivers it: ${line}`,
      );
      const quiet = new Error(line);
      quiet.stack = line;
      throw quiet;
    }
  };
}

/**
 * A malformed message as it goes back on the queue, `failures` set: a
 * plain object with all it held but the id and line mark `enqueue` gives
 * afresh; anything else (a text, an array, bytes, a `Map`, `null`) as its
 * `job`, which is read as unreadable again and kept with what it held.
 */
function putBack(message: unknown, failures: number): LocalQueueMessage {
  const prototype = typeof message === "object" && message !== null
    ? Object.getPrototypeOf(message)
    : undefined;
  if (prototype !== Object.prototype && prototype !== null) {
    return { job: message as Job, failures };
  }
  const { id: _id, line: _line, ...held } = message as Record<string, unknown>;
  return { ...held, failures } as unknown as LocalQueueMessage;
}

/** A message as text, for the name of its dead letter. */
function rawOf(message: unknown): string {
  try {
    return JSON.stringify(message) ?? String(message);
  } catch {
    return String(message);
  }
}

/** The count of failures in a row, this one included: a bad count reads as none before. */
function failuresAfter(message: unknown): number {
  const previous = (message as LocalQueueMessage | null)?.failures;
  return Number.isSafeInteger(previous) && previous! >= 1 ? previous! + 1 : 1;
}
