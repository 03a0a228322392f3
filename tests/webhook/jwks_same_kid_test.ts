/**
 * A key Google publishes under a `kid` the cached keys already hold: the
 * token it signs names a known `kid`, but no cached key under it verifies
 * the token. The keys are fetched again, paced as for an unknown `kid`
 * (once a minute at most, one refetch at a time), and the token verified
 * again; a forger's tokens under a known `kid` cost no more fetches.
 *
 * @module
 */

import assert from "node:assert/strict";
import { JWKS_REFETCH_INTERVAL_MS } from "../../webhook/_auth.ts";
import { fakeGoogle, verifierOn } from "./_signing.ts";

Deno.test("pubsubVerifier() takes the pushes signed by a key Google published under a kid it already holds, after one refetch of the keys they share, not once the cached keys expire", async () => {
  const before = await fakeGoogle();
  const after = await fakeGoogle(); // another key, the same kid
  assert.equal(
    (before.jwks[0] as { kid?: string }).kid,
    (after.jwks[0] as { kid?: string }).kid,
  );
  const { google, verify } = verifierOn(before.jwks);
  assert.equal(await verify(`Bearer ${await before.token()}`), true);
  assert.equal(google.fetches, 1);
  google.served = after.jwks; // rotated, under the same kid
  google.clock += 1_000;
  // Pushes signed by the key now published under the kid, at once: each
  // is taken, all on one refetch.
  const token = `Bearer ${await after.token()}`;
  assert.deepEqual(
    await Promise.all(Array.from({ length: 5 }, () => verify(token))),
    [true, true, true, true, true],
  );
  assert.equal(google.fetches, 2, "one refetch");
  // The refetched keys serve the next pushes without another fetch.
  assert.equal(await verify(`Bearer ${await after.token()}`), true);
  assert.equal(await verify(`Bearer ${await before.token()}`), false);
  assert.equal(google.fetches, 2);
});

Deno.test("pubsubVerifier() fetches Google's keys for a forger's pushes under a kid it holds at most once a minute, one fetch for pushes at once, shared with the pace of unknown kids", async () => {
  const real = await fakeGoogle();
  const forger = await fakeGoogle(); // signs under the real key's kid
  const { google, verify } = verifierOn(real.jwks);
  assert.equal(await verify(`Bearer ${await real.token()}`), true);
  assert.equal(google.fetches, 1);
  const forged = `Bearer ${await forger.token()}`;

  // One at a time, 10 a second for most of a minute: one refetch.
  for (let i = 0; i < 50; i++) {
    assert.equal(await verify(forged), false);
    google.clock += 100;
  }
  assert.equal(google.fetches, 2, "one refetch in the minute");

  // A minute on: 30 at once share the one refetch now due.
  google.clock += JWKS_REFETCH_INTERVAL_MS;
  const together = await Promise.all(
    Array.from({ length: 30 }, () => verify(forged)),
  );
  assert.deepEqual(new Set(together), new Set([false]));
  assert.equal(google.fetches, 3, "one refetch for pushes at once");

  // Within that minute, an unknown kid finds the refetch spent too.
  const unknown = `Bearer ${await forger.token({}, { kid: "made-up" })}`;
  google.clock += 1_000;
  assert.equal(await verify(unknown), false);
  assert.equal(await verify(forged), false);
  assert.equal(google.fetches, 3, "the pace is one for both");

  // A token that is no push to this route (another audience), under the
  // known kid: refused without a fetch, even with the minute's fetch due.
  google.clock += JWKS_REFETCH_INTERVAL_MS;
  const elsewhere = `Bearer ${await forger.token({
    aud: "https://elsewhere.example/v1/pubsub",
  })}`;
  assert.equal(await verify(elsewhere), false);
  assert.equal(google.fetches, 3, "no fetch for a token not of this route");
  // The real key still verifies throughout.
  assert.equal(await verify(`Bearer ${await real.token()}`), true);
  assert.equal(google.fetches, 3);
});

Deno.test("pubsubVerifier() takes a push signed by the second of two keys Google publishes under one kid, without a refetch", async () => {
  const first = await fakeGoogle();
  const second = await fakeGoogle(); // another key, the same kid
  const { google, verify } = verifierOn([...first.jwks, ...second.jwks]);
  assert.equal(await verify(`Bearer ${await second.token()}`), true);
  assert.equal(await verify(`Bearer ${await first.token()}`), true);
  assert.equal(google.fetches, 1, "no refetch: both keys were in hand");
});
