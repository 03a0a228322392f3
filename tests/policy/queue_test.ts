import assert from "node:assert/strict";
import fc from "fast-check";
import {
  checkQueue,
  DEFAULT_POLICY,
  definePolicy,
  describePolicy,
  JITTERS,
  type Policy,
  type QueueCheck,
  queueGap,
  queueLimit,
  type QueueLimits,
  rescueWindow,
} from "../../mod.ts";
import { catches, runs } from "../_fc.ts";

/** Queues as the documentation allows them. */
const anyQueue: fc.Arbitrary<QueueLimits> = fc.oneof(
  fc.record({
    kind: fc.constant("qstash" as const),
    retries: fc.integer({ min: 0, max: 100 }),
  }),
  fc.integer({ min: 0, max: 600_000 }).chain((minBackoffMs) =>
    fc.record({
      kind: fc.constant("pubsub" as const),
      minBackoffMs: fc.constant(minBackoffMs),
      maxBackoffMs: fc.integer({ min: minBackoffMs, max: 600_000 }),
    }, { requiredKeys: ["kind", "minBackoffMs", "maxBackoffMs"] })
  ).chain((q) =>
    fc.option(fc.integer({ min: 5, max: 100 }), { nil: undefined }).map((
      maxDeliveryAttempts,
    ) => maxDeliveryAttempts === undefined ? q : { ...q, maxDeliveryAttempts })
  ),
  fc.record({
    kind: fc.constant("cloudflare" as const),
    maxRetries: fc.integer({ min: 0, max: 100 }),
  }),
  fc.constant({ kind: "kv" as const }),
);

const anyPolicy: fc.Arbitrary<Policy> = fc.record({
  maxDeliveries: fc.integer({ min: 1, max: 200 }),
  baseMs: fc.integer({ min: 1, max: 10_000_000 }),
  capMs: fc.integer({ min: 1, max: 200_000_000 }),
  jitter: fc.constantFrom(...JITTERS),
  stuckAfterMs: fc.integer({ min: 0, max: 1_000_000_000 }),
}).map((fields) => definePolicy(fields));

/**
 * A policy with a queue whose limit is often right at the policy's last
 * delivery (one under, at, one over), where an off-by-one would show.
 */
const anyPolicyAndQueue: fc.Arbitrary<[Policy, QueueLimits]> = anyPolicy.chain(
  (policy) => {
    const clamp = (n: number, min: number, max: number) =>
      Math.min(max, Math.max(min, n));
    const nearLimit: fc.Arbitrary<QueueLimits> = fc.tuple(
      fc.integer({ min: -1, max: 1 }),
      fc.constantFrom("qstash", "cloudflare", "pubsub"),
      fc.integer({ min: 0, max: 600_000 }),
    ).map(([delta, kind, minBackoffMs]): QueueLimits => {
      const limit = policy.maxDeliveries + delta;
      return kind === "qstash"
        ? { kind, retries: clamp(limit - 1, 0, 100) }
        : kind === "cloudflare"
        ? { kind, maxRetries: clamp(limit - 1, 0, 100) }
        : {
          kind,
          maxDeliveryAttempts: clamp(limit, 5, 100),
          minBackoffMs,
          maxBackoffMs: 600_000,
        };
    });
    return fc.tuple(fc.constant(policy), fc.oneof(anyQueue, nearLimit));
  },
);

/** The longest delay each queue that applies ours accepts (DESIGN §14). */
const DELAY_LIMIT_MS = {
  qstash: 86_400_000, // 1 day
  cloudflare: 43_200_000, // 12 h
  kv: Infinity,
} as const;

/**
 * The check worked out by hand from DESIGN §4 and §14, sharing no code
 * with the policy: the queue's limit from its own setting; a job gets the
 * fewer of the policy's and the queue's deliveries; each gap after
 * delivery n is, on a queue that applies our delays, the jitter's lower
 * bound of min(cap, base × 2^(n−1)) capped at the queue's delay limit, and
 * on Pub/Sub its minimum backoff.
 */
