/**
 * Google's keys are kept for the max-age its answer sends, held to at
 * least a minute and at most a day: a `max-age=0` (or a proxy's) must not
 * make every push a fetch, and a year's must not keep a withdrawn key.
 *
 * @module
 */

import assert from "node:assert/strict";
import { googleJwks } from "../../webhook/google_jwks.ts";

const MINUTE = 60_000;
const DAY = 86_400_000;

/** A Google that answers with `cacheControl`, by a clock the test moves; it counts its fetches. */
function google(cacheControl: string) {
  const state = { clock: 0, fetches: 0 };
  const keys = googleJwks({
    url: "https://keys.example/certs",
    fetch: () => {
      state.fetches++;
      const headers = { "cache-control": cacheControl };
      return Promise.resolve(
        Response.json({ keys: [{ kty: "RSA", kid: "k1" }] }, { headers }),
      );
    },
    now: () => state.clock,
  });
  return { state, keys };
}

Deno.test("googleJwks() keeps keys whose answer says max-age=0 or 5 for a minute, not a fetch per push", async () => {
  for (const cacheControl of ["public, max-age=0", "max-age=5"]) {
    const { state, keys } = google(cacheControl);
    await keys();
    for (const at of [1, 5_000, 30_000, MINUTE - 1]) {
      state.clock = at;
      await keys();
    }
    assert.equal(state.fetches, 1, `${cacheControl}: cached for a minute`);
    state.clock = MINUTE;
    await keys();
    assert.equal(state.fetches, 2, `${cacheControl}: fetched after a minute`);
  }
});

Deno.test("googleJwks() keeps keys whose answer says a max-age of a year for a day at most, so a withdrawn key is dropped", async () => {
  const { state, keys } = google("public, max-age=31536000");
  await keys();
  state.clock = DAY - 1;
  await keys();
  assert.equal(state.fetches, 1, "cached for the day");
  state.clock = DAY;
  await keys();
  assert.equal(state.fetches, 2, "fetched again after a day");
});
