/**
 * A Pub/Sub message whose retention may end before any dead-letter policy
 * gives up is dropped with no signal, and a delivery answers busy at and
 * past the last while another's lease stands (DESIGN §13): `checkQueue`
 * must count, as the service's start check does, `maxDeliveries` pushes,
 * a lease's wait (`leaseMs` + 2 × `clockSkewMs`) and one more push.
 *
 * @module
 */

import assert from "node:assert/strict";
import { checkQueue, DEFAULT_POLICY, type QueueLimits } from "../../mod.ts";
import { DEFAULT_LEASE_MS } from "../../relayer/_sends.ts";
import { DEFAULT_CLOCK_SKEW_MS } from "../../relayer/_options.ts";

/** The service's defaults: pushes of up to 25 s (2 × 10 s + 5 s), 10 min apart. */
const queue = {
  kind: "pubsub",
  minBackoffMs: 40_000,
  maxBackoffMs: 600_000,
  ackDeadlineMs: 25_000,
} as const;

function problem(limits: QueueLimits) {
  return checkQueue(DEFAULT_POLICY, limits).problem;
}

Deno.test("checkQueue() on Pub/Sub takes a retention only past 10 pushes, a busy last one's lease and one more push: more than 1h44m50s with the default lease (30s) and clock skew (5s)", () => {
  // 10 × (25s + 10m) + 30s + 2 × 5s = 1h44m50s.
  assert.equal(problem({ ...queue, retentionMs: 6_290_000 }), "stops_early");
  assert.equal(problem({ ...queue, retentionMs: 6_290_001 }), null);
  // Nine pushes fit in 1h33m45s, not ten: the queue's limit says so.
  const nine = checkQueue(DEFAULT_POLICY, { ...queue, retentionMs: 5_625_000 });
  assert.deepEqual([nine.problem, nine.limit], ["stops_early", 9]);
  // Eleven pushes surely come in 1h44m50s, but the eleventh may come
  // while the lease a busy tenth met still stands, and the twelfth, the
  // first surely after it, may not.
  const ten = checkQueue(DEFAULT_POLICY, { ...queue, retentionMs: 6_290_000 });
  assert.deepEqual([ten.problem, ten.limit, ten.deliveries], [
    "stops_early",
    11,
    10,
  ]);
});

Deno.test("checkQueue() counts, absent, the relayer's own default lease and clock skew", () => {
  const defaults = { ...queue, retentionMs: 6_290_001 };
  const given = {
    ...defaults,
    leaseMs: DEFAULT_LEASE_MS,
    clockSkewMs: DEFAULT_CLOCK_SKEW_MS,
  };
  assert.deepEqual(
    checkQueue(DEFAULT_POLICY, defaults),
    checkQueue(DEFAULT_POLICY, given),
  );
  for (const retentionMs of [6_290_000, 6_290_001]) {
    assert.equal(
      problem({ ...defaults, retentionMs }),
      problem({ ...given, retentionMs }),
    );
  }
});

Deno.test("checkQueue() on Pub/Sub counts the lease and clock skew it is given", () => {
  const given = { ...queue, leaseMs: 60_000, clockSkewMs: 0 };
  // 10 × 10m25s + 1m = 1h45m10s.
  assert.equal(problem({ ...given, retentionMs: 6_310_000 }), "stops_early");
  assert.equal(problem({ ...given, retentionMs: 6_310_001 }), null);
  const skewed = { ...queue, leaseMs: 30_000, clockSkewMs: 60_000 };
  // 10 × 10m25s + 30s + 2m = 1h46m40s.
  assert.equal(problem({ ...skewed, retentionMs: 6_400_000 }), "stops_early");
  assert.equal(problem({ ...skewed, retentionMs: 6_400_001 }), null);
});

Deno.test("checkQueue() on Pub/Sub needs no such room where a dead-letter policy surely gives up before the retention ends", () => {
  // Ten attempts 10m25s apart surely come within 1h44m10s: its give-up
  // route resolves what is left.
  const exact = { ...queue, retentionMs: 6_250_000 };
  assert.equal(problem({ ...exact, maxDeliveryAttempts: 10 }), null);
  // Eleven may not: the message may expire behind a busy tenth.
  assert.equal(problem({ ...exact, maxDeliveryAttempts: 11 }), "stops_early");
});

Deno.test("checkQueue() refuses a lease or clock skew out of range, naming it", () => {
  for (
    const [name, value] of [
      ["leaseMs", -1],
      ["leaseMs", 1.5],
      ["clockSkewMs", -1],
      ["clockSkewMs", Number.NaN],
    ] as const
  ) {
    assert.throws(
      () => checkQueue(DEFAULT_POLICY, { ...queue, [name]: value }),
      (error: unknown) =>
        error instanceof RangeError &&
        error.message.startsWith(
          `Cannot read queue limits as '${name}' must be an integer number of milliseconds >= 0: current value is `,
        ),
    );
  }
});

Deno.test("checkQueue() on Pub/Sub takes a dead-letter policy for the give-up only when its last attempt's push surely ends within the retention", () => {
  // The tenth attempt comes at most 9 × 10m25s = 1h33m45s after the
  // first and may take the 25s ack deadline: Pub/Sub knows it failed, and
  // forwards the message to the dead-letter topic, only at 1h34m10s. A
  // message that expires before then is dropped with no dead letter.
  for (const retentionMs of [5_625_001, 5_630_000, 5_650_000]) {
    assert.equal(
      problem({ ...queue, retentionMs, maxDeliveryAttempts: 10 }),
      "stops_early",
      `retention ${retentionMs}`,
    );
  }
  assert.equal(
    problem({ ...queue, retentionMs: 5_650_001, maxDeliveryAttempts: 10 }),
    null,
  );
  // Eleven attempts: the eleventh ends by 10 × 10m25s + 25s = 1h44m35s.
  assert.equal(
    problem({ ...queue, retentionMs: 6_275_000, maxDeliveryAttempts: 11 }),
    "stops_early",
  );
  assert.equal(
    problem({ ...queue, retentionMs: 6_275_001, maxDeliveryAttempts: 11 }),
    null,
  );
  // Past the room a busy last delivery needs, no dead-letter policy is
  // counted on: 1h44m50s and a millisecond, whatever the attempts.
  for (const maxDeliveryAttempts of [12, 20, 100]) {
    assert.equal(
      problem({ ...queue, retentionMs: 6_290_000, maxDeliveryAttempts }),
      "stops_early",
    );
    assert.equal(
      problem({ ...queue, retentionMs: 6_290_001, maxDeliveryAttempts }),
      null,
    );
  }
  // Attempts below MAX_DELIVERIES stop early whatever the retention.
  assert.equal(
    problem({ ...queue, retentionMs: 2_678_400_000, maxDeliveryAttempts: 9 }),
    "stops_early",
  );
});
