/**
 * Requests signed the way each queue signs them, for tests: QStash's HS256
 * JWT over the body hash, Google's RS256 OIDC token from a local JWKS, and
 * the generic route's HMAC.
 *
 * @module
 */

import { sign } from "hono/jwt";
import type { HonoJsonWebKey } from "hono/utils/jwt/jws";
import { hmac } from "@noble/hashes/hmac.js";
import { sha256 } from "@noble/hashes/sha2.js";
import {
  hmacSignature,
  pubsubVerifier,
  type PushVerification,
} from "../../webhook/_auth.ts";
import { googleJwks } from "../../webhook/google_jwks.ts";

const encoder = new TextEncoder();

/** `bytes` (a string's UTF-8) in base64url, unpadded unless `pad`. */
export function base64url(bytes: Uint8Array | string, pad = false): string {
  const raw = typeof bytes === "string" ? encoder.encode(bytes) : bytes;
  const text = btoa(String.fromCharCode(...raw)).replaceAll("+", "-")
    .replaceAll("/", "_");
  return pad ? text : text.replace(/=+$/, "");
}

/** `value`'s JSON as a part of a JWT: base64url, unpadded. */
export function jwtPart(value: unknown): string {
  return base64url(JSON.stringify(value));
}

/** QStash's test keys. */
export const QSTASH = {
  currentSigningKey: "sig_current_0123456789abcdef",
  nextSigningKey: "sig_next_0123456789abcdef",
  url: "https://relayer.example.test/v1/qstash",
} as const;

/**
 * An `Upstash-Signature` as QStash makes it: HS256, `iss` "Upstash", `sub`
 * the destination URL, `body` the base64url SHA-256 of the raw body (a
 * string's UTF-8, or the bytes as given).
 */
export function signQStash(
  body: string | Uint8Array<ArrayBuffer>,
  options: {
    key?: string;
    url?: string;
    nowS?: number;
    ttlS?: number;
    /** The token's id; `null` leaves it out. */
    jti?: string | null;
    /** `null` leaves the `body` claim out. */
    bodyHash?: null;
    /** More claims, such as a long one to make the token long. */
    extra?: Record<string, unknown>;
  } = {},
): Promise<string> {
  const now = options.nowS ?? Math.floor(Date.now() / 1000);
  const hash = sha256(typeof body === "string" ? encoder.encode(body) : body);
  const header = { alg: "HS256", typ: "JWT" };
  const claims = {
    iss: "Upstash",
    sub: options.url ?? QSTASH.url,
    iat: now,
    nbf: now,
    exp: now + (options.ttlS ?? 300),
    ...(options.jti === null ? {} : {
      jti: options.jti ?? `jwt_${crypto.randomUUID().replaceAll("-", "")}`,
    }),
    ...(options.bodyHash === null ? {} : { body: base64url(hash, true) }),
    ...options.extra,
  };
  const input = `${base64url(JSON.stringify(header))}.${
    base64url(JSON.stringify(claims))
  }`;
  const mac = hmacKey(options.key ?? QSTASH.currentSigningKey).clone()
    .update(encoder.encode(input)).digest();
  return Promise.resolve(`${input}.${base64url(mac)}`);
}

/**
 * Each signing key prepared once for HMAC-SHA-256, as the service's own
 * generic-route signer is (`hmacSigner()`): ten thousand tokens signed
 * through Web Crypto (a key imported, a digest and a MAC, each a round
 * trip) took about twice as long.
 */
const hmacKeys = new Map<string, ReturnType<typeof hmac.create>>();

function hmacKey(secret: string): ReturnType<typeof hmac.create> {
  let keyed = hmacKeys.get(secret);
  if (keyed === undefined) {
    keyed = hmac.create(sha256, encoder.encode(secret));
    hmacKeys.set(secret, keyed);
  }
  return keyed;
}

/** A POST of `body` to QStash's failure callback, signed as QStash signs it for `url` (the callback's). */
export async function failedRequest(
  body: string,
  url = `${QSTASH.url}/failed`,
): Promise<RequestInit> {
  return {
    method: "POST",
    body,
    headers: {
      "content-type": "application/json",
      "upstash-signature": await signQStash(body, { url }),
    },
  };
}

/**
 * QStash's failure callback for `job` (message `msg_1`, dead letter
 * `dlq_1`), its 2 retries spent, as the body QStash posts.
 */
export function failureCallback(
  job: { readonly intentId: string; readonly kind: string },
): string {
  return JSON.stringify({
    status: 503,
    retried: 2,
    maxRetries: 2,
    dlqId: "dlq_1",
    sourceMessageId: "msg_1",
    url: QSTASH.url,
    method: "POST",
    sourceBody: btoa(JSON.stringify(job)),
  });
}

/**
 * The generic route's `X-Signature` (`t=<unix seconds>,v1=<hex HMAC-SHA-256
 * of "<t>.<raw body>">`), at `timeS` (default: now by the wall clock).
 */
export function signHmac(
  secret: string,
  body: string,
  timeS: number = Math.floor(Date.now() / 1000),
): string {
  return hmacSignature(secret, body, timeS);
}

