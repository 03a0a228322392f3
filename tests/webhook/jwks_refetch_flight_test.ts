/**
 * One refetch of Google's keys at a time: a refetch still under way when
 * the next is due is waited on, not joined by a second.
 *
 * @module
 */

import assert from "node:assert/strict";
import { pubsubVerifier } from "../../webhook/_auth.ts";
import { fakeGoogle, PUBSUB } from "./_signing.ts";

Deno.test("pubsubVerifier() waits on a refetch of the keys still under way a minute later, rather than starting a second", async () => {
  const google = await fakeGoogle();
  let clock = 1_000_000;
  let refreshes = 0;
  let release: (keys: readonly JsonWebKey[]) => void = () => {};
  const held = new Promise<readonly JsonWebKey[]>((ok) => (release = ok));
  const verify = pubsubVerifier({
    audience: PUBSUB.audience,
    serviceAccount: PUBSUB.serviceAccount,
    jwks: (options) => {
      if (!options?.refresh) return Promise.resolve(google.jwks);
      refreshes++;
      return held;
    },
  }, () => clock);
  const first = verify(
    `Bearer ${await google.token({}, { kid: "unknown-1" })}`,
  );
  await new Promise((ok) => setTimeout(ok, 10));
  assert.equal(refreshes, 1, "the first unknown kid refetches");
  clock += 60_000;
  const second = verify(
    `Bearer ${await google.token({}, { kid: "unknown-2" })}`,
  );
  await new Promise((ok) => setTimeout(ok, 10));
  release(google.jwks);
  assert.deepEqual(await Promise.all([first, second]), [false, false]);
  assert.equal(refreshes, 1, "the second waited on the first");
});
