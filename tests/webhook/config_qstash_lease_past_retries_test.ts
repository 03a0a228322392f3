/**
 * At the end of QStash's retries: its 100th retry of a failure callback
 * comes 8 318 394 s (96d06h39m54s) after the first call (12 s, 2m28s,
 * 30m8s, 6h7m6s, then a day each). A give-up busy behind a lease that long
 * (`LEASE` + 2 × `CLOCK_SKEW`) outlasts every retry QStash takes: the
 * service refuses to start, asks for a shorter `LEASE` rather than more
 * retries, and keeps its own default `QSTASH_RETRIES` (`MAX_DELIVERIES −
 * 1`); `deno task schedule` says the same. A lease 1 ms shorter is
 * outlasted by exactly 100 retries, which are then the default. And at
 * the near end: `CLOCK_SKEW` counts twice in that busy give-up, and the
 * refusal of too few retries for `MAX_DELIVERIES` names its sum.
 *
 * @module
 */

import assert from "node:assert/strict";
import { ConfigError, loadConfig } from "../../webhook/config.ts";
import { callbackShortText } from "../../tools/schedule.ts";
import { QSTASH } from "./_signing.ts";

/** When QStash's 100th retry of a failure callback comes, in ms. */
const SPAN_100_MS = 8_318_394_000;

/** The service on QStash behind `leaseMs`, with no clock skew. */
function env(leaseMs: number, retries?: number): Record<string, string> {
  return {
    SENDER_URL: "http://127.0.0.1:9000",
    QSTASH_CURRENT_SIGNING_KEY: QSTASH.currentSigningKey,
    QSTASH_NEXT_SIGNING_KEY: QSTASH.nextSigningKey,
    PUBLIC_URL: "https://relayer.example.test",
    LEASE: `${leaseMs}ms`,
    CLOCK_SKEW: "0ms",
    ...(retries === undefined ? {} : { QSTASH_RETRIES: String(retries) }),
  };
}

/** `loadConfig`'s refusal of `settings`, which it must refuse. */
function refusal(settings: Record<string, string>): ConfigError {
  try {
    loadConfig(settings);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  assert.fail(`loadConfig took ${JSON.stringify(settings)}`);
}

Deno.test("a LEASE no QStash retries outlast is refused with the default QSTASH_RETRIES (MAX_DELIVERIES − 1), asking for a shorter LEASE", () => {
  const error = refusal(env(SPAN_100_MS));
  assert.equal(error.setting, "QSTASH_RETRIES");
  assert.match(error.message, /^QSTASH_RETRIES is 9, /);
  assert.match(error.message, /Lower LEASE$/);
  assert.doesNotMatch(error.message, /at least \d/);
});

Deno.test("a LEASE 1 ms shorter is outlasted by 100 retries: the default, and what a refusal of 99 asks for", () => {
  assert.equal(loadConfig(env(SPAN_100_MS - 1)).queues.qstash.retries, 100);
  const error = refusal(env(SPAN_100_MS - 1, 99));
  assert.equal(error.setting, "QSTASH_RETRIES");
  assert.match(error.message, /Set QSTASH_RETRIES to at least 100 /);
});

Deno.test("deno task schedule asks for 100 retries at the last, and for a shorter lease past them", () => {
  assert.match(
    callbackShortText({
      kind: "qstash",
      retries: 9,
      leaseMs: SPAN_100_MS - 1,
      clockSkewMs: 0,
    }),
    /; it needs --retries 100 or more$/,
  );
  assert.match(
    callbackShortText({
      kind: "qstash",
      retries: 9,
      leaseMs: SPAN_100_MS,
      clockSkewMs: 0,
    }),
    /; no retries QStash takes \(at most 100\) are enough: lower the lease$/,
  );
});

Deno.test("CLOCK_SKEW counts twice in the busy give-up QStash's callback retries must outlast: 2 retries span 160s", () => {
  const settings = (clockSkew: string) => ({
    ...env(150_000, 2),
    MAX_DELIVERIES: "3",
    STUCK_AFTER: "1s",
    CLOCK_SKEW: clockSkew,
  });
  // 150s + 2 × 4.999s: the second retry comes after it.
  assert.equal(loadConfig(settings("4999ms")).queues.qstash.retries, 2);
  // 150s + 2 × 5s: it may come while the give-up is busy.
  const error = refusal(settings("5s"));
  assert.equal(error.setting, "QSTASH_RETRIES");
});

Deno.test("a QSTASH_RETRIES too few for MAX_DELIVERIES is asked up to what the failure callback needs, naming LEASE + 2 × CLOCK_SKEW's sum", () => {
  const error = refusal({
    ...env(30_000, 0),
    CLOCK_SKEW: "5s",
    MAX_DELIVERIES: "2",
    BASE: "2m",
    JITTER: "none",
    STUCK_AFTER: "1m",
  });
  assert.equal(error.setting, "QSTASH_RETRIES");
  assert.match(
    error.message,
    /set QSTASH_RETRIES to at least 2 \(MAX_DELIVERIES − 1 is 1, but the failure callback is retried as often, and its retries must outlast a give-up answered busy behind another delivery's lease, LEASE \+ 2 × CLOCK_SKEW \(40s\);/,
  );
});

Deno.test("a QSTASH_RETRIES too few for MAX_DELIVERIES behind a LEASE no QStash retries outlast asks for a shorter LEASE too: the retries it asks for alone are refused in turn", () => {
  const error = refusal(env(SPAN_100_MS, 0));
  assert.equal(error.setting, "QSTASH_RETRIES");
  assert.match(
    error.message,
    /^QSTASH_RETRIES is 0, so QStash gives up after 1 delivery, before MAX_DELIVERIES \(10\): set QSTASH_RETRIES to at least 9 \(MAX_DELIVERIES − 1;/,
  );
  assert.match(
    error.message,
    /; and lower LEASE: no retries QStash takes \(at most 100\) outlast a give-up answered busy behind another delivery's lease, LEASE \+ 2 × CLOCK_SKEW \(2310h39m54s\), and its failure callback would end in QStash's DLQ$/,
  );
  assert.doesNotMatch(error.message, /Infinity/);
  // It names LEASE + 2 × CLOCK_SKEW, not LEASE alone.
  assert.match(
    refusal({ ...env(SPAN_100_MS - 10_000, 0), CLOCK_SKEW: "5s" }).message,
    /; and lower LEASE: .*LEASE \+ 2 × CLOCK_SKEW \(2310h39m54s\), /,
  );
  // What it asks of QSTASH_RETRIES alone is refused for the LEASE.
  assert.match(refusal(env(SPAN_100_MS, 9)).message, /Lower LEASE$/);
  // More deliveries than QStash takes retries for: the same.
  assert.match(
    refusal({ ...env(SPAN_100_MS, 0), MAX_DELIVERIES: "150" }).message,
    /lower MAX_DELIVERIES to at most 101 .*; and lower LEASE: /,
  );
  // 101 deliveries are 100 retries: QStash takes them.
  assert.match(
    refusal({ ...env(30_000, 0), MAX_DELIVERIES: "101" }).message,
    /: set QSTASH_RETRIES to at least 100 \(MAX_DELIVERIES − 1;/,
  );
  // Behind a LEASE 100 retries outlast, LEASE is not named.
  const short = refusal({ ...env(30_000, 0), MAX_DELIVERIES: "150" });
  assert.match(short.message, /lower MAX_DELIVERIES to at most 101 /);
  assert.doesNotMatch(short.message, /LEASE/);
});
