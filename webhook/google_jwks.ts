/**
 * Google's OIDC signing keys, fetched and cached for Pub/Sub push
 * verification. Web APIs only.
 *
 * @module
 */

import { assertOptionNames, checkedClock, show } from "../policy/_validate.ts";
import { readText } from "../relayer/_read_text.ts";
import { stepBackPace } from "./_step_back.ts";
import { bareUrl, optionUrlSaid } from "./_url_said.ts";
import { loopbackWithoutDns } from "./_auth.ts";

/**
 * Where Google publishes the keys that sign its OIDC tokens.
 *
 * @example Where the keys come from by default
 * ```ts
 * import { GOOGLE_CERTS_URL, googleJwks } from "@relayer/poison/webhook";
 * import assert from "node:assert/strict";
 *
 * const asked: string[] = [];
 * const keys = googleJwks({
 *   fetch: (input) => {
 *     asked.push(String(input));
 *     return Promise.resolve(Response.json({ keys: [{ kty: "RSA" }] }));
 *   },
 * });
 * await keys();
 * assert.deepEqual(asked, [GOOGLE_CERTS_URL]);
 * ```
 */
export const GOOGLE_CERTS_URL = "https://www.googleapis.com/oauth2/v3/certs";

/**
 * The most bytes of Google's keys answer read (about 1.5 KiB, two or three
 * keys): an answer that goes on past it (a proxy's page, an endless body)
 * is a failed fetch, not buffered whole: unbounded, an endless one filled
 * the 5 s deadline with about 1.4 GiB of memory on a local server.
 */
const MAX_JWKS_BYTES = 64 * 1024;

/** How long the keys are served after a failed refresh, before the next try. */
const RETRY_AFTER_FAILURE_MS = 60_000;

/**
 * How long, with no keys at all, a failed fetch is answered again before
 * the next try: any caller can send a token naming a key, and each would
 * otherwise cost a fetch while Google cannot be reached. Shorter than
 * {@linkcode RETRY_AFTER_FAILURE_MS}: without keys every push is refused.
 */
const RETRY_WITHOUT_KEYS_MS = 5_000;

/**
 * Options for {@linkcode googleJwks}.
 *
 * @example Refresh when max-age runs out
 * ```ts
 * import { googleJwks, type GoogleJwksOptions } from "@relayer/poison/webhook";
 * import assert from "node:assert/strict";
 *
 * let clock = 0;
 * let fetches = 0;
 * const options: GoogleJwksOptions = {
 *   url: "https://keys.example/certs",
 *   fetch: () => {
 *     fetches++;
 *     const headers = { "cache-control": "public, max-age=60" };
 *     return Promise.resolve(Response.json({ keys: [{ kty: "RSA" }] }, { headers }));
 *   },
 *   now: () => clock,
 * };
 * const keys = googleJwks(options);
 * await keys();
 * clock = 59_999;
 * await keys(); // still cached
 * clock = 60_000;
 * await keys(); // max-age ran out: fetched again
 * assert.equal(fetches, 2);
 * ```
 */
export interface GoogleJwksOptions {
  /**
   * The JWKS URL: https, or plain http on this machine only (a local
   * stand-in), as keys served in clear text could be anyone's.
   *
   * @default {GOOGLE_CERTS_URL}
   */
  readonly url?: string;
  /**
   * The fetch to use.
   *
   * @default {globalThis.fetch}
   */
  readonly fetch?: typeof fetch;
  /**
   * The clock, in whole milliseconds as `Date.now()` returns them; a
   * reading that is not (a fraction, `NaN`, a `Date`) fails the call,
   * naming 'now', and fetches nothing.
   *
   * @default {Date.now}
   */
  readonly now?: () => number;
}

/** The options `googleJwks` reads; any other is a typo. */
const JWKS_OPTIONS: readonly string[] = Object.keys(
  { url: true, fetch: true, now: true } satisfies Record<
    keyof GoogleJwksOptions,
    true
  >,
);

/** Whether `url` is an absolute http(s) URL, as text or a `URL`. */
function isHttpUrl(url: unknown): boolean {
  if (typeof url !== "string" && !(url instanceof URL)) return false;
  try {
    const { protocol } = new URL(url);
    return protocol === "https:" || protocol === "http:";
  } catch {
    return false;
  }
}

/**
 * A failed fetch of `url`'s error, without what `url` may carry that a
 * log line must not (a password, a query, a fragment: a mirror's key):
 * Deno 2.5.0's quotes the URL whole ("error sending request for url
 * (…?key=…)"), and the service logs its words. Where `url` carries none
 * of them, the error as it came; else a new one of its name, those parts
 * left out of its words, with no `cause` (Deno 2.9's holds the URL there).
 */
