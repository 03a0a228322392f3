import assert from "node:assert/strict";
import fc from "fast-check";
import { catches } from "../_fc.ts";
import {
  cutAt,
  describeError,
  MAX_NESTED,
  MAX_WALKED,
  messageOf,
} from "../../policy/_walk.ts";
import {
  isNotSent,
  isPoison,
  notSent,
  NotSentError,
  poison,
  PoisonError,
} from "../../mod.ts";

Deno.test("poison() and notSent() wrap the cause and keep its message", () => {
  const cause = new Error("nonce too low");
  const error = poison(notSent(cause));
  assert.ok(error instanceof PoisonError);
  assert.ok(error.cause instanceof NotSentError);
  assert.equal((error.cause as Error).cause, cause);
  assert.equal(error.message, "nonce too low");
  assert.equal(poison("plain text").message, "plain text");
  assert.equal(isPoison(error) && isNotSent(error), true);
});

Deno.test("isPoison() and isNotSent() are false for undeclared errors and any non-Error", () => {
  for (
    const value of [
      new Error("x"),
      "poison",
      42,
      null,
      undefined,
      {},
      [],
      Symbol("s"),
      () => 1,
      1n,
    ]
  ) {
    assert.equal(isPoison(value), false);
    assert.equal(isNotSent(value), false);
  }
});

Deno.test("isPoison() finds the mark through cycles, AggregateError and hostile getters", () => {
  const a = new Error("a");
  const b = new Error("b", { cause: a });
  (a as { cause?: unknown }).cause = b; // a cycle
  assert.equal(isPoison(a), false);
  (a as { cause?: unknown }).cause = new AggregateError([b, poison("x")]);
  assert.equal(isPoison(b), true);

  const hostile = new Error("hostile");
  Object.defineProperty(hostile, "cause", {
    get() {
      throw new Error("no");
    },
  });
  assert.equal(isPoison(hostile), false);
  assert.equal(isPoison(new AggregateError([hostile, poison("y")])), true);
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  assert.equal(isPoison(proxy), false);
});

Deno.test("isPoison() reads `cause` and `errors` apart: one that throws hides only itself", () => {
  const throws = {
    get() {
      throw 0;
    },
  };
  // A throwing `cause` on an AggregateError: its members still count.
  const aggregate = new AggregateError([poison("x")]);
  Object.defineProperty(aggregate, "cause", throws);
  assert.equal(isPoison(aggregate), true);
  const refusals = new AggregateError([notSent("x")]);
  Object.defineProperty(refusals, "cause", throws);
  assert.equal(isNotSent(new AggregateError([refusals, notSent("y")])), true);
  // A throwing `errors`: the `cause` still counts.
  const wrapped = new Error("wrapped", { cause: poison("z") });
  Object.defineProperty(wrapped, "errors", throws);
  assert.equal(isPoison(wrapped), true);
  // A throwing mark: the `cause` and `errors` still count.
  const marked = new AggregateError([poison("w")]);
  const hostile = new Proxy(marked, {
    get: (target, key) => {
      if (typeof key === "symbol") throw new Error("no");
      return Reflect.get(target, key);
    },
  });
  assert.equal(isPoison(hostile), true);
  assert.equal(isPoison(new Proxy(new Error("e"), throws)), false);
});

Deno.test("isPoison() matches a mark made by another copy of the module", () => {
  const foreign = new Error("from another copy");
  Object.defineProperty(foreign, Symbol.for("@relayer/poison.poison"), {
    value: true,
  });
  assert.equal(isPoison(new Error("wrapped", { cause: foreign })), true);
  const foreignNotSent = { [Symbol.for("@relayer/poison.not_sent")]: true };
  assert.equal(isNotSent(foreignNotSent), true);
});

/**
 * An error graph around a core: plain wrappers, AggregateErrors with noise
 * beside the core, objects with a `cause`, and optionally cycles (every
 * AggregateError also holds the outermost error, and a plain core points
 * back at it). Gives the outermost error, and whether an AggregateError
 * lies on the way to the core.
 */
