import assert from "node:assert/strict";
import fc from "fast-check";
import {
  backoff,
  decide,
  type Decision,
  definePolicy,
  notSent,
  poison,
  type Policy,
} from "../../mod.ts";
import { anyDelivery, anyRandomOutput, catches } from "../_fc.ts";

const anyPolicy: fc.Arbitrary<Policy> = fc.record({
  maxDeliveries: fc.integer({ min: 1, max: 50 }),
  baseMs: fc.integer({ min: 1, max: 60_000 }),
  capMs: fc.integer({ min: 1, max: 3_600_000 }),
  jitter: fc.constantFrom("equal", "full", "none"),
  stuckAfterMs: fc.integer({ min: 0, max: 3_600_000 }),
}).map(definePolicy);

/** A declared poison, buried at some depth of wrappers. */
const buriedPoison = fc.tuple(fc.nat({ max: 30 }), fc.boolean(), fc.boolean())
  .map(
    ([depth, aggregate, cyclic]) => {
      const core = poison(notSent(new Error("declared")));
      let error: Error = core;
      for (let i = 0; i < depth; i++) {
        error = aggregate && i % 2 === 0
          ? new AggregateError([new Error("noise"), error])
          : new Error(`layer ${i}`, { cause: error });
      }
      if (cyclic) (core.cause as Error).cause = error; // notSent → outermost → … → core
      return error;
    },
  );

function declaredWinsProperty(impl: typeof decide) {
  return fc.property(
    buriedPoison,
    anyDelivery,
    anyPolicy,
    (error, delivery, policy) => {
      const d = impl(error, delivery, policy, { random: () => 0.5 });
      return d.action === "poison" && d.cause === "declared" &&
        d.reason === "retrying will not help";
    },
  );
}

/** Undeclared errors: exactly maxDeliveries deliveries, then poison. */
function exactlyMaxProperty(impl: typeof decide) {
  return fc.property(anyPolicy, anyRandomOutput, (policy, r) => {
    const error = new Error("timeout");
    const actions: Decision["action"][] = [];
    for (let delivery = 1; delivery <= policy.maxDeliveries + 2; delivery++) {
      const d = impl(error, delivery, policy, { random: () => r });
      actions.push(d.action);
      if (d.action === "poison") break;
    }
    return actions.length === policy.maxDeliveries &&
      actions.slice(0, -1).every((a) => a === "retry") &&
      actions.at(-1) === "poison";
  });
}

// Slips the properties must catch: looking only at the top of the chain,
// and exhausting one delivery late (counting failures, not deliveries).
const shallow: typeof decide = (error, delivery, policy, options) =>
  error instanceof Error && error.name === "PoisonError"
    ? { action: "poison", cause: "declared", reason: "retrying will not help" }
    : decide(new Error("undeclared"), delivery, policy, options);
const countsFailures: typeof decide = (error, delivery, policy = {}, options) =>
  decide(error, delivery, {
    ...policy,
    maxDeliveries: (policy.maxDeliveries ?? 10) + 1,
  }, options);

Deno.test("decide() poisons a declared error at once: reason and cause", () => {
  assert.deepEqual(decide(poison(new Error("bad")), 1), {
    action: "poison",
    cause: "declared",
    reason: "retrying will not help",
  });
});

Deno.test("decide() retries with the error's message and a jittered backoff", () => {
  assert.deepEqual(
    decide(new Error("rpc timeout"), 2, {}, { random: () => 0 }),
    {
      action: "retry",
      delayMs: 5000,
      reason: "rpc timeout",
    },
  );
  assert.deepEqual(decide("a thrown string", 1, { jitter: "none" }), {
    action: "retry",
    delayMs: 5000,
    reason: "a thrown string",
  });
  assert.equal(
    decide({ code: 7 }, 1, { jitter: "none" }).reason,
    "[object Object]",
  );
  assert.equal(
    decide(Object.create(null), 1, { jitter: "none" }).reason,
    "unprintable error",
  );
  // An Error whose message is not a string still gives a string reason.
  for (const [message, reason] of [[42, "Error: 42"], [undefined, "Error"]]) {
    const error = new Error("x");
    (error as { message: unknown }).message = message;
    assert.equal(decide(error, 1, { jitter: "none" }).reason, reason);
  }
});

Deno.test("decide() says how many deliveries were used when exhausted", () => {
  assert.deepEqual(decide(new Error("x"), 3, { maxDeliveries: 3 }), {
    action: "poison",
    cause: "exhausted",
    reason: "no luck after 3 deliveries",
  });
  assert.equal(
    decide(new Error("x"), 1, { maxDeliveries: 1 }).reason,
    "no luck after 1 delivery",
  );
  assert.equal(decide(new Error("x"), 1e300).action, "poison");
});