function model(policy: Policy, queue: QueueLimits): QueueCheck {
  const limit = queue.kind === "qstash"
    ? queue.retries + 1
    : queue.kind === "cloudflare"
    ? queue.maxRetries + 1
    : queue.kind === "pubsub"
    ? queue.maxDeliveryAttempts ?? Infinity
    : Infinity;
  const deliveries = Math.min(policy.maxDeliveries, limit);
  let windowMs = 0;
  for (let n = 1; n < deliveries; n++) {
    if (queue.kind === "pubsub") {
      windowMs += queue.minBackoffMs;
      continue;
    }
    // Exact: a power of two scales a number without rounding.
    const delay = Math.min(policy.capMs, policy.baseMs * 2 ** (n - 1));
    const floor = policy.jitter === "equal"
      ? Math.floor(delay / 2)
      : policy.jitter === "full"
      ? 0
      : delay;
    windowMs += Math.min(floor, DELAY_LIMIT_MS[queue.kind]);
  }
  // QStash retries a failure callback as often as the message, 12 s and
  // then 2 min 28 s after its first call: with the default lease (30 s)
  // and clock skew (5 s), a give-up busy behind a lease waits up to 40 s,
  // which one retry does not outlast and two do.
  const problem = limit < policy.maxDeliveries ||
      (queue.kind === "qstash" && queue.retries < 2)
    ? "stops_early"
    // The window must outlast stuckAfter and the clock skew (5 s unless
    // the queue gives its own), as the service counts CLOCK_SKEW.
    : windowMs < policy.stuckAfterMs + (queue.clockSkewMs ?? 5000)
    ? "window_short"
    : null;
  return { problem, limit, deliveries, windowMs };
}

/** The window is the model's: the queue's guaranteed gaps, up to its limit. */
function windowProperty(impl: typeof rescueWindow) {
  return fc.property(anyPolicyAndQueue, ([policy, queue]) => {
    assert.equal(impl(policy, queue), model(policy, queue).windowMs);
  });
}

Deno.test("rescueWindow() with a queue sums the gaps that queue guarantees, up to its own limit", () => {
  fc.assert(windowProperty(rescueWindow), { numRuns: runs(1000) });
});

Deno.test("rescueWindow() property catches a window that ignores the queue's limit", () => {
  assert.equal(
    catches(windowProperty((policy) => rescueWindow(policy))),
    true,
  );
});

/** checkQueue() gives the model's problem, limit, deliveries and window. */
function checkProperty(impl: typeof checkQueue) {
  return fc.property(anyPolicyAndQueue, ([policy, queue]) => {
    assert.deepEqual(impl(policy, queue), model(policy, queue));
  });
}

// Slips the property must catch: our delays taken uncapped on QStash and
// Cloudflare; a queue that stops exactly at the policy's last delivery
// taken for one that stops early; the policy's deliveries reported as the
// job's, whatever the queue's limit.
const uncapped: typeof checkQueue = (policy, queue) => {
  const check = checkQueue(policy, queue);
  if (queue.kind === "pubsub") return check;
  const windowMs = rescueWindow(
    definePolicy({ ...policy, maxDeliveries: check.deliveries }),
  );
  const problem = check.problem === "stops_early"
    ? check.problem
    : windowMs < policy.stuckAfterMs + 5000
    ? "window_short"
    : null;
  return { ...check, problem, windowMs };
};
const stopsAtLastTooEarly: typeof checkQueue = (policy, queue) => {
  const check = checkQueue(policy, queue);
  return check.limit === policy.maxDeliveries
    ? { ...check, problem: "stops_early" }
    : check;
};
const policyDeliveries: typeof checkQueue = (policy, queue) => ({
  ...checkQueue(policy, queue),
  deliveries: policy.maxDeliveries,
});

Deno.test("checkQueue() gives the problem, limit, deliveries and window worked out by hand", () => {
  fc.assert(checkProperty(checkQueue), { numRuns: runs(1000) });
});

