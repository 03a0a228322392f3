/**
 * googleJwks()'s clock decides how long Google's keys are kept. A clock
 * that returned no whole milliseconds (a `Date`, `NaN`, nothing) left the
 * cache never standing, silently: every Pub/Sub push fetched Google's keys
 * again. Such a clock is refused as the relayer's is, naming 'now', and
 * fetches nothing; a `now` that is no function is refused when the source
 * is built.
 *
 * @module
 */

import assert from "node:assert/strict";
import { googleJwks } from "../../webhook/google_jwks.ts";

/** A fetch of one key for an hour, counting its calls. */
function counted() {
  const counter = {
    calls: 0,
    fetch: (() => {
      counter.calls++;
      return Promise.resolve(
        Response.json({ keys: [{ kty: "RSA", kid: "k1" }] }, {
          headers: { "cache-control": "max-age=3600" },
        }),
      );
    }) as typeof fetch,
  };
  return counter;
}

Deno.test("googleJwks() refuses a clock reading that is no whole milliseconds, naming 'now', and fetches nothing for it", async () => {
  for (
    const reading of [new Date(1_000_000), Number.NaN, undefined, 1000.5, -1]
  ) {
    const google = counted();
    const keys = googleJwks({
      fetch: google.fetch,
      now: () => reading as number,
    });
    for (let i = 0; i < 3; i++) {
      await assert.rejects(keys(), {
        name: "TypeError",
        message: /^Cannot read Google's keys as 'now' must return /,
      }, String(reading));
    }
    assert.equal(google.calls, 0, String(reading));
  }
});

Deno.test("googleJwks() refuses a 'now' that is no function when it is built", () => {
  assert.throws(
    () => googleJwks({ now: 0 as unknown as () => number }),
    {
      name: "TypeError",
      message:
        "Cannot build a Google JWKS source as 'now' must be a function returning milliseconds, such as Date.now: current value is 0",
    },
  );
});

Deno.test("googleJwks() with a whole-milliseconds clock fetches once for the keys' max-age", async () => {
  const google = counted();
  const keys = googleJwks({ fetch: google.fetch, now: () => 1_000_000 });
  for (let i = 0; i < 5; i++) await keys();
  assert.equal(google.calls, 1);
});
