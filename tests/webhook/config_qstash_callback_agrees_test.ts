/**
 * The service's start check, the library's `checkQueue` and
 * `deno task schedule --queue qstash` agree on QStash's retries: fed the
 * same policy, `QSTASH_RETRIES`, `LEASE`, `SENDER_TIMEOUT` and
 * `CLOCK_SKEW`, `checkQueue` says `stops_early` and the tool says the
 * queue stops early exactly when `loadConfig` refuses `QSTASH_RETRIES`
 * (too few for the policy, or a failure callback whose retries cannot
 * outlast a give-up busy behind another delivery's lease), which is when
 * QStash's documented waits (12 s, 2m28s, 30m8s, 6h7m6s, then a day; the
 * callback retried as often as the message, `Upstash-Failure-Callback-Retries`
 * as the service publishes it) say so.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { checkQueue, definePolicy } from "../../mod.ts";
import { ConfigError, loadConfig } from "../../webhook/config.ts";
import { parseFlags, schedule } from "../../tools/schedule.ts";
import { QSTASH } from "./_signing.ts";
import { runs } from "../_fc.ts";
import { refusedSetting } from "./_config.ts";

/**
 * QStash's waits before its retries, in seconds, as its docs tabulate
 * min(1 day, e^(2.5 n)): 12 s, 2m28s, 30m8s, 6h7m6s, then a day.
 */
const QSTASH_WAITS_S = [12, 148, 1808, 22_026];

/** When QStash's last retry of a failure callback comes, after its first call. */
function callbackSpanMs(retries: number): number {
  let spanS = 0;
  for (let n = 1; n <= retries; n++) spanS += QSTASH_WAITS_S[n - 1] ?? 86_400;
  return spanS * 1000;
}

/**
 * The service's environment on QStash with `MAX_DELIVERIES`, `LEASE`,
 * `CLOCK_SKEW` and `QSTASH_RETRIES` from `s` (`STUCK_AFTER` 1s), and
 * `more`.
 */
function qstashEnv(
  s: {
    maxDeliveries: number;
    leaseMs: number;
    clockSkewMs: number;
    retries: number;
  },
  more: Record<string, string> = {},
): Record<string, string> {
  return {
    SENDER_URL: "http://127.0.0.1:9000",
    QSTASH_CURRENT_SIGNING_KEY: QSTASH.currentSigningKey,
    QSTASH_NEXT_SIGNING_KEY: QSTASH.nextSigningKey,
    PUBLIC_URL: "https://relayer.example.test",
    MAX_DELIVERIES: String(s.maxDeliveries),
    STUCK_AFTER: "1s",
    LEASE: `${s.leaseMs}ms`,
    CLOCK_SKEW: `${s.clockSkewMs}ms`,
    QSTASH_RETRIES: String(s.retries),
    ...more,
  };
}

Deno.test("checkQueue() and deno task schedule stop a QStash queue early exactly when the service refuses QSTASH_RETRIES, with the same policy, LEASE, SENDER_TIMEOUT and CLOCK_SKEW", () => {
  const settings = fc.record({
    maxDeliveries: fc.integer({ min: 1, max: 12 }),
    // Around the policy's own need (MAX_DELIVERIES − 1) and the callback's.
    retries: fc.integer({ min: 0, max: 14 }),
    senderTimeoutMs: fc.integer({ min: 1000, max: 120_000 }),
    // Past 2 × SENDER_TIMEOUT, up to past what 2 or 3 retries span.
    extraLeaseMs: fc.oneof(
      fc.integer({ min: 0, max: 5000 }),
      fc.integer({ min: 0, max: 2_000_000 }),
    ),
    clockSkewMs: fc.integer({ min: 0, max: 5000 }),
  });
  const seen = { refusedCallback: 0, refusedLimit: 0, taken: 0 };
  fc.assert(
    fc.property(settings, (s) => {
      const leaseMs = 2 * s.senderTimeoutMs + s.extraLeaseMs;
      const env = qstashEnv({ ...s, leaseMs }, {
        SENDER_TIMEOUT: `${s.senderTimeoutMs}ms`,
      });
      const setting = refusedSetting(env);
      // Only the queue's limits are compared here.
      fc.pre(setting === null || setting === "QSTASH_RETRIES");
      const policy = definePolicy({
        maxDeliveries: s.maxDeliveries,
        stuckAfterMs: 1000,
      });
      const check = checkQueue(policy, {
        kind: "qstash",
        retries: s.retries,
        leaseMs,
        clockSkewMs: s.clockSkewMs,
      });
      const flags = parseFlags([
        "--max-deliveries",
        String(s.maxDeliveries),
        "--stuck-after",
        "1s",
        "--clock-skew",
        `${s.clockSkewMs}ms`,
        "--queue",
        "qstash",
        "--retries",
        String(s.retries),
        "--sender-timeout",
        `${s.senderTimeoutMs}ms`,
        "--lease",
        `${leaseMs}ms`,
      ]);
      assert.ok(!flags.help);
      const tool = schedule(flags.policy, flags.queue, {
        clockSkewMs: flags.clockSkewMs,
      });
      if (setting === null) seen.taken++;
      else if (s.retries < s.maxDeliveries - 1) seen.refusedLimit++;
      else seen.refusedCallback++;
      const what = `${JSON.stringify(env)}: loadConfig ${
        setting === null ? "takes it" : "refuses QSTASH_RETRIES"
      }, checkQueue says ${check.problem}, the tool ${
        tool.stopsEarly ? "stops early" : "does not stop early"
      }`;
      // As QStash documents its retries: too few for the policy, or a
      // callback whose last retry comes while a give-up may be busy.
      const short = s.retries < s.maxDeliveries - 1 ||
        callbackSpanMs(s.retries) <= leaseMs + 2 * s.clockSkewMs;
      assert.equal(setting !== null, short, what);
      assert.equal(check.problem === "stops_early", setting !== null, what);
      assert.equal(tool.stopsEarly, setting !== null, what);
    }),
    { numRuns: runs(1000) },
  );
  // Each side of the line was reached, the callback's refusal too.
  assert.ok(
    seen.refusedCallback > 0 && seen.refusedLimit > 0 && seen.taken > 0,
    JSON.stringify(seen),
  );
});

Deno.test("the QSTASH_RETRIES a refusal asks for is taken: it covers MAX_DELIVERIES and the failure callback's retries at once", () => {
  const settings = fc.record({
    maxDeliveries: fc.integer({ min: 1, max: 12 }),
    retries: fc.integer({ min: 0, max: 14 }),
    leaseMs: fc.integer({ min: 20_000, max: 2_000_000 }),
    clockSkewMs: fc.integer({ min: 0, max: 5000 }),
  });
  let named = 0;
  fc.assert(
    fc.property(settings, (s) => {
      const env = qstashEnv(s);
      let message: string;
      try {
        loadConfig(env);
        return;
      } catch (error) {
        if (!(error instanceof ConfigError)) throw error;
        fc.pre(error.setting === "QSTASH_RETRIES");
        message = error.message;
      }
      const asked = message.match(/ QSTASH_RETRIES to at least (\d+)/);
      if (asked === null) return; // none is enough: lower LEASE
      named++;
      assert.equal(
        refusedSetting({ ...env, QSTASH_RETRIES: asked[1]! }),
        null,
        `${JSON.stringify(env)}: ${message}`,
      );
    }),
    { numRuns: runs(500) },
  );
  assert.ok(named > 0);
});