Deno.test("checkQueue() property catches uncapped delays, an off-by-one limit and the policy's deliveries", () => {
  assert.equal(catches(checkProperty(uncapped)), true);
  assert.equal(catches(checkProperty(stopsAtLastTooEarly)), true);
  assert.equal(catches(checkProperty(policyDeliveries)), true);
});

Deno.test("rescueWindow() on each queue, for the default policy", () => {
  assert.equal(rescueWindow(DEFAULT_POLICY, { kind: "kv" }), 317_500);
  assert.equal(
    rescueWindow(DEFAULT_POLICY, { kind: "qstash", retries: 9 }),
    317_500,
  );
  assert.equal(
    rescueWindow(DEFAULT_POLICY, { kind: "qstash", retries: 4 }),
    37_500,
  );
  assert.equal(
    rescueWindow(DEFAULT_POLICY, { kind: "cloudflare", maxRetries: 3 }),
    17_500,
  );
  assert.equal(
    rescueWindow(DEFAULT_POLICY, {
      kind: "pubsub",
      maxDeliveryAttempts: 100,
      minBackoffMs: 1000,
      maxBackoffMs: 10_000,
    }),
    9000,
  );
  // No retry policy: immediate redelivery guarantees nothing.
  assert.equal(
    rescueWindow(DEFAULT_POLICY, {
      kind: "pubsub",
      minBackoffMs: 0,
      maxBackoffMs: 0,
    }),
    0,
  );
});

Deno.test("queueGap() caps our delays at 1 day on QStash and 12h on Cloudflare, and never uses them on Pub/Sub", () => {
  const policy = definePolicy({
    baseMs: 3_600_000,
    capMs: 172_800_000,
    jitter: "none",
  });
  assert.deepEqual(queueGap(policy, { kind: "qstash", retries: 9 }, 6), {
    minMs: 86_400_000,
    maxMs: 86_400_000,
  });
  assert.deepEqual(queueGap(policy, { kind: "cloudflare", maxRetries: 9 }, 5), {
    minMs: 43_200_000,
    maxMs: 43_200_000,
  });
  assert.deepEqual(queueGap(policy, { kind: "kv" }, 6), {
    minMs: 115_200_000,
    maxMs: 115_200_000,
  });
  assert.deepEqual(
    queueGap(policy, { kind: "pubsub", minBackoffMs: 5, maxBackoffMs: 7 }, 6),
    { minMs: 5, maxMs: 7 },
  );
});

Deno.test("queueGap() refuses a delivery below 1 on every queue, in its own words", () => {
  const queues: QueueLimits[] = [
    { kind: "kv" },
    { kind: "pubsub", minBackoffMs: 5, maxBackoffMs: 7 },
  ];
  for (const queue of queues) {
    assert.throws(
      () => queueGap(DEFAULT_POLICY, queue, 0),
      /Cannot compute queue gap as 'delivery' must be an integer >= 1: current value is 0/,
    );
  }
});

Deno.test("queueLimit() refuses limits outside the queue's documented range", () => {
  assert.throws(
    () => queueLimit({ kind: "qstash", retries: 101 }),
    /'retries' must be an integer from 0 to 100: current value is 101/,
  );
  assert.throws(() => queueLimit({ kind: "qstash", retries: -1 }), RangeError);
  assert.throws(
    () => queueLimit({ kind: "cloudflare", maxRetries: 1.5 }),
    RangeError,
  );
  assert.throws(
    () =>
      queueLimit({
        kind: "pubsub",
        maxDeliveryAttempts: 101,
        minBackoffMs: 0,
        maxBackoffMs: 0,
      }),
    /'maxDeliveryAttempts' must be an integer from 5 to 100/,
  );
  assert.throws(
    () => queueLimit({ kind: "pubsub", minBackoffMs: 20, maxBackoffMs: 10 }),
    /'maxBackoffMs' must be an integer from minBackoffMs \(20\) to 600000: current value is 10/,
  );
  assert.throws(
    () =>
      queueLimit({
        kind: "pubsub",
        minBackoffMs: 600_001,
        maxBackoffMs: 600_001,
      }),
    RangeError,
  );
  // Pub/Sub's retention and ack deadline, each at both ends of its range.
  const pubsub = { kind: "pubsub", minBackoffMs: 0, maxBackoffMs: 0 } as const;
  for (
    const [field, value, range] of [
      ["retentionMs", 599_999, "600000 to 2678400000"],
      ["retentionMs", 2_678_400_001, "600000 to 2678400000"],
      ["ackDeadlineMs", 9_999, "10000 to 600000"],
      ["ackDeadlineMs", 600_001, "10000 to 600000"],
    ] as const
  ) {
    assert.throws(
      () => queueLimit({ ...pubsub, [field]: value }),
      new RegExp(
        `'${field}' must be an integer from ${range}: current value is ${value}`,
      ),
    );
  }
  assert.throws(
    () => queueLimit({ kind: "sqs" } as unknown as QueueLimits),
    TypeError,
  );
});

