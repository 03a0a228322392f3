/**
 * Deliveries signed the way each queue signs them, for the runtime checks:
 * QStash's `Upstash-Signature` (HS256 JWT over the body's SHA-256, `sub` the
 * URL) and the generic route's
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

/** An `Upstash-Signature` for `body` delivered to `url`, signed with `key`. */
export async function signQStash(
  body: string,
  url: string,
  key: string,
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const hash = new Uint8Array(
    await crypto.subtle.digest("SHA-256", encoder.encode(body)),
  );
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
