/**
 * Deliveries signed the way each queue signs them, for the runtime checks:
 * QStash's `Upstash-Signature` (HS256 JWT over the body's SHA-256, `sub` the
 * URL), Google's OIDC token of a Pub/Sub push (RS256, from a local key
 * pair whose JWKS the check hands the app) and the generic route's
 * `X-Signature: t=<unix seconds>,v1=<hex HMAC-SHA-256 of "<t>.<raw body>">`.
 * Web Crypto only, so it runs on Deno, Node, Bun and workerd.
 *
 * @module
 */

const encoder = new TextEncoder();

function base64url(bytes: Uint8Array, pad = false): string {
  const text = btoa(String.fromCharCode(...bytes)).replaceAll("+", "-")
    .replaceAll("/", "_");
  return pad ? text : text.replace(/=+$/, "");
}

async function hmac(key: string, data: string): Promise<Uint8Array> {
  const cryptoKey = await crypto.subtle.importKey(
    "raw",
    encoder.encode(key),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  return new Uint8Array(
    await crypto.subtle.sign("HMAC", cryptoKey, encoder.encode(data)),
  );
}

/**
 * An `Upstash-Signature` for `body` delivered to `url`, signed with `key`:
 * over its UTF-8, or over the bytes given (which need not be UTF-8).
 */
export async function signQStash(
  body: string | Uint8Array<ArrayBuffer>,
  url: string,
  key: string,
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const bytes = typeof body === "string" ? encoder.encode(body) : body;
  const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  const claims = {
    iss: "Upstash",
    sub: url,
    iat: now,
    nbf: now,
    exp: now + 300,
    jti: `jwt_${now}_${Math.random().toString(36).slice(2)}`,
    body: base64url(hash, true),
  };
  const input = `${
    base64url(encoder.encode(JSON.stringify({ alg: "HS256", typ: "JWT" })))
  }.${base64url(encoder.encode(JSON.stringify(claims)))}`;
  return `${input}.${base64url(await hmac(key, input))}`;
}

/** The generic route's `X-Signature` for `body`, signed now with `secret`. */
export async function signGeneric(
  body: string,
  secret: string,
  nowS: number = Math.floor(Date.now() / 1000),
): Promise<string> {
  const mac = await hmac(secret, `${nowS}.${body}`);
  return `t=${nowS},v1=${
    Array.from(mac, (b) => b.toString(16).padStart(2, "0")).join("")
  }`;
}

/** A local stand-in for Google's OIDC issuer: its JWKS, and tokens it signs. */
export interface GoogleIssuer {
  /** The key's id, as its tokens' header names it. */
  readonly kid: string;
  /** The public key, as Google's certs endpoint lists it. */
  readonly jwks: JsonWebKey[];
  /**
   * An RS256 token for `audience`, naming `email` (verified), valid for an
   * hour from `issuedS` (unix seconds; now by default: one issued more than
   * an hour ago has expired).
   */
  token(audience: string, email: string, issuedS?: number): Promise<string>;
}

/**
 * Makes an RSA key pair and a signer of Google-shaped OIDC tokens.
 *
 * @param kid The key's id (Google rotates its keys: each has its own).
 */
export async function googleIssuer(
  kid: string = "check-key-1",
): Promise<GoogleIssuer> {
  const pair = await crypto.subtle.generateKey(
    {
      name: "RSASSA-PKCS1-v1_5",
      modulusLength: 2048,
      publicExponent: new Uint8Array([1, 0, 1]),
      hash: "SHA-256",
    },
    true,
    ["sign", "verify"],
  );
  const jwk = await crypto.subtle.exportKey("jwk", pair.publicKey);
  return {
    kid,
    jwks: [{ ...jwk, kid, alg: "RS256", use: "sig" } as JsonWebKey],
    async token(audience, email, issuedS = Math.floor(Date.now() / 1000)) {
      const now = issuedS;
      const part = (value: unknown) =>
        base64url(encoder.encode(JSON.stringify(value)));
      const input = `${part({ alg: "RS256", typ: "JWT", kid })}.${
        part({
          iss: "https://accounts.google.com",
          aud: audience,
          email,
          email_verified: true,
          sub: "113774264463038321964",
          iat: now - 10,
          exp: now + 3600,
        })
      }`;
      const signature = await crypto.subtle.sign(
        "RSASSA-PKCS1-v1_5",
        pair.privateKey,
        encoder.encode(input),
      );
      return `${input}.${base64url(new Uint8Array(signature))}`;
    },
  };
}
