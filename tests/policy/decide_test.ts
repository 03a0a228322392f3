import assert from "node:assert/strict";
import fc from "fast-check";
import {
  backoff,
  decide,
  type Decision,
  DEFAULT_POLICY,
  definePolicy,
  notSent,
  poison,
  type Policy,
} from "../../mod.ts";
import { anyDelivery, anyRandomOutput, catches, runs } from "../_fc.ts";

const rangedPolicy = fc.record({
  maxDeliveries: fc.integer({ min: 1, max: 50 }),
  baseMs: fc.integer({ min: 1, max: 60_000 }),
  capMs: fc.integer({ min: 1, max: 3_600_000 }),
  jitter: fc.constantFrom("equal", "full", "none"),
  stuckAfterMs: fc.integer({ min: 0, max: 3_600_000 }),
});
/**
 * Policies at the edges of DESIGN §4 too: a base equal to its cap (7 in
 * 10,000 of the ranged ones), and a cap past 2^31 up to 2^53 − 1 (none).
 */
const anyPolicy: fc.Arbitrary<Policy> = fc.oneof(
  { weight: 4, arbitrary: rangedPolicy },
  rangedPolicy.map((policy) => ({ ...policy, capMs: policy.baseMs })),
  fc.tuple(
    rangedPolicy,
    fc.constantFrom(2 ** 31, 2 ** 32, Number.MAX_SAFE_INTEGER),
    fc.boolean(),
  ).map(([policy, capMs, equal]) => ({
    ...policy,
    capMs,
    ...(equal ? { baseMs: capMs } : {}),
  })),
).map(definePolicy);

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
    "Object with code 7 (not an Error)",
  );
  assert.equal(
    decide(Object.create(null), 1, { jitter: "none" }).reason,
    "an object with no prototype (not an Error)",
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

Deno.test("decide() rejects every non-integer or < 1 delivery with a RangeError, before reading the error", () => {
  const invalid = fc.oneof(
    fc.integer({ max: 0 }),
    fc.double({ noInteger: true }),
    fc.constantFrom(Number.NaN, Infinity, -Infinity),
  );
  const anyError = fc.constantFrom(new Error("x"), poison(new Error("x")));
  fc.assert(fc.property(invalid, anyError, (delivery, error) => {
    assert.throws(() => decide(error, delivery), RangeError);
  }));
});

Deno.test("decide() draws its jitter from Math.random when given no source", () => {
  // 32 draws over [0, 1e9]: all alike only if the source is fixed.
  const policy = { baseMs: 1e9, capMs: 1e9, jitter: "full" } as const;
  const seen = new Set<number>();
  for (let i = 0; i < 32; i++) {
    const d = decide(new Error("x"), 1, policy);
    if (d.action === "retry") seen.add(d.delayMs);
  }
  assert.ok(seen.size > 1, `32 draws gave ${[...seen]}`);
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
        // Whole milliseconds (half + randomInt, DESIGN §4).
        return Number.isSafeInteger(d.delayMs) && d.delayMs >= floor &&
          d.delayMs <= full;
      },
    ),
  );
});

Deno.test("decide() properties catch a shallow classifier and an off-by-one limit", () => {
  assert.equal(catches(declaredWinsProperty(shallow)), true);
  assert.equal(catches(exactlyMaxProperty(countsFailures)), true);
});

/** How one field sits on a partial policy object. */
type Placement =
  | "data"
  | "getter"
  | "flaky getter"
  | "non-enumerable"
  | "inherited";

/** A partial policy, as a recipe: `build` makes a fresh object from it. */
interface PartialSpec {
  /** The prototype: `Object.prototype`, none, or a class's. */
  readonly proto: "object" | "null" | "class";
  /** Policy fields: name, value (good, bad or undefined) and placement. */
  readonly fields: readonly (readonly [keyof Policy, unknown, Placement])[];
  /** An own enumerable field that is not a policy field, if any. */
  readonly unknown: readonly [string, unknown] | undefined;
}