function wrapped(makeCore: () => unknown) {
  const layer = fc.constantFrom("error", "aggregate", "object");
  return fc.tuple(fc.array(layer, { maxLength: 40 }), fc.boolean()).map(
    ([layers, cyclic]) => {
      const core = makeCore();
      const aggregates: AggregateError[] = [];
      let outer: unknown = core;
      for (const kind of layers) {
        if (kind === "error") outer = new Error("wrap", { cause: outer });
        else if (kind === "object") outer = { message: "object", cause: outer };
        else {
          const aggregate = new AggregateError([
            "noise",
            new Error("noise"),
            outer,
          ]);
          aggregates.push(aggregate);
          outer = aggregate;
        }
      }
      if (cyclic) {
        for (const aggregate of aggregates) aggregate.errors.push(outer);
        if (core instanceof Error && core.cause === undefined) {
          core.cause = outer;
        }
      }
      return { error: outer, aggregated: aggregates.length > 0 };
    },
  );
}

const cores = {
  poison: () => poison("p"),
  notSent: () => notSent("n"),
  both: () => poison(notSent("pn")),
  none: () => new Error("plain"),
};

Deno.test("isPoison() and isNotSent() find a mark at any depth, with or without cycles", () => {
  fc.assert(fc.property(
    fc.constantFrom(...Object.keys(cores) as (keyof typeof cores)[]).chain((
      mark,
    ) => wrapped(cores[mark]).map((graph) => ({ mark, ...graph }))),
    ({ mark, error, aggregated }) => {
      assert.equal(isPoison(error), mark === "poison" || mark === "both");
      // Every aggregate here holds noise beside the core: a member that may
      // have been sent, so "not sent" is found through chains only.
      assert.equal(
        isNotSent(error),
        (mark === "notSent" || mark === "both") && !aggregated,
      );
    },
  ));
});

Deno.test("isPoison() property catches a classifier that looks at the top level only", () => {
  const shallow = (e: unknown) => e instanceof PoisonError;
  assert.equal(
    catches(
      fc.property(wrapped(cores.poison), ({ error }) => shallow(error)),
    ),
    true,
  );
});

Deno.test("isPoison() ends on an endless or huge error graph, and finds a mark within its bound", () => {
  // A getter that makes a fresh cause on every read: no node repeats. (It
  // gives up at twice the bound, so a walk without one fails here, not by
  // running out of memory.)
  let reads = 0;
  const endless = (): object => ({
    get cause() {
      if (++reads > 2 * MAX_WALKED) throw new Error("still walking");
      return endless();
    },
  });
  assert.equal(isPoison(endless()), false);
  assert.ok(reads <= MAX_WALKED + 16, `${reads} reads of cause`);
  // An `errors` whose length is 2^32 − 1, nearly all holes.
  const holes: unknown[] = [];
  holes.length = 2 ** 32 - 1;
  assert.equal(isPoison({ errors: holes }), false);
  // Many nodes sharing one long `errors`: each member read spends the
  // bound, seen before or not. (The chain ends after 50 nodes, so a walk
  // that spends it only on new nodes reads 50 × 100,000 members, not hangs.)
  let memberReads = 0;
  const shared = new Proxy(new Array(100_000).fill(0), {
    get(target, key, receiver) {
      if (typeof key === "string" && /^\d+$/.test(key)) memberReads++;
      return Reflect.get(target, key, receiver);
    },
  });
  const chain = (n: number): object => ({
    errors: shared,
    get cause() {
      return n > 0 ? chain(n - 1) : undefined;
    },
  });
  assert.equal(isPoison(chain(50)), false);
  assert.ok(memberReads <= MAX_WALKED, `${memberReads} member reads`);
  // Within the bound, the mark is found wherever it is.
  const members = Array.from({ length: 50_000 }, () => new Error("m"));
  assert.equal(isPoison(new AggregateError([...members, poison("p")])), true);
  // First or last of a long list, and under a cause.
  assert.equal(isPoison(new AggregateError([poison("p"), ...members])), true);
  assert.equal(
    isPoison(
      new Error("outer", {
        cause: new AggregateError([poison("p"), ...members, ...members]),
      }),
    ),
    true,
  );
  let deep: unknown = poison("deep");
  for (let i = 0; i < MAX_WALKED - 10; i++) deep = { cause: deep };
  assert.equal(isPoison(deep), true);
});

