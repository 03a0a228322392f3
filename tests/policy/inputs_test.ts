/**
 * The policy functions at the edges of their inputs: errors stay short
 * whatever they were given, every function that takes a policy checks it
 * as `decide` does, and the texts say what the schedule does.
 */
import assert from "node:assert/strict";
import {
  backoff,
  checkQueue,
  decide,
  DEFAULT_POLICY,
  definePolicy,
  describePolicy,
  formatDuration,
  jitter,
  parseDuration,
  type Policy,
  rescueWindow,
} from "../../mod.ts";

Deno.test("an error message shows at most the start of a huge input, and says how long it was", () => {
  const huge = "x".repeat(10_000_000);
  const calls: (() => unknown)[] = [
    () => definePolicy({ jitter: huge as never }),
    () => decide(new Error("e"), 1, { jitter: huge as never }),
    () => backoff(huge as never),
    () => jitter(5, huge as never),
    () => parseDuration(huge),
    () => definePolicy({ maxDeliveries: Array(1_000_000) as never }),
  ];
  for (const call of calls) {
    assert.throws(call, (error: Error) => {
      assert.ok(error.message.length < 600, `${error.message.length} chars`);
      return true;
    });
  }
  assert.throws(() => parseDuration(huge), /…\(10000000 characters\)$/);
});

Deno.test("describePolicy, rescueWindow and checkQueue check their policy as decide does", () => {
  for (const maxDeliveries of [Number.NaN, 0]) {
    const bad = { ...DEFAULT_POLICY, maxDeliveries } as Policy;
    assert.throws(() => decide(new Error("e"), 1, bad), RangeError);
    assert.throws(() => checkQueue(bad, { kind: "kv" }), RangeError);
    assert.throws(() => rescueWindow(bad), RangeError);
    assert.throws(() => describePolicy(bad), RangeError);
  }
  // A partial policy is completed as decide completes it (equal jitter).
  const partial = { maxDeliveries: 10 } as Policy;
  assert.equal(rescueWindow(partial), rescueWindow(definePolicy(partial)));
  assert.equal(rescueWindow(partial), 317_500);
  assert.equal(describePolicy(partial), describePolicy(DEFAULT_POLICY));
});

Deno.test("describePolicy says a base at or above the cap backs off by the cap, not doubling", () => {
  assert.equal(
    describePolicy(
      definePolicy({ baseMs: 5000, capMs: 1000, jitter: "none" }),
    ),
    "at most 10 deliveries; back off 1s",
  );
  assert.equal(
    describePolicy(definePolicy({ baseMs: 1000, capMs: 1000 })),
    "at most 10 deliveries; back off 1s, equal jitter",
  );
});

Deno.test("formatDuration refuses what is not a number or beyond 2^53 − 1 ms, naming the value as given", () => {
  for (const value of ["5000", 5n, Object.create(null), 3.6e27, -3.6e27]) {
    assert.throws(() => formatDuration(value as never), RangeError);
  }
  assert.throws(
    () => formatDuration("5000" as never),
    /current value is "5000"$/,
  );
  assert.equal(
    parseDuration(formatDuration(Number.MAX_SAFE_INTEGER)),
    Number.MAX_SAFE_INTEGER,
  );
});

Deno.test("parseDuration does not count leading zeros against the 15 digits", () => {
  assert.equal(parseDuration("0000000000000001"), 1);
  assert.equal(parseDuration("0"), 0);
  assert.throws(() => parseDuration("1000000000000000"), /at most 15 digits/);
});

Deno.test("decide and jitter refuse a random source that is not a function, in their own words", () => {
  for (const random of ["0.5", 0.5, null, {}]) {
    const given = random as unknown as () => number;
    assert.throws(
      () => decide(new Error("rpc timeout"), 1, {}, { random: given }),
      (error: Error) => {
        assert.ok(error instanceof TypeError);
        assert.match(
          error.message,
          /^Cannot decide as 'random' must be a function returning numbers in \[0, 1\), such as Math\.random: current value is /,
        );
        return true;
      },
    );
  }
  assert.throws(
    () => jitter(5000, "equal", "0.5" as unknown as () => number),
    /^TypeError: Cannot apply jitter as 'random' must be a function/,
  );
  // A poison needs no random number: a bad source is not consulted.
  assert.equal(
    decide(new Error("x"), 10, {}, { random: null as unknown as () => number })
      .action,
    "poison",
  );
});

// From JavaScript, an empty array read as no fields (the defaults) and a
// null queue as none (the local KV queue): a caller who passed either most
// likely meant something else.
Deno.test("definePolicy refuses an array, and rescueWindow a null queue, saying what to pass", () => {
  for (const given of [[], [5]]) {
    assert.throws(
      () => definePolicy(given as never),
      new TypeError(
        "Cannot define policy as its fields must come in an object, such as { maxDeliveries: 5 }, or undefined for the defaults: current value is an array",
      ),
    );
    // decide reads such a policy as definePolicy does.
    assert.throws(
      () => decide(new Error("timeout"), 1, given as never),
      TypeError,
    );
  }
  assert.throws(
    () => rescueWindow(DEFAULT_POLICY, null as never),
    new TypeError(
      'Cannot compute rescue window as the queue must be its limits, such as { kind: "qstash", retries: 3 }, or undefined for the local KV queue: current value is null',
    ),
  );
  assert.equal(rescueWindow(DEFAULT_POLICY, undefined), 317_500);
});

Deno.test("a duration that is not a whole number of milliseconds is refused, by every check that reads one", () => {
  for (const ms of [1.5, 5_000.25, 2 ** 53]) {
    assert.throws(
      () => definePolicy({ baseMs: ms }),
      /Cannot define policy as 'baseMs' must be an integer number of milliseconds >= 1: current value is /,
    );
    assert.throws(
      () => definePolicy({ stuckAfterMs: ms }),
      /'stuckAfterMs' must be an integer number of milliseconds >= 0/,
    );
    assert.throws(
      () => backoff(2, { baseMs: 1_000, capMs: ms }),
      /Cannot compute backoff as 'capMs' must be an integer number of milliseconds >= 1/,
    );
  }
});