/** A class whose instances may carry a policy's fields. */
class Settings {
  /** A method on the prototype: not a setting. */
  describe(): string {
    return "settings";
  }
}

const goodValue: Record<keyof Policy, fc.Arbitrary<unknown>> = {
  maxDeliveries: fc.integer({ min: 1, max: 50 }),
  baseMs: fc.integer({ min: 1, max: 60_000 }),
  capMs: fc.integer({ min: 1, max: 3_600_000 }),
  jitter: fc.constantFrom("equal", "full", "none"),
  stuckAfterMs: fc.integer({ min: 0, max: 3_600_000 }),
};
const badValue: fc.Arbitrary<unknown> = fc.constantFrom(
  0,
  -2,
  0.5,
  Number.NaN,
  2 ** 53,
  "5",
  "half",
  null,
);

/**
 * Partial policies as users write them, from valid values mostly (so most
 * runs compare decisions, not errors), and placed in every way an object
 * can hold a field: a plain field, a getter, a getter that answers once
 * and then NaN, a non-enumerable own field, an inherited one; sometimes a
 * field that is not a policy field, often named like one every object
 * inherits.
 */
const anyPartial: fc.Arbitrary<PartialSpec> = fc.record({
  proto: fc.constantFrom("object", "object", "null", "class"),
  fields: fc.shuffledSubarray(
    ["maxDeliveries", "baseMs", "capMs", "jitter", "stuckAfterMs"] as const,
  ).chain((names) =>
    fc.tuple(
      ...names.map((name) =>
        fc.tuple(
          fc.constant(name),
          fc.oneof(
            { weight: 8, arbitrary: goodValue[name] },
            { weight: 1, arbitrary: badValue },
            { weight: 1, arbitrary: fc.constant(undefined) },
          ),
          fc.constantFrom<Placement>(
            "data",
            "data",
            "data",
            "getter",
            "flaky getter",
            "non-enumerable",
            "inherited",
          ),
        )
      ),
    )
  ),
  unknown: fc.oneof(
    { weight: 7, arbitrary: fc.constant(undefined) },
    {
      weight: 1,
      arbitrary: fc.tuple(
        fc.constantFrom(
          "maxDelivery",
          "constructor",
          "toString",
          "hasOwnProperty",
          "__proto__",
        ),
        fc.constantFrom<unknown>(3, 0, { maxDeliveries: 1 }),
      ),
    },
  ),
});

/** A fresh object from a recipe (a flaky getter's count starts again). */
function build(spec: PartialSpec): Partial<Policy> {
  const base = spec.proto === "null"
    ? null
    : spec.proto === "class"
    ? Settings.prototype
    : Object.prototype;
  const inherited = spec.fields.filter(([, , how]) => how === "inherited");
  const proto = inherited.length === 0 ? base : Object.create(base);
  for (const [name, value] of inherited) proto[name] = value;
  const object = Object.create(proto);
  const own = (name: string, descriptor: PropertyDescriptor) =>
    Object.defineProperty(object, name, { configurable: true, ...descriptor });
  for (const [name, value, how] of spec.fields) {
    if (how === "data") own(name, { value, enumerable: true, writable: true });
    if (how === "getter") own(name, { get: () => value, enumerable: true });
    if (how === "flaky getter") {
      let reads = 0;
      own(name, {
        get: () => ++reads === 1 ? value : Number.NaN,
        enumerable: true,
      });
    }
    if (how === "non-enumerable") own(name, { value, writable: true });
  }
  if (spec.unknown !== undefined) {
    const [name, value] = spec.unknown;
    own(name, { value, enumerable: true, writable: true });
  }
  return object;
}

function outcome(run: () => Decision | Policy): Decision | Policy | string {
  try {
    return run();
  } catch (error) {
    return error instanceof Error ? `${error.name}: ${error.message}` : "?";
  }
}