Deno.test("isPoison() reads at most its bound of members from one `errors` longer than the bound", () => {
  // One node, one list: the bound must cap the members read from it, not
  // only the nodes walked after it (a list of 2^32 − 1 would take a minute).
  let memberReads = 0;
  const long = new Proxy(new Array(3 * MAX_WALKED).fill(0), {
    get(target, key, receiver) {
      if (typeof key === "string" && /^\d+$/.test(key)) memberReads++;
      return Reflect.get(target, key, receiver);
    },
  });
  assert.equal(isPoison({ errors: long }), false);
  assert.ok(memberReads <= MAX_WALKED, `${memberReads} member reads`);
});

Deno.test("isPoison() never throws, whatever is thrown at it", () => {
  fc.assert(
    fc.property(
      fc.anything({ withObjectString: true, withNullPrototype: true }),
      (value) => {
        assert.equal(typeof isPoison(value), "boolean");
        assert.equal(typeof isNotSent(value), "boolean");
      },
    ),
  );
});

Deno.test("describeError() says an AggregateError with no message of its own by its members' messages, and never throws on a member or an errors list it cannot read", () => {
  // node:net's, once every address of a host name refused the connect.
  assert.equal(
    describeError(
      new AggregateError([
        new Error("connect ECONNREFUSED ::1:5432"),
        new Error("connect ECONNREFUSED 127.0.0.1:5432"),
      ]),
    ),
    "AggregateError: connect ECONNREFUSED ::1:5432, connect ECONNREFUSED 127.0.0.1:5432",
  );
  assert.equal(
    describeError(new AggregateError([new Error("a")], "its own")),
    "AggregateError: its own",
  );
  const hostile = {
    get message(): string {
      throw new Error("no");
    },
    toString(): string {
      throw new Error("no");
    },
  };
  assert.equal(
    describeError(new AggregateError([hostile, Symbol("s"), "x"])),
    "AggregateError: unprintable error, a symbol (not an Error), x",
  );
  const unreadable = new AggregateError([]);
  Object.defineProperty(unreadable, "errors", {
    get() {
      throw new Error("no");
    },
  });
  assert.equal(describeError(unreadable), "AggregateError: ");
});

Deno.test("messageOf() and describeError() read an AggregateError that holds itself, or aggregates nested deep, to a bound, at once", () => {
  // A Sender's aggregate may hold anything, itself too: read without end,
  // one that held itself twice never answered, and a delivery hung on it.
  const once = new AggregateError([]);
  (once.errors as unknown[]).push(once);
  assert.equal(messageOf(once), "AggregateError");
  const twice = new AggregateError([]);
  (twice.errors as unknown[]).push(twice, twice);
  const four = "AggregateError, AggregateError, AggregateError, AggregateError";
  assert.equal(messageOf(twice), four);
  assert.equal(describeError(twice), `AggregateError: ${four}`);
  // Nested aggregates with no words of their own: a member's members are
  // read (a send given to several nodes, each given to several), no deeper.
  const nested = new AggregateError([
    new AggregateError([new Error("node a: timed out"), new Error("node b")]),
    new Error("node c"),
  ]);
  assert.equal(messageOf(nested), "node a: timed out, node b, node c");
  let deep: unknown = new Error("the words");
  for (let i = 0; i < 5; i++) deep = new AggregateError([deep, deep]);
  const started = performance.now();
  assert.equal(messageOf(deep), four);
  assert.ok(performance.now() - started < 100);
});