Deno.test("checkQueue() names the first problem: a queue that stops early, then a short window", () => {
  assert.deepEqual(checkQueue(DEFAULT_POLICY, { kind: "qstash", retries: 4 }), {
    problem: "stops_early",
    limit: 5,
    deliveries: 5,
    windowMs: 37_500,
  });
  assert.deepEqual(
    checkQueue(DEFAULT_POLICY, {
      kind: "pubsub",
      maxDeliveryAttempts: 100,
      minBackoffMs: 1000,
      maxBackoffMs: 10_000,
    }),
    { problem: "window_short", limit: 100, deliveries: 10, windowMs: 9000 },
  );
  assert.equal(
    checkQueue(DEFAULT_POLICY, {
      kind: "pubsub",
      // 9 gaps of 33.889 s outlast 5 min and 5 s of clock skew.
      minBackoffMs: 33_889,
      maxBackoffMs: 600_000,
    }).problem,
    null,
  );
  // At the edge: a window exactly as long as stuckAfter and the clock skew
  // (5 s unless given) is enough.
  const qstash = { kind: "qstash", retries: 9 } as const;
  const edge = checkQueue(DEFAULT_POLICY, qstash).windowMs;
  assert.equal(
    checkQueue({ ...DEFAULT_POLICY, stuckAfterMs: edge - 5000 }, qstash)
      .problem,
    null,
  );
  assert.equal(
    checkQueue({ ...DEFAULT_POLICY, stuckAfterMs: edge - 4999 }, qstash)
      .problem,
    "window_short",
  );
  const oneClock = { ...qstash, clockSkewMs: 0 };
  assert.equal(
    checkQueue({ ...DEFAULT_POLICY, stuckAfterMs: edge }, oneClock).problem,
    null,
  );
  assert.equal(
    checkQueue({ ...DEFAULT_POLICY, stuckAfterMs: edge + 1 }, oneClock)
      .problem,
    "window_short",
  );
});

Deno.test("describePolicy() with a queue says its limit and whose delays apply", () => {
  const head = describePolicy(DEFAULT_POLICY);
  const lines: [QueueLimits, string][] = [
    [
      { kind: "qstash", retries: 9 },
      "on QStash: at most 10 deliveries (retries 9), our delays up to 1 day",
    ],
    [
      {
        kind: "pubsub",
        maxDeliveryAttempts: 100,
        minBackoffMs: 1000,
        maxBackoffMs: 10_000,
      },
      "on Pub/Sub: at most 100 deliveries (max delivery attempts 100), its own backoff 1s to 10s",
    ],
    [
      { kind: "pubsub", minBackoffMs: 10_000, maxBackoffMs: 600_000 },
      "on Pub/Sub: no dead-letter policy, its own backoff 10s to 10m0s",
    ],
    [
      { kind: "cloudflare", maxRetries: 0 },
      "on Cloudflare Queues: at most 1 delivery (max retries 0), our delays up to 12h",
    ],
    [{ kind: "kv" }, "on the local KV queue: no limit, our delays"],
  ];
  for (const [queue, text] of lines) {
    assert.equal(describePolicy(DEFAULT_POLICY, queue), `${head}; ${text}`);
  }
});

