import assert from "node:assert/strict";
import {
  backoff,
  createRelayer,
  definePolicy,
  MemoryStore,
  parseDuration,
  ScriptedSender,
} from "../../mod.ts";

// A duration written as the service's settings take it ("5s") where a
// number of milliseconds is asked for (a policy read from a JSON file, from
// JavaScript) was refused with its value alone: the refusal names
// parseDuration, which reads that text.

Deno.test("definePolicy() refuses a duration's text for a number of milliseconds, naming parseDuration", () => {
  assert.throws(
    () => definePolicy({ baseMs: "5s" } as never),
    new RangeError(
      `Cannot define policy as 'baseMs' must be an integer number of milliseconds >= 1: current value is "5s", a text: give a number (parseDuration("5s") reads a duration's text into milliseconds)`,
    ),
  );
  assert.equal(definePolicy({ baseMs: parseDuration("5s") }).baseMs, 5000);
});

Deno.test("backoff() and createRelayer() name parseDuration for a text too, and not for a number", () => {
  assert.throws(
    () => backoff(1, { baseMs: "1m" } as never),
    (error: unknown) =>
      error instanceof RangeError &&
      error.message.endsWith(
        `current value is "1m", a text: give a number (parseDuration("1m") reads a duration's text into milliseconds)`,
      ),
  );
  assert.throws(
    () =>
      createRelayer({
        store: new MemoryStore(),
        sender: new ScriptedSender({}),
        leaseMs: "30s" as never,
      }),
    (error: unknown) =>
      error instanceof RangeError &&
      error.message.includes(`'leaseMs'`) &&
      error.message.includes(`parseDuration("30s")`),
  );
  assert.throws(
    () => definePolicy({ baseMs: 0.5 }),
    new RangeError(
      "Cannot define policy as 'baseMs' must be an integer number of milliseconds >= 1: current value is 0.5",
    ),
  );
});

Deno.test("a text parseDuration cannot read is not given to it in the refusal, which says to give a number", () => {
  for (const text of ["", "abc", "5 s"]) {
    assert.throws(() => parseDuration(text), SyntaxError);
    assert.throws(
      () => definePolicy({ baseMs: text } as never),
      new RangeError(
        `Cannot define policy as 'baseMs' must be an integer number of milliseconds >= 1: current value is ${
          JSON.stringify(text)
        }, a text that is no duration: give a number of milliseconds`,
      ),
    );
  }
});

Deno.test("definePolicy() names parseDuration for a text alone: not for null, a boolean, an array", () => {
  const shown = new Map<unknown, string>([
    [null, "null"],
    [true, "true"],
    [[5000], "[5000]"],
  ]);
  for (const [value, text] of shown) {
    assert.throws(
      () => definePolicy({ baseMs: value } as never),
      new RangeError(
        `Cannot define policy as 'baseMs' must be an integer number of milliseconds >= 1: current value is ${text}`,
      ),
    );
  }
});
