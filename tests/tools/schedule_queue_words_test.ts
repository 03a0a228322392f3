/**
 * `deno task schedule`'s QStash and Pub/Sub words and defaults at their
 * edges: a QStash default `--retries` that outlasts a busy give-up, the
 * lease a `--sender-timeout` alone is checked against, a callback of no
 * retries, and a Pub/Sub push counted at its default ack deadline.
 *
 * @module
 */

import assert from "node:assert/strict";
import { DEFAULT_POLICY, definePolicy } from "../../mod.ts";
import {
  callbackShortText,
  expiresText,
  formatSchedule,
  parseFlags,
  schedule,
  verdict,
} from "../../tools/schedule.ts";

Deno.test("--queue qstash without --retries takes the fewest that outlast a busy give-up, past --max-deliveries − 1", () => {
  // One retry would be enough for 2 deliveries, but the failure
  // callback's one retry comes 12 s on, within a 40 s busy give-up.
  const flags = parseFlags(["--max-deliveries", "2", "--queue", "qstash"]);
  assert.ok(!flags.help);
  assert.deepEqual(flags.queue, { kind: "qstash", retries: 2 });
});

Deno.test("--queue qstash --sender-timeout alone checks the default --lease against it, as the service checks LEASE", () => {
  assert.throws(
    () => parseFlags(["--queue", "qstash", "--sender-timeout", "20s"]),
    /--lease \(30s, its default\) must be at least twice --sender-timeout \(20s\)/,
  );
});

Deno.test("callbackShortText() says 0 times for a callback QStash does not retry", () => {
  assert.match(
    callbackShortText({ kind: "qstash", retries: 0 }),
    /^FAILURE CALLBACK MAY RUN OUT: QStash retries it 0 times, within 0s /,
  );
});

Deno.test("expiresText() counts a push with no ack deadline given at Pub/Sub's default, 10s, in the sum it shows", () => {
  assert.equal(
    expiresText(
      {
        kind: "pubsub",
        minBackoffMs: 10_000,
        maxBackoffMs: 600_000,
        retentionMs: 3_600_000,
      },
      10,
      6,
    ),
    "MESSAGE MAY EXPIRE after 6 deliveries, before the policy's 10: Pub/Sub drops it with no dead letter, and its intent is stranded; it needs a message retention of more than 1h42m20s (10 × (10s + 10m0s) + 30s + 2 × 5s)",
  );
});

Deno.test("--queue qstash --lease without --retries counts that lease in the default: 2 retries span 160s, a 150s lease and 2 × 5s no more", () => {
  const flags = parseFlags([
    "--max-deliveries",
    "3",
    "--queue",
    "qstash",
    "--lease",
    "150s",
  ]);
  assert.ok(!flags.help);
  assert.deepEqual(flags.queue, {
    kind: "qstash",
    retries: 3,
    leaseMs: 150_000,
  });
});

Deno.test("expiresText() names the one delivery that surely fits in a retention no longer than a step", () => {
  // 10m of retention, each step up to 10s + 10m: only the first surely comes.
  assert.match(
    expiresText(
      {
        kind: "pubsub",
        minBackoffMs: 40_000,
        maxBackoffMs: 600_000,
        retentionMs: 600_000,
      },
      10,
      1,
    ),
    /^MESSAGE MAY EXPIRE after 1 deliver/,
  );
});

Deno.test("formatSchedule() counts a push with no ack deadline given at 10s in its retention line", () => {
  const text = formatSchedule(
    schedule(DEFAULT_POLICY, {
      kind: "pubsub",
      minBackoffMs: 40_000,
      maxBackoffMs: 600_000,
      retentionMs: 3_600_000,
    }),
  );
  assert.match(
    text,
    /^retention 1h0m0s; each failed push counted 10s \(ack deadline\) and 10m0s \(max backoff\)/m,
  );
});

Deno.test("verdict() counts the schedule's own clock skew in a QStash callback's busy give-up when the queue gives none", () => {
  const policy = definePolicy({
    maxDeliveries: 2,
    baseMs: 120_000,
    jitter: "none",
    stuckAfterMs: 60_000,
  });
  const words = verdict(
    schedule(policy, { kind: "qstash", retries: 1 }, { clockSkewMs: 1_000 }),
  );
  assert.match(words, /for up to 32s \(30s \+ 2 × 1s\)/);
});

Deno.test("--queue qstash without --retries or --lease counts --clock-skew in the default: 30s + 2 × 65s reaches the 160s 2 retries span", () => {
  const flags = parseFlags([
    "--max-deliveries",
    "2",
    "--queue",
    "qstash",
    "--clock-skew",
    "65s",
  ]);
  assert.ok(!flags.help);
  assert.deepEqual(flags.queue, { kind: "qstash", retries: 3 });
});

Deno.test("verdict() says a Pub/Sub message may expire once, not also that the queue gives up early", () => {
  const s = schedule({}, {
    kind: "pubsub",
    minBackoffMs: 10_000,
    maxBackoffMs: 600_000,
    retentionMs: 3_600_000,
  });
  assert.equal(s.rows.at(-1)?.action, "expire");
  assert.match(verdict(s), /; MESSAGE MAY EXPIRE after 6 deliveries, /);
  assert.doesNotMatch(verdict(s), /GIVES UP EARLY/);
});

Deno.test("expiresText() counts one delivery that fits in the singular", () => {
  assert.match(
    expiresText(
      {
        kind: "pubsub",
        minBackoffMs: 10_000,
        maxBackoffMs: 600_000,
        retentionMs: 700_000,
      },
      10,
      1,
    ),
    /^MESSAGE MAY EXPIRE after 1 delivery, before the policy's 10: /,
  );
});