/**
 * What a partial policy means, worked out from its recipe, not from an
 * object: a field that is not a policy field is refused (whatever its name
 * is on `Object.prototype`); the settings are the own enumerable fields,
 * each worth its first read, a non-enumerable one too; an undefined one
 * and an inherited one are not settings. The settings then go to `definePolicy`
 * as a plain object of policy fields, which it has always read right.
 */
function meaning(spec: PartialSpec): Policy | string {
  if (spec.unknown !== undefined) {
    return `TypeError: Cannot define policy as '${
      spec.unknown[0]
    }' is not a policy field: use maxDeliveries, baseMs, capMs, jitter, stuckAfterMs`;
  }
  const settings: Record<string, unknown> = {};
  for (const [name, value, how] of spec.fields) {
    if (
      how !== "inherited" && value !== undefined
    ) {
      settings[name] = value;
    }
  }
  return outcome(() => definePolicy(settings as Partial<Policy>)) as
    | Policy
    | string;
}

/** The pair under test: `decide` and the `definePolicy` beside it. */
interface Reader {
  decide: typeof decide;
  definePolicy: typeof definePolicy;
}

/** Counts what the property compared, to show it compares decisions. */
const compared = { decisions: 0, errors: 0 };

/**
 * decide() on a partial policy, definePolicy() on it, and decide() on what
 * definePolicy() made all agree with the policy's meaning: the same error,
 * or the same policy and the same decision.
 */
function readsAsDefinedProperty(impl: Reader) {
  return fc.property(anyPartial, anyDelivery, anyRandomOutput, (spec, n, r) => {
    const options = { random: () => r };
    const error = new Error("timeout");
    const expected = meaning(spec);
    const decision = typeof expected === "string"
      ? expected
      : outcome(() => decide(error, n, expected, options));
    compared[typeof decision === "string" ? "errors" : "decisions"]++;
    assert.deepEqual(
      outcome(() => impl.decide(error, n, build(spec), options)),
      decision,
    );
    const defined = outcome(() => impl.definePolicy(build(spec)));
    assert.deepEqual(defined, expected);
    if (typeof defined !== "string") {
      assert.deepEqual(
        outcome(() => decide(error, n, defined, options)),
        decision,
      );
    }
  });
}

// Slips the property must catch. The fast path of old: a partial policy
// checked by one read of its fields, then used by another (a getter may
// answer differently), which also sees inherited fields. And the old
// check of names, `in`, which takes `constructor` or `toString` for a
// policy field.
const readsTwice: Reader = {
  definePolicy,
  decide: (error, delivery, policy, options) => {
    if (typeof policy !== "object" || policy === null) {
      return decide(error, delivery, policy, options);
    }
    definePolicy(policy);
    const read: Record<string, unknown> = {};
    for (const name of Object.keys(DEFAULT_POLICY) as (keyof Policy)[]) {
      if (policy[name] !== undefined) read[name] = policy[name];
    }
    return decide(error, delivery, read as Partial<Policy>, options);
  },
};
const namesWithIn: Reader = {
  decide,
  definePolicy: (overrides) => {
    if (typeof overrides !== "object" || overrides === null) {
      return definePolicy(overrides);
    }
    const kept = Object.entries(overrides).filter(([name]) =>
      !(name in DEFAULT_POLICY) || Object.hasOwn(DEFAULT_POLICY, name)
    );
    return definePolicy(Object.fromEntries(kept) as Partial<Policy>);
  },
};