Deno.test("queueLimit() on Pub/Sub with a retention counts the deliveries that surely come before it ends: the last at most (limit − 1) × (ackDeadlineMs + maxBackoffMs) in, the next possibly past it", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 600_000 }),
      fc.integer({ min: 600_000, max: 2_678_400_000 }),
      fc.option(fc.integer({ min: 10_000, max: 600_000 }), { nil: undefined }),
      fc.option(fc.integer({ min: 5, max: 100 }), { nil: undefined }),
      (maxBackoffMs, retentionMs, ackDeadlineMs, maxDeliveryAttempts) => {
        const queue: QueueLimits = {
          kind: "pubsub",
          minBackoffMs: 0,
          maxBackoffMs,
          retentionMs,
          ...(ackDeadlineMs === undefined ? {} : { ackDeadlineMs }),
          ...(maxDeliveryAttempts === undefined ? {} : { maxDeliveryAttempts }),
        };
        const limit = queueLimit(queue);
        const stepMs = (ackDeadlineMs ?? 10_000) + maxBackoffMs;
        const fits = Math.ceil(retentionMs / stepMs);
        assert.equal(limit, Math.min(fits, maxDeliveryAttempts ?? Infinity));
        assert.ok((fits - 1) * stepMs < retentionMs);
        assert.ok(fits * stepMs >= retentionMs);
      },
    ),
    { numRuns: runs(500) },
  );
  // No backoff (immediate redelivery): each push may still take the ack
  // deadline, 10 s unless given (Pub/Sub's default and least), so 10
  // minutes surely hold 60 pushes, not more.
  assert.equal(
    queueLimit({
      kind: "pubsub",
      minBackoffMs: 0,
      maxBackoffMs: 0,
      retentionMs: 600_000,
    }),
    60,
  );
  // The default policy on an hour's retention stops at delivery 6.
  const check = checkQueue(DEFAULT_POLICY, {
    kind: "pubsub",
    minBackoffMs: 10_000,
    maxBackoffMs: 600_000,
    retentionMs: 3_600_000,
  });
  assert.deepEqual([check.problem, check.limit], ["stops_early", 6]);
});

Deno.test("queueGap() reads a partial policy as decide does: the default jitter's floor, not the whole delay", () => {
  const partial = {} as unknown as Policy;
  assert.deepEqual(
    queueGap(partial, { kind: "kv" }, 1),
    queueGap(DEFAULT_POLICY, { kind: "kv" }, 1),
  );
  assert.deepEqual(queueGap(partial, { kind: "kv" }, 1), {
    minMs: 2500,
    maxMs: 5000,
  });
  for (const policy of [null, { jitter: "Equal" }]) {
    assert.throws(
      () => queueGap(policy as unknown as Policy, { kind: "kv" }, 1),
      /Cannot define policy/,
    );
  }
});

// From JavaScript, a kind alone was said to lack 'kind', the one thing it held.
Deno.test("queueLimit(), queueGap(), checkQueue() and rescueWindow() name a queue that is no object, with the shape to pass", () => {
  for (
    const [queue, shown] of [["qstash", '"qstash"'], [null, "null"], [
      3,
      "3",
    ]] as const
  ) {
    const refusal = new TypeError(
      `Cannot read queue limits as the queue must be an object such as { kind: "qstash", retries: 3 }: current value is ${shown}`,
    );
    assert.throws(() => queueLimit(queue as never), refusal);
    assert.throws(() => queueGap(DEFAULT_POLICY, queue as never, 1), refusal);
    assert.throws(() => checkQueue(DEFAULT_POLICY, queue as never), refusal);
    // null is no queue to rescueWindow(), as undefined is.
    if (queue !== null) {
      assert.throws(
        () => rescueWindow(DEFAULT_POLICY, queue as never),
        refusal,
      );
    }
  }
  assert.throws(
    () => queueLimit({ kind: "sqs" } as never),
    /'kind' must be "qstash", "pubsub", "cloudflare" or "kv": current value is "sqs"$/,
  );
});