Deno.test("decide() answers a poison with a frozen decision, made once per delivery number", () => {
  const timeout = new Error("x");
  for (const n of [3, 255, 256, 1000]) {
    const first = decide(timeout, n, { maxDeliveries: 3 });
    assert.ok(Object.isFrozen(first));
    assert.deepEqual(first, {
      action: "poison",
      cause: "exhausted",
      reason: `no luck after ${n} deliveries`,
    });
    // Kept below 256; made afresh (and equal) above.
    assert.equal(decide(timeout, n, { maxDeliveries: 3 }) === first, n < 256);
  }
  const declared = decide(poison("bad"), 1);
  assert.ok(Object.isFrozen(declared));
  assert.equal(decide(poison("other"), 7), declared);
  assert.throws(() => {
    (declared as { reason: string }).reason = "changed";
  }, TypeError);
});

Deno.test("decide() rejects a bad delivery number or policy", () => {
  assert.throws(
    () => decide(new Error("x"), 0),
    /Cannot decide as 'delivery' must be an integer >= 1: current value is 0/,
  );
  assert.throws(
    () => decide(new Error("x"), 1, { maxDeliveries: 0 }),
    RangeError,
  );
  assert.throws(
    () => decide(new Error("x"), 1, { jitter: "half" as "equal" }),
    TypeError,
  );
  assert.throws(
    () => decide(new Error("x"), 1, { maxDelivery: 3 } as Partial<Policy>),
    /'maxDelivery' is not a policy field/,
  );
});

Deno.test("decide() lets a declared poison win at every delivery, at any depth, in cycles", () => {
  fc.assert(declaredWinsProperty(decide));
});

Deno.test("decide() gives an undeclared error exactly maxDeliveries deliveries", () => {
  fc.assert(exactlyMaxProperty(decide));
});

Deno.test("decide() delays a retry within the jitter bounds of backoff()", () => {
  fc.assert(
    fc.property(
      anyPolicy,
      anyDelivery,
      anyRandomOutput,
      (policy, delivery, r) => {
        const d = decide(new Error("x"), delivery, policy, { random: () => r });
        if (d.action !== "retry") return delivery >= policy.maxDeliveries;
        const full = backoff(delivery, policy);
        const floor = policy.jitter === "equal"
          ? Math.floor(full / 2)
          : policy.jitter === "full"
          ? 0
          : full;
        return d.delayMs >= floor && d.delayMs <= full;
      },
    ),
  );
});

Deno.test("decide() properties catch a shallow classifier and an off-by-one limit", () => {
  assert.equal(catches(declaredWinsProperty(shallow)), true);
  assert.equal(catches(exactlyMaxProperty(countsFailures)), true);
});

/** A partial policy as users write one: any mix of good, bad and unknown fields. */
const anyPartial: fc.Arbitrary<Record<string, unknown>> = fc.dictionary(
  fc.constantFrom(
    "maxDeliveries",
    "baseMs",
    "capMs",
    "jitter",
    "stuckAfterMs",
    "maxDelivery",
  ),
  fc.oneof(
    fc.integer({ min: -2, max: 200_000 }),
    fc.constantFrom(
      undefined,
      0.5,
      Number.NaN,
      "equal",
      "full",
      "none",
      "half",
    ),
  ),
);

function outcome(run: () => Decision): Decision | string {
  try {
    return run();
  } catch (error) {
    return error instanceof Error ? `${error.name}: ${error.message}` : "?";
  }
}

Deno.test("decide() reads a partial policy exactly as definePolicy() does: the same error, or the same decision", () => {
  fc.assert(
    fc.property(anyPartial, anyDelivery, anyRandomOutput, (fields, n, r) => {
      const policy = fields as Partial<Policy>;
      const options = { random: () => r };
      const error = new Error("timeout");
      assert.deepEqual(
        outcome(() => decide(error, n, policy, options)),
        outcome(() => decide(error, n, definePolicy(policy), options)),
      );
    }),
  );
});

Deno.test("decide() checks a plain policy on every call, and reads only own fields", () => {
  const policy: { maxDeliveries: number } = { maxDeliveries: 3 };
  assert.equal(decide(new Error("x"), 3, policy).action, "poison");
  policy.maxDeliveries = 0;
  assert.throws(
    () => decide(new Error("x"), 1, policy),
    /'maxDeliveries' must be an integer >= 1: current value is 0/,
  );
  // An inherited field is not a setting, for decide() as for definePolicy().
  const inherited = Object.create({ maxDeliveries: 2 }) as Partial<Policy>;
  assert.equal(definePolicy(inherited).maxDeliveries, 10);
  assert.equal(decide(new Error("x"), 2, inherited).action, "retry");
  // A copy of a checked policy is checked again: it could have been changed.
  const copy = { ...definePolicy({ maxDeliveries: 3 }), capMs: -1 };
  assert.throws(() => decide(new Error("x"), 1, copy), /'capMs'/);
});