Deno.test("decide() reads a partial policy exactly as definePolicy() does: the same error, or the same decision", () => {
  compared.decisions = compared.errors = 0;
  fc.assert(readsAsDefinedProperty({ decide, definePolicy }), {
    numRuns: runs(300),
  });
  // Most runs compare decisions, not error messages: about 3 in 4 (65 to
  // 93 errors in 300, over 60 runs). The bound is "most", far from that
  // spread: "2 in 3" failed about once in a few hundred unseeded runs.
  if (compared.decisions + compared.errors >= 100) {
    assert.ok(
      compared.decisions > compared.errors,
      `${compared.decisions} decisions, ${compared.errors} errors`,
    );
  }
});

Deno.test("decide() partial-policy property catches a field read twice, and names checked with `in`", () => {
  assert.equal(catches(readsAsDefinedProperty(readsTwice)), true);
  assert.equal(catches(readsAsDefinedProperty(namesWithIn)), true);
});

Deno.test("decide() reads each field of a partial policy once, as definePolicy() does", () => {
  // A getter that answers 3 once, then NaN: the 3 is the setting, for both.
  let reads = 0;
  const flaky = {
    get maxDeliveries() {
      return ++reads === 1 ? 3 : Number.NaN;
    },
  };
  assert.deepEqual(decide(new Error("x"), 1_000_000, flaky), {
    action: "poison",
    cause: "exhausted",
    reason: "no luck after 1000000 deliveries",
  });
  assert.equal(reads, 1);
  reads = 0;
  assert.equal(definePolicy(flaky).maxDeliveries, 3);
  assert.equal(reads, 1);
  // A bad first answer is the error, even if a second read would pass.
  let answers = 0;
  const late = {
    get capMs() {
      return ++answers === 1 ? 0 : 60_000;
    },
  };
  assert.throws(
    () => decide(new Error("x"), 1, late),
    /'capMs'.*current value is 0/,
  );
  assert.equal(answers, 1);
});

Deno.test("decide() takes a non-enumerable own field as a setting and ignores an inherited one, as definePolicy() does", () => {
  const hidden = Object.defineProperty({}, "maxDeliveries", { value: 2 });
  assert.equal(definePolicy(hidden).maxDeliveries, 2);
  assert.equal(decide(new Error("e"), 2, hidden).action, "poison");
  assert.equal(
    decide(new Error("e"), 2, definePolicy(hidden)).action,
    "poison",
  );
  // A getter on a class's prototype is inherited: not a setting either.
  class Strict {
    get maxDeliveries(): number {
      return 1;
    }
  }
  assert.equal(decide(new Error("e"), 1, new Strict()).action, "retry");
  assert.equal(definePolicy(new Strict()).maxDeliveries, 10);
});

Deno.test("decide() and definePolicy() refuse a field named like one every object inherits", () => {
  const named = [
    { constructor: 3 },
    { toString: 1 },
    { hasOwnProperty: 0 },
    JSON.parse('{"__proto__":{"maxDeliveries":1}}'),
  ];
  for (const policy of named) {
    const name = Object.keys(policy)[0];
    const message = new RegExp(`'${name}' is not a policy field`);
    assert.throws(() => definePolicy(policy), TypeError);
    assert.throws(() => definePolicy(policy), message);
    assert.throws(() => decide(new Error("e"), 1, policy), message);
  }
});

Deno.test("decide() and definePolicy() refuse a policy that is not an object; undefined is the default", () => {
  for (const policy of [5, true, null, "fast", 1n, Symbol("p"), () => 3]) {
    const message =
      /Cannot define policy as its fields must come in an object, such as \{ maxDeliveries: 5 \}, or undefined for the defaults: current value is /;
    assert.throws(() => definePolicy(policy as Partial<Policy>), TypeError);
    assert.throws(() => definePolicy(policy as Partial<Policy>), message);
    assert.throws(
      () => decide(new Error("e"), 10, policy as Partial<Policy>),
      message,
    );
  }
  assert.equal(definePolicy(undefined), DEFAULT_POLICY);
  assert.equal(decide(new Error("e"), 9, undefined).action, "retry");
  assert.equal(decide(new Error("e"), 10, undefined).action, "poison");
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