function unechoed(error: unknown, url: string): unknown {
  const parsed = new URL(url);
  const { username, password, search, hash } = parsed;
  if (!username && !password && !search && !hash) return error;
  const bare = bareUrl(url);
  const withoutUser = new URL(url);
  withoutUser.username = "";
  withoutUser.password = "";
  // The URL as given, as parsed, and without its user (as a fetch sends
  // that as a header), longest first; then a query or fragment alone.
  const forms = [url, parsed.href, withoutUser.href, search, hash]
    .filter((form) => form !== "")
    .sort((a, b) => b.length - a.length);
  let words = error instanceof Error ? String(error.message) : String(error);
  for (const form of forms) {
    words = words.replaceAll(
      form,
      form.startsWith("?") || form.startsWith("#") ? "" : bare,
    );
  }
  const quiet = new (error instanceof TypeError ? TypeError : Error)(
    `${words} (its URL's credentials, query and fragment left unsaid)`,
  );
  if (error instanceof Error) quiet.name = error.name;
  return quiet;
}

/**
 * A source of Google's signing keys that fetches them once and keeps them
 * for the `max-age` Google sends (at least a minute, at most a day); only
 * the entries of its `keys` that are objects are kept, and an answer with
 * none is a failed fetch, as a 500 is, and as one over 64 KiB is (read no
 * further). Called
 * with `{ refresh: true }` it fetches them again now, as the Pub/Sub
 * verifier does (rate-limited there) for a token signed by a key it does
 * not know yet. When a refresh fails it keeps serving the keys it has, and
 * tries again a minute later (not on every delivery while Google's endpoint
 * fails); with none, it throws, and throws that failure again for 5 seconds
 * before it tries again (a push, forged or not, costs no fetch meanwhile).
 * A failed fetch's error, which the service logs, never holds the `url`'s
 * credentials, query or fragment (a mirror's key), nor does a refusal of
 * the `url`.
 *
 * @param options The URL, fetch and clock (Google's, `globalThis.fetch`,
 * `Date.now`).
 * @returns A function that returns the current keys.
 *
 * @example With a canned fetch
 * ```ts
 * import { googleJwks } from "@relayer/poison/webhook";
 * import assert from "node:assert/strict";
 *
 * let calls = 0;
 * const keys = googleJwks({
 *   fetch: () => {
 *     calls++;
 *     return Promise.resolve(Response.json({ keys: [{ kty: "RSA", n: "AQAB", e: "AQAB" }] }, {
 *       headers: { "cache-control": "public, max-age=3600" },
 *     }));
 *   },
 *   now: () => 0,
 * });
 * assert.equal((await keys())[0]?.kty, "RSA");
 * await keys();
 * assert.equal(calls, 1);
 * await keys({ refresh: true }); // a token named a key we do not know
 * assert.equal(calls, 2);
 * ```
 *
 * @example A failed refresh is tried again a minute later, not at once
 * ```ts
 * import { googleJwks } from "@relayer/poison/webhook";
 * import assert from "node:assert/strict";
 *
 * let clock = 0;
 * let fetches = 0;
 * const keys = googleJwks({
 *   fetch: () => {
 *     fetches++;
 *     if (fetches > 1) return Promise.resolve(new Response(null, { status: 500 }));
 *     const headers = { "cache-control": "max-age=60" };
 *     return Promise.resolve(Response.json({ keys: [{ kty: "RSA" }] }, { headers }));
 *   },
 *   now: () => clock,
 * });
 * await keys();
 * clock = 60_000;
 * assert.equal((await keys()).length, 1); // expired: the refresh failed, the old keys served
 * await keys(); // no fetch: the next try waits a minute
 * assert.equal(fetches, 2);
 * clock += 60_000;
 * await keys();
 * assert.equal(fetches, 3);
 * ```
 */