Deno.test("describeError() cuts at 300 characters, never inside a surrogate pair", () => {
  for (const at of [298, 299]) {
    const text = describeError(
      new Error(`${"a".repeat(at - "Error: ".length)}\u{1F600}tail`),
    );
    assert.ok(text.isWellFormed(), `at ${at}`);
    assert.ok(text.length <= 300);
  }
  assert.equal(cutAt("ab\u{1F600}", 3), "ab");
  assert.equal(cutAt("ab\u{1F600}", 4), "ab\u{1F600}");
  assert.equal(cutAt("abc", 2), "ab");
});

Deno.test("isNotSent() of an AggregateError (a send given to several nodes) is true only when every member was declared not sent; isPoison() of any member", () => {
  const timeout = () => new Error("node a: timed out");
  const refused = () => notSent(new Error("node b: nonce too low"));
  // One node may have taken the tx: maybe sent.
  assert.equal(isNotSent(new AggregateError([timeout(), refused()])), false);
  assert.equal(isNotSent(new AggregateError([refused(), timeout()])), false);
  assert.equal(isNotSent(new AggregateError([refused(), "refused"])), false);
  // Every node refused, each down its own cause chain.
  const wrapped = new Error("node c", { cause: refused() });
  assert.equal(isNotSent(new AggregateError([refused(), wrapped])), true);
  assert.equal(
    isNotSent(new Error("send", { cause: new AggregateError([refused()]) })),
    true,
  );
  // Nested: the inner aggregate is one member, read the same way.
  const inner = (...members: unknown[]) => new AggregateError(members);
  assert.equal(
    isNotSent(inner(inner(refused(), refused()), refused())),
    true,
  );
  assert.equal(
    isNotSent(inner(inner(refused(), timeout()), refused())),
    false,
  );
  // No member, a member that is the aggregate itself, a member that cannot
  // be read: nothing says each attempt was refused.
  assert.equal(isNotSent(new AggregateError([])), false);
  const cyclic = new AggregateError([refused()]);
  cyclic.errors.push(cyclic);
  assert.equal(isNotSent(cyclic), false);
  const unreadable = new AggregateError([refused()]);
  Object.defineProperty(unreadable.errors, 1, {
    get() {
      throw new Error("no");
    },
    enumerable: true,
  });
  assert.equal(isNotSent(unreadable), false);
  // The members decide, not a cause the aggregate was given.
  assert.equal(
    isNotSent(new AggregateError([timeout()], "x", { cause: refused() })),
    false,
  );
  // Declared on the whole, by the caller that made it.
  assert.equal(isNotSent(notSent(new AggregateError([timeout()]))), true);
  // Poison stays "any": one node's "retrying will not help" stops retries.
  assert.equal(isPoison(new AggregateError([timeout(), poison("p")])), true);
});

Deno.test("isNotSent() ends on an endless or huge error graph, and answers false past its bound", () => {
  let reads = 0;
  const endless = (): object => ({
    [Symbol.for("@relayer/poison.not_sent")]: reads > 1e9,
    get cause() {
      if (++reads > 4 * MAX_WALKED) throw new Error("still walking");
      return endless();
    },
  });
  assert.equal(isNotSent(endless()), false);
  const holes: unknown[] = [notSent("n")];
  holes.length = 2 ** 32 - 1;
  assert.equal(isNotSent({ errors: holes }), false);
  // Each aggregate's members all refused, nested deeper than anyone sends.
  let nested: unknown = notSent("n");
  for (let i = 0; i < 10_000; i++) nested = new AggregateError([nested]);
  assert.equal(isNotSent(nested), false);
  let deep: unknown = notSent("deep");
  for (let i = 0; i < MAX_WALKED - 10; i++) deep = { cause: deep };
  assert.equal(isNotSent(deep), true);
});

Deno.test("isNotSent() property: an aggregate of chains is not sent exactly when it has members and each chain ends at a refusal", () => {
  const chain = (refused: boolean, wraps: number) => {
    let error: unknown = refused ? notSent("refused") : new Error("timed out");
    for (let i = 0; i < wraps; i++) error = new Error("wrap", { cause: error });
    return error;
  };
  fc.assert(fc.property(
    fc.array(fc.tuple(fc.boolean(), fc.nat(3)), { maxLength: 6 }),
    fc.boolean(),
    (members, nested) => {
      const errors = members.map(([refused, wraps]) => chain(refused, wraps));
      const aggregate = new AggregateError(
        nested ? errors.map((error) => new AggregateError([error])) : errors,
      );
      assert.equal(
        isNotSent(aggregate),
        members.length > 0 && members.every(([refused]) => refused),
      );
    },
  ));
});

