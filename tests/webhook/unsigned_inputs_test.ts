/**
 * What no signature covers must not decide a payment. Google's keys may
 * name one `kid` twice (a rotation that publishes a new key under an old
 * id): a push signed by either is taken.
 *
 * @module
 */

import assert from "node:assert/strict";
import { pubsubVerifier } from "../../webhook/_auth.ts";
import { fakeGoogle, PUBSUB, rsaKeyPair } from "./_signing.ts";

Deno.test("pubsubVerifier() takes a token signed by either of two Google keys that share a kid, and refuses one signed by neither", async () => {
  const google = await fakeGoogle();
  const other = {
    ...(await crypto.subtle.exportKey("jwk", (await rsaKeyPair()).publicKey)),
    kid: "test-key-1", // fakeGoogle's
    alg: "RS256",
    use: "sig",
  } as JsonWebKey;
  const token = await google.token();
  for (
    const [name, jwks] of [
      ["the signing key first", [...google.jwks, other]],
      ["the signing key second", [other, ...google.jwks]],
    ] as const
  ) {
    const verify = pubsubVerifier({
      audience: PUBSUB.audience,
      jwks,
      serviceAccount: PUBSUB.serviceAccount,
    });
    assert.equal(await verify(`Bearer ${token}`), true, name);
    const forger = await fakeGoogle();
    assert.equal(await verify(`Bearer ${await forger.token()}`), false, name);
  }
});