export function googleJwks(
  options?: GoogleJwksOptions,
): (options?: { refresh?: boolean }) => Promise<readonly JsonWebKey[]> {
  // A misspelt `url` would fetch Google's keys instead of the ones meant.
  assertOptionNames("build a Google JWKS source", options, JWKS_OPTIONS, {
    optional: true,
    example: "{ fetch }",
  });
  const {
    url = GOOGLE_CERTS_URL,
    fetch: fetcher = globalThis.fetch,
    now: clock = Date.now,
  } = options ?? {};
  // Checked when built: taken as given, either failed the first push, and
  // every push after it was refused.
  if (typeof fetcher !== "function") {
    throw new TypeError(
      `Cannot build a Google JWKS source as 'fetch' must be a function such as globalThis.fetch: current value is ${
        show(fetcher)
      }`,
    );
  }
  if (!isHttpUrl(url)) {
    throw new TypeError(
      `Cannot build a Google JWKS source as 'url' must be an absolute http(s) URL such as ${GOOGLE_CERTS_URL}: current value is ${
        // A mirror's URL may carry a key: never its password or query.
        typeof url === "string" || (url as unknown) instanceof URL
          ? optionUrlSaid(String(url))
          : show(url)}`,
    );
  }
  if (
    new URL(url).protocol === "http:" && !loopbackWithoutDns(String(url))
  ) {
    // The keys are what every push's signature is checked against: served
    // in clear text, whoever is on the path serves a key of their own, and
    // signs any push (a job given up, a delivery number raised).
    throw new TypeError(
      `Cannot build a Google JWKS source as 'url' is plain http off this machine: current value is ${
        optionUrlSaid(String(url))
      }. Whoever is on the path could serve keys of their own and sign any Pub/Sub push with them: serve the keys over https (plain http is taken on localhost, 127.0.0.1 or [::1] only, for a local stand-in)`,
    );
  }
  if (typeof clock !== "function") {
    throw new TypeError(
      `Cannot build a Google JWKS source as 'now' must be a function returning milliseconds, such as Date.now: current value is ${
        show(clock)
      }`,
    );
  }
  // A reading that is no whole milliseconds (a Date, NaN) would leave the
  // keys never standing: every push would fetch them again.
  const now = checkedClock("read Google's keys", clock);
  let cached:
    | { keys: readonly JsonWebKey[]; from: number; until: number }
    | undefined;
  let refreshing: Promise<readonly JsonWebKey[]> | undefined;
  /** The last failure while there were no keys, from when and until when it stands. */
  let failed: { error: unknown; from: number; until: number } | undefined;
  const stepBack = stepBackPace();
  /**
   * Whether `span` stands at `at`: `at` within `[from, until)`. A clock
   * stepped back before `from` (NTP correcting one that ran fast) says
   * nothing of how long ago that was, so the keys are fetched again rather
   * than kept, or a failure stood, for as long as the step; but once per
   * span's length at most (stepBackPace), or a clock that flaps back and
   * forth (time sources fighting) would make every call a fetch.
   */
  const stands = (
    span: { from: number; until: number },
    at: number,
  ): boolean =>
    at >= span.from ? at < span.until : !stepBack(span.until - span.from);

  async function refresh(): Promise<readonly JsonWebKey[]> {
    const signal = AbortSignal.timeout(5000);
    let res: Response;
    try {
      res = await fetcher(url, { signal });
    } catch (error) {
      throw unechoed(error, String(url));
    }
    if (!res.ok) {
      // Unread, the body would hold its connection until a garbage
      // collection (Node's fetch keeps the socket).
      await res.body?.cancel().catch(() => {});
      throw new Error(`Google's keys answered ${res.status}`);
    }
    const { text, truncated } = await readText(res, signal, MAX_JWKS_BYTES);
    if (truncated) {
      throw new Error(
        `Google's keys answer is over ${MAX_JWKS_BYTES} bytes (64 KiB), the most read of it: not read on`,
      );
    }
    const body = JSON.parse(text) as { keys?: unknown } | null;
    // Only objects are keys: a null among them would be cached for the
    // answer's max-age and throw on every push's look-up of its `kid` (a
    // 500 logged per push, not the 503 of keys that cannot be had).
    const keys = Array.isArray(body?.keys)
      ? body.keys.filter((key: unknown) =>
        typeof key === "object" && key !== null && !Array.isArray(key)
      )
      : [];
    if (keys.length === 0) {
      throw new Error("Google's keys answer has no keys");
    }
    const maxAge = Number(
      /max-age=(\d+)/.exec(res.headers.get("cache-control") ?? "")?.[1] ?? 3600,
    );
    const ttlS = Math.min(86_400, Math.max(60, maxAge));
    const at = now();
    cached = { keys: keys as JsonWebKey[], from: at, until: at + ttlS * 1000 };
    return cached.keys;
  }

  return async ({ refresh: force = false } = {}) => {
    const at = now();
    if (!force && cached && stands(cached, at)) return cached.keys;
    if (cached === undefined && failed !== undefined && stands(failed, at)) {
      throw failed.error;
    }
    refreshing ??= refresh().finally(() => (refreshing = undefined));
    try {
      return await refreshing;
    } catch (error) {
      if (cached === undefined) {
        const at = now();
        failed = { error, from: at, until: at + RETRY_WITHOUT_KEYS_MS };
        throw error;
      }
      // Stale keys beat no keys; the next try waits, so an outage at
      // Google does not cost every delivery a fetch.
      const at = now();
      cached = {
        keys: cached.keys,
        from: at,
        until: at + RETRY_AFTER_FAILURE_MS,
      };
      return cached.keys;
    }
  };
}