Deno.test("isNotSent() of an AggregateError: the same refusal twice, an unreadable `errors` or `cause`, a mark that throws, and the nesting bound", () => {
  const refused = () => notSent(new Error("node: nonce too low"));
  // One refusal object given for two attempts (a shared rejection): each
  // attempt was refused, so the whole was not sent.
  const shared = refused();
  assert.equal(isNotSent(new AggregateError([shared, shared])), true);
  const wrappedTwice = new Error("wrap", { cause: shared });
  assert.equal(
    isNotSent(new AggregateError([wrappedTwice, wrappedTwice, shared])),
    true,
  );
  // No member at all, though the aggregate was given a refusal as cause.
  assert.equal(
    isNotSent(new AggregateError([], "none tried", { cause: refused() })),
    false,
  );
  // A node whose `errors` cannot be read, or are not a list: which attempts
  // it stands for is unknown, whatever its cause says.
  const unreadableErrors = {
    get errors(): unknown {
      throw new Error("no");
    },
    cause: refused(),
  };
  assert.equal(isNotSent(unreadableErrors), false);
  assert.equal(isNotSent({ errors: "several", cause: refused() }), false);
  assert.equal(isNotSent({ errors: { a: 1 }, cause: refused() }), false);
  // A member whose `cause` cannot be read was not shown refused.
  const unreadableCause = {
    get cause(): unknown {
      throw new Error("no");
    },
  };
  assert.equal(
    isNotSent(new AggregateError([refused(), unreadableCause])),
    false,
  );
  // A mark that throws when read is no mark; its cause still counts.
  const throwingMark = {
    get [Symbol.for("@relayer/poison.not_sent")](): unknown {
      throw new Error("no");
    },
    cause: refused(),
  };
  assert.equal(isNotSent(throwingMark), true);
  // A cause cycle is read once, not walked to the bound.
  let reads = 0;
  const cycle: { cause?: unknown } = {};
  Object.defineProperty(cycle, "cause", {
    get() {
      reads++;
      return cycle;
    },
  });
  assert.equal(isNotSent(new AggregateError([refused(), cycle])), false);
  assert.ok(reads < 100, `${reads} reads of a cycle's cause`);
  // Aggregates nested MAX_NESTED deep are read; one more is past the bound.
  const nest = (levels: number) => {
    let error: unknown = refused();
    for (let i = 0; i < levels; i++) error = new AggregateError([error]);
    return error;
  };
  assert.equal(isNotSent(nest(MAX_NESTED)), true);
  assert.equal(isNotSent(nest(MAX_NESTED + 1)), false);
  assert.equal(isNotSent(new Error("wrap", { cause: nest(MAX_NESTED) })), true);
});

Deno.test("isPoison() and isNotSent() of an AggregateError: a member whose mark throws when read still counts by its cause, as it does on its own", () => {
  // A member whose mark getter throws (a proxy that refuses unknown keys)
  // hides only its mark, never what its cause leads to.
  const markThrows = (name: string, cause: unknown) => ({
    get [Symbol.for(`@relayer/poison.${name}`)](): unknown {
      throw new Error("no");
    },
    cause,
  });
  const poisoned = markThrows("poison", poison("p"));
  assert.equal(isPoison(poisoned), true);
  assert.equal(isPoison(new AggregateError([poisoned])), true);
  assert.equal(isPoison(new AggregateError([new Error("t"), poisoned])), true);
  const refused = markThrows("not_sent", notSent("n"));
  assert.equal(isNotSent(refused), true);
  assert.equal(isNotSent(new AggregateError([refused])), true);
  assert.equal(isNotSent(new AggregateError([notSent("n"), refused])), true);
});