/**
 * A signed `POST /v1/deliveries` of `intentId`'s settle job as delivery
 * `n`, its `X-Signature` under `secret` at `timeS`.
 */
export function signedDelivery(
  secret: string,
  intentId: string,
  n: number,
  timeS: number,
): RequestInit {
  const body = JSON.stringify({
    job: { intentId, kind: "settle" },
    delivery: n,
  });
  return {
    method: "POST",
    body,
    headers: {
      "content-type": "application/json",
      "x-signature": signHmac(secret, body, timeS),
    },
  };
}

/** A local stand-in for Google's OIDC issuer: an RSA key pair and its JWKS. */
export interface Google {
  readonly jwks: JsonWebKey[];
  token(
    claims?: Record<string, unknown>,
    options?: { kid?: string },
  ): Promise<string>;
}

/** The audience and service account the tests configure. */
export const PUBSUB = {
  audience: "https://relayer.example.test/v1/pubsub",
  serviceAccount: "pusher@project.iam.gserviceaccount.com",
} as const;

/**
 * The claims of a Google OIDC token the tests' Pub/Sub route takes (its
 * audience, its service account, the email verified), issued at `nowS`
 * (unix seconds) and valid for an hour.
 */
export function googleClaims(nowS: number) {
  return {
    iss: "https://accounts.google.com",
    aud: PUBSUB.audience,
    email: PUBSUB.serviceAccount,
    email_verified: true,
    iat: nowS,
    exp: nowS + 3600,
  };
}

/** A fresh RS256 (RSASSA-PKCS1-v1_5, 2048 bits, SHA-256) key pair, extractable. */
export async function rsaKeyPair(): Promise<CryptoKeyPair> {
  return await crypto.subtle.generateKey(
    {
      name: "RSASSA-PKCS1-v1_5",
      modulusLength: 2048,
      publicExponent: new Uint8Array([1, 0, 1]),
      hash: "SHA-256",
    },
    true,
    ["sign", "verify"],
  );
}

/** Makes a key pair and a signer of Google-shaped OIDC tokens. */
export async function fakeGoogle(): Promise<Google> {
  const pair = await rsaKeyPair();
  const kid = "test-key-1";
  const publicJwk = {
    ...(await crypto.subtle.exportKey("jwk", pair.publicKey)),
    kid,
    alg: "RS256",
    use: "sig",
  };
  const privateJwk = {
    ...(await crypto.subtle.exportKey("jwk", pair.privateKey)),
    kid,
    alg: "RS256",
  };
  return {
    jwks: [publicJwk],
    async token(claims = {}, options = {}) {
      const now = Math.floor(Date.now() / 1000);
      return await sign(
        {
          iss: "https://accounts.google.com",
          aud: PUBSUB.audience,
          email: PUBSUB.serviceAccount,
          email_verified: true,
          sub: "113774264463038321964",
          iat: now - 10,
          exp: now + 3600,
          ...claims,
        },
        { ...privateJwk, kid: options.kid ?? kid } as HonoJsonWebKey,
        "RS256",
      );
    },
  };
}

/** A Pub/Sub wrapped push envelope around `job`. */
export function envelope(
  job: unknown,
  options: { messageId?: string; deliveryAttempt?: number; snake?: boolean } =
    {},
): string {
  const data = btoa(JSON.stringify(job));
  const messageId = options.messageId ?? "2070443601311540";
  const message = options.snake
    ? { data, message_id: messageId, publish_time: "2026-11-30T12:00:00.000Z" }
    : { data, messageId, publishTime: "2026-11-30T12:00:00.000Z" };
  return JSON.stringify({
    message,
    subscription: "projects/p/subscriptions/relayer",
    ...(options.deliveryAttempt === undefined
      ? {}
      : options.snake
      ? { delivery_attempt: options.deliveryAttempt }
      : { deliveryAttempt: options.deliveryAttempt }),
  });
}

/** A Pub/Sub verifier whose answers are whether it took each push. */
export function taking(
  verify: (authorization: string | undefined) => Promise<PushVerification>,
): (authorization: string | undefined) => Promise<boolean> {
  return async (authorization) => (await verify(authorization)).ok;
}

/**
 * Google's keys endpoint, answering whatever `served` holds (cached an
 * hour), counting its fetches; a verifier on `googleJwks()` over it, both
 * on `clock`, for the push subscription's `audience`.
 */
export function verifierOn(
  first: readonly JsonWebKey[],
  audience: string = PUBSUB.audience,
) {
  const google = {
    served: first,
    fetches: 0,
    clock: 1_000_000,
  };
  const jwks = googleJwks({
    fetch: () => {
      google.fetches++;
      return Promise.resolve(
        Response.json({ keys: google.served }, {
          headers: { "cache-control": "public, max-age=3600" },
        }),
      );
    },
    now: () => google.clock,
  });
  const verify = taking(pubsubVerifier({
    audience,
    serviceAccount: PUBSUB.serviceAccount,
    jwks,
  }, () => google.clock));
  return { google, verify };
}
