/**
 * One refetch of Google's keys at a time: a refetch still under way when
 * the next is due is waited on, not joined by a second.
 *
 * @module
 */

import assert from "node:assert/strict";
import { pubsubVerifier } from "../../webhook/_auth.ts";
import { fakeGoogle, PUBSUB, taking } from "./_signing.ts";

Deno.test("pubsubVerifier() waits on a refetch of the keys still under way a minute later, rather than starting a second", async () => {
  const google = await fakeGoogle();
  let clock = 1_000_000;
  let refreshes = 0;
  let release: (keys: readonly JsonWebKey[]) => void = () => {};
  const held = new Promise<readonly JsonWebKey[]>((ok) => (release = ok));
  const verify = taking(pubsubVerifier({
    audience: PUBSUB.audience,
    serviceAccount: PUBSUB.serviceAccount,
    jwks: (options) => {
      if (!options?.refresh) return Promise.resolve(google.jwks);
      refreshes++;
      return held;
    },
  }, () => clock));
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

Deno.test("pubsubVerifier() checks a push against the keys a refetch brought while the push was reading its own: a rotated-in key's pushes at once are all taken", async () => {
  const before = await fakeGoogle();
  const after = await fakeGoogle();
  const rotated = after.jwks.map((key) => ({ ...key, kid: "rotated-1" }));
  let releaseRefetch: (keys: readonly JsonWebKey[]) => void = () => {};
  const refetch = new Promise<readonly JsonWebKey[]>((ok) =>
    releaseRefetch = ok
  );
  let releaseRead: (keys: readonly JsonWebKey[]) => void = () => {};
  const slowRead = new Promise<readonly JsonWebKey[]>((ok) => releaseRead = ok);
  let reads = 0;
  let refreshes = 0;
  const verify = taking(pubsubVerifier({
    audience: PUBSUB.audience,
    serviceAccount: PUBSUB.serviceAccount,
    jwks: (options) => {
      if (options?.refresh) {
        refreshes++;
        return refetch;
      }
      // The second push's read of the cached keys is slow.
      return ++reads === 2 ? slowRead : Promise.resolve(before.jwks);
    },
  }, () => 1_000_000));
  const token = `Bearer ${await after.token({}, { kid: "rotated-1" })}`;
  // The first push finds no key under its kid, and refetches.
  const first = verify(token);
  await new Promise((ok) => setTimeout(ok, 10));
  assert.equal(refreshes, 1);
  // The second reads the cached keys while that refetch ends.
  const second = verify(token);
  await new Promise((ok) => setTimeout(ok, 10));
  releaseRefetch(rotated);
  assert.equal(await first, true);
  releaseRead(before.jwks);
  assert.equal(
    await second,
    true,
    "refused: the refetch it missed had the key",
  );
  assert.equal(refreshes, 1);
});
