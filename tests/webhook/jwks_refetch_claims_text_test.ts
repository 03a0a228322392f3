/**
 * A push signed by a key Google added since the keys were cached is
 * checked against the keys fetched again, if its claims, read before they
 * are verified, are a push to this route. They are read as the verifier
 * reads them once verified, as UTF-8 JSON: an audience beyond ASCII (the
 * push subscription's is any text) is the same audience either way.
 *
 * @module
 */

import assert from "node:assert/strict";
import { fakeGoogle, verifierOn } from "./_signing.ts";

Deno.test("pubsubVerifier() fetches Google's keys again for a push to an audience beyond ASCII signed by a key added since, and takes it", async () => {
  const audience = "https://zahlungen.example.test/v1/pubsub?an=Gläubiger-Ø";
  const before = await fakeGoogle();
  const after = await fakeGoogle();
  const { google, verify } = verifierOn(before.jwks, audience);
  assert.equal(
    await verify(`Bearer ${await before.token({ aud: audience })}`),
    true,
  );
  assert.equal(google.fetches, 1);
  // Google adds a key under a new kid and signs with it at once.
  google.served = [
    ...before.jwks,
    { ...after.jwks[0], kid: "test-key-2" } as JsonWebKey,
  ];
  google.clock += 1_000;
  const token = await after.token({ aud: audience }, { kid: "test-key-2" });
  assert.equal(await verify(`Bearer ${token}`), true);
  assert.equal(google.fetches, 2, "one refetch");
  // Another audience beyond ASCII is still not this route's: no fetch.
  google.clock += 120_000;
  const other = await after.token({ aud: `${audience}x` }, {
    kid: "test-key-3",
  });
  assert.equal(await verify(`Bearer ${other}`), false);
  assert.equal(google.fetches, 2, "no refetch for another audience");
});
