/**
 * The Sender of the deployed service: it talks to the user's signer service
 * over a small JSON protocol (DESIGN §12).
 *
 * - `POST {url}/send` with `{ intentId, replace, intent }` answers 2xx
 *   `{ txHash }`, or an error with `{ error, notSent?, poison? }`. The
 *   signer signs with the nonce kept for `intentId` whenever one is kept,
 *   even with `replace: false` (a first send that came late, after a
 *   rescue); with none kept, a fresh one, kept before the tx leaves.
 * - `GET {url}/receipt/{txHash}` answers 2xx
 *   `{ status: "confirmed" | "pending" | "dropped" }`, or an error with
 *   `{ error, poison? }` (`poison: true` for a tx mined but reverted).
 *   `confirmed` and a revert only once final (no reorg can undo them),
 *   `pending` until then; a tx the node does not know is `dropped`, not an
 *   error (an error is retried, never rescued). `dropped` means "not seen
 *   now", not "can never land": the relayer rescues it on the same nonce,
 *   and never fails a payment on it. See {@linkcode ReceiptStatus}.
 *
 * Only a flag the signer declares marks an error `notSent` or `poison`. A
 * timeout, a refused connection, a redirect, a 5xx or a 4xx without flags
 * is "maybe sent": the relayer fails a payment only when nothing left, and
 * a request that went out and got no clear answer may have reached a node.
 * The signer says `notSent: true` only when no tx of this request can reach
 * the chain, now or later (nothing kept to broadcast afterwards), and never
 * on a nonce that carries a tx of the intent that may be out there, whatever
 * the node said of this one: it answers that tx's hash, or an error without
 * flags. See {@linkcode Sender}.
 *
 * Web APIs only (`fetch`, `URL`, `AbortSignal`), so it runs on Deno, Node,
 * Bun and Cloudflare Workers; `fetch` can be injected.
 *
 * @module
 */

import { messageOf, secretMasker } from "../policy/_walk.ts";
import { assertOptionNames, MAX_TIMER_MS, show } from "../policy/_validate.ts";
import { formatDuration } from "../policy/format_duration.ts";
import { notSent, poison } from "../policy/sentinels.ts";
import { abortable, readText } from "./_read_text.ts";
import { MAX_TX_HASH } from "./_tx_hash.ts";
import type { Intent } from "../store/store.ts";
import type { ReceiptStatus, Sender } from "./sender.ts";

/**
 * The options of {@linkcode HttpSender}.
 *
 * @example A signer behind a path, with a token
 * ```ts
 * import { HttpSender, type HttpSenderOptions } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * const urls: string[] = [];
 * const options: HttpSenderOptions = {
 *   url: "https://signer.internal/v1/",
 *   timeoutMs: 2000,
 *   headers: { authorization: "Bearer s3cret" },
 *   fetch: (input) => {
 *     urls.push(String(input));
 *     return Promise.resolve(Response.json({ status: "pending" }));
 *   },
 * };
 * assert.equal(await new HttpSender(options).receipt("0xabc"), "pending");
 * assert.deepEqual(urls, ["https://signer.internal/v1/receipt/0xabc"]);
 * ```
 */
export interface HttpSenderOptions {
  /**
   * The signer's base URL: an absolute `http:` or `https:` URL without
   * credentials, query or fragment, such as `https://signer.internal/v1`.
   * Requests go to `{url}/send` and `{url}/receipt/{txHash}`. Its path, if
   * 8 characters or more (some services keep a key there), shows as `…` in
   * error messages.
   */
  readonly url: string | URL;
  /**
   * How long one request may take, answer body included, in milliseconds:
   * an integer from 1 to 2147483647 (the largest delay a timer keeps). At
   * most half the relayer's `leaseMs`: `createRelayer` and `createApp`
   * refuse a lease under twice it (the sender's `timeoutMs` reads it
   * back).
   *
   * @default {10000}
   */
  readonly timeoutMs?: number;
  /**
   * The `fetch` to call: inject one for tests or for a runtime whose global
   * `fetch` needs wrapping. A send's JSON body comes to it as a `Blob`
   * (read it with `new Response(init.body).json()`), which Deno's `fetch`
   * never sends twice: a copy of a send it sent again would be answered
   * for the send, though the first may have broadcast. A wrapper that
   * retries a POST breaks the same rule: never retry one.
   *
   * @default {globalThis.fetch}
   */
  readonly fetch?: typeof fetch;
  /**
   * Headers sent with every request, such as the signer's `Authorization`.
   * They are copied at construction, and their values (each piece of 6
   * characters or more: a repeated header's values, each cookie, a token
   * after its scheme) never appear in an error message, not even where the
   * signer's answer echoes them; only the plain ones (`accept…`,
   * `content-type`, `content-language`, `content-encoding`,
   * `cache-control`, `pragma`, `user-agent`) stay readable.
   *
   * @default {{}}
   */
  readonly headers?: HeadersInit;
}

/** The options `HttpSender` reads; any other is a typo. */
const HTTP_SENDER_OPTIONS: readonly string[] = Object.keys(
  { url: true, timeoutMs: true, fetch: true, headers: true } satisfies Record<
    keyof HttpSenderOptions,
    true
  >,
);

/** The most text read from an answer body: a hostile signer cannot make us buffer more. */
const MAX_BODY_BYTES = 64 * 1024;
/** The most characters of signer-supplied text in an error message. */
const MAX_TEXT = 200;
/**
 * The characters of a `txHash` a signer may report (its length:
 * {@linkcode MAX_TX_HASH}). A stranger one is not recorded: it would be a
 * path segment of its receipt's URL, and land in every log line. Not `.` or
 * `..`: as a URL path segment (`/receipt/..`), it would be resolved away.
 */
const TX_HASH = /^(?!\.\.?$)[A-Za-z0-9._:+/=-]+$/;

const RECEIPT_STATUSES: ReadonlySet<unknown> = new Set([
  "confirmed",
  "pending",
  "dropped",
]);

/** An answer of the signer, its body read up to {@linkcode MAX_BODY_BYTES}. */
interface Answer {
  readonly status: number;
  readonly statusText: string;
  readonly ok: boolean;
  readonly text: string;
  readonly truncated: boolean;
}

/**
 * A {@linkcode Sender} that calls the user's signer service over HTTP.
 *
 * `send` posts `{ intentId, replace, intent }` to `{url}/send`. A 2xx answer
 * with a usable `txHash` (1-256 characters of A-Z a-z 0-9 . _ : + / = -, not
 * "." or "..") is a broadcast. An error answer whose
 * JSON body says `notSent: true` throws `notSent(...)`, `poison: true`
 * throws `poison(...)`, both throw `poison(notSent(...))`; the message is
 * `signer answered <status>: <error>`. Anything else (a timeout, a refused
 * connection, a redirect whatever its body says, an error answer without
 * flags, a body that is not
 * JSON, a 2xx without a usable `txHash`) throws a plain `Error`: the signer may
 * have sent, so the relayer never fails the payment on it.
 *
 * `receipt` reads `{url}/receipt/{txHash}` and returns its `status`. An
 * error answer that says `poison: true` (a tx mined but reverted, once
 * final: the payment did not happen, and its nonce is spent) throws
 * `poison(...)`, and the intent goes to review; any other answer throws a
 * plain `Error`, which the relayer retries (a tx the node does not know is
 * `dropped`, not an error).
 *
 * Redirects are not followed: a redirected POST may be re-sent or turned
 * into a GET, and the answer would not say which. For the same reason a
 * send is one request, never sent twice by the runtime: its body is a
 * `Blob`, which Deno's `fetch` does not send again after a kept-alive
 * connection died under it (a string body it does, and returns the answer
 * to the copy: "nothing signed", said of the copy, would fail a payment
 * whose first request broadcast).
 *
 * @example Map the signer's answers
 * ```ts
 * import { HttpSender, isNotSent, isPoison, MemoryStore } from "@relayer/poison";
 * import assert from "node:assert/strict";
 *
 * // Canned answers instead of a network: a declared refusal (nothing of the
 * // intent signed yet), then a broadcast.
 * const answers = [
 *   Response.json({ error: "signer is locked: nothing signed", notSent: true }, { status: 503 }),
 *   Response.json({ txHash: "0xabc" }),
 *   Response.json({ status: "confirmed" }),
 * ];
 * const sender = new HttpSender({
 *   url: "https://signer.example",
 *   fetch: () => Promise.resolve(answers.shift() ?? new Response(null, { status: 500 })),
 *   headers: { authorization: "Bearer s3cret" },
 * });
 * const intent = await new MemoryStore().createIntent({
 *   id: "pi_0001",
 *   state: "settling",
 *   hold: "pending",
 *   settlingSince: 0,
 * });
 *
 * await assert.rejects(sender.send(intent, { replace: false }), (error: Error) => {
 *   assert.equal(error.message, "signer answered 503: signer is locked: nothing signed");
 *   assert.equal(isNotSent(error), true);
 *   assert.equal(isPoison(error), false);
 *   return true;
 * });
 * assert.deepEqual(await sender.send(intent, { replace: false }), { txHash: "0xabc" });
 * assert.equal(await sender.receipt("0xabc"), "confirmed");
 * ```
 */
export class HttpSender implements Sender {
  #base: string;
  #timeoutMs: number;
  #fetch: typeof fetch;
  /** The headers of a GET and of a POST, built once: every delivery sends one. */
  #getHeaders: [string, string][];
  #postHeaders: [string, string][];
  /**
   * Replaces what must never appear in a message with what stands in its
   * place: run only where a message is written, never on an answer that
   * needs none.
   */
  #scrub: (text: string) => string;

  /**
   * Constructs a new instance and checks its options.
   *
   * @param options The signer's URL, the timeout, the `fetch` and the
   * headers to send.
   * @throws {TypeError} If `options` is not an object, `url` is not an
   * absolute http(s) URL without credentials, query or fragment, `fetch` is
   * not a function, or `headers` are not valid HTTP headers.
   * @throws {RangeError} If `timeoutMs` is not an integer from 1 to
   * 2147483647.
   */
  constructor(options: HttpSenderOptions) {
    // A misspelt `timeoutMs` would fall back to 10 s.
    assertOptionNames("create HttpSender", options, HTTP_SENDER_OPTIONS, {
      example: '{ url: "https://signer.internal" }',
    });
    const {
      url,
      timeoutMs = 10_000,
      fetch: fetchFn = globalThis.fetch,
      headers = {},
    } = options;
    this.#base = baseUrl(url);
    if (
      !Number.isInteger(timeoutMs) || timeoutMs < 1 ||
      timeoutMs > MAX_TIMER_MS
    ) {
      throw new RangeError(
        `Cannot create HttpSender as 'timeoutMs' must be an integer from 1 to ${MAX_TIMER_MS}: current value is ${
          show(timeoutMs)
        }`,
      );
    }
    this.#timeoutMs = timeoutMs;
    if (typeof fetchFn !== "function") {
      throw new TypeError(
        `Cannot create HttpSender as 'fetch' must be a function: current value is ${
          show(fetchFn)
        }`,
      );
    }
    this.#fetch = fetchFn;
    let configured: Headers;
    try {
      configured = new Headers(headers);
    } catch {
      // The platform's message quotes the offending header, which may be a
      // secret: say which option, never what it held.
      throw new TypeError(
        "Cannot create HttpSender as 'headers' must be valid HTTP headers",
      );
    }
    this.#scrub = secretMasker(secretsOf(this.#base, configured));
    if (!configured.has("accept")) configured.set("accept", "application/json");
    this.#getHeaders = [...configured];
    configured.set("content-type", "application/json");
    this.#postHeaders = [...configured];
  }

  /**
   * How long one request may take, answer body included, in milliseconds:
   * the `timeoutMs` it was given (10000 unless given). Read-only.
   * `createRelayer` and `createApp` read it, and refuse a `leaseMs` under
   * twice it: the lease is renewed right before a send and must outlast
   * it.
   *
   * @example The lease it needs
   * ```ts
   * import { createRelayer, HttpSender, MemoryStore } from "@relayer/poison";
   * import assert from "node:assert/strict";
   *
   * const sender = new HttpSender({ url: "https://signer.internal", timeoutMs: 20_000 });
   * assert.equal(sender.timeoutMs, 20_000);
   * const store = new MemoryStore();
   * // The default lease (30 s) is under twice 20 s.
   * assert.throws(() => createRelayer({ store, sender }), /set leaseMs to at least 40000/);
   * assert.equal(createRelayer({ store, sender, leaseMs: 40_000 }).leaseMs, 40_000);
   * ```
   */
  get timeoutMs(): number {
    return this.#timeoutMs;
  }

  /**
   * Asks the signer to broadcast the settlement of `intent`.
   *
   * @param intent The intent to settle; sent as `intent`, its id as
   * `intentId`.
   * @param options `replace: true` re-sends with the same nonce (a rescue);
   * `replace: false` asks for a fresh nonce, but the signer takes the one
   * kept for the intent if there is one (the first send came late).
   * @returns The transaction hash the signer reported.
   * @throws {NotSentError} If the signer declared `notSent` (wrapped in a
   * {@linkcode PoisonError} if it also declared `poison`).
   * @throws {PoisonError} If the signer declared `poison`.
   * @throws {TypeError} If `intent` has no string `id` or `replace` is not
   * a boolean; nothing is sent.
   * @throws {Error} On anything else: the broadcast may have left.
   *
   * @example A 2xx without a txHash is not a broadcast, nor a refusal
   * ```ts
   * import { HttpSender, isNotSent, MemoryStore } from "@relayer/poison";
   * import assert from "node:assert/strict";
   *
   * const sender = new HttpSender({
   *   url: "https://signer.example",
   *   fetch: () => Promise.resolve(Response.json({ ok: true })),
   * });
   * const intent = await new MemoryStore().createIntent({ id: "pi_0001", state: "authorized" });
   * await assert.rejects(sender.send(intent, { replace: false }), (error: Error) => {
   *   assert.equal(isNotSent(error), false);
   *   return true;
   * });
   * ```
   */
  async send(
    intent: Intent,
    options: { replace: boolean },
  ): Promise<{ txHash: string }> {
    const intentId = (intent as { id?: unknown } | null)?.id;
    if (typeof intentId !== "string") {
      throw new TypeError(
        `Cannot send as 'intent.id' must be a string: current value is ${
          show(intentId)
        }`,
      );
    }
    const replace = (options as { replace?: unknown } | null)?.replace;
    if (typeof replace !== "boolean") {
      throw new TypeError(
        `Cannot send as 'options.replace' must be a boolean: current value is ${
          show(replace)
        }`,
      );
    }
    const body = JSON.stringify({ intentId, replace, intent });
    const answer = await this.#exchange("/send", "POST", body);

    const json = parseJson(answer);
    if (answer.ok) {
      const txHash = (json as { txHash?: unknown } | undefined)?.txHash;
      if (
        typeof txHash === "string" && txHash.length <= MAX_TX_HASH &&
        TX_HASH.test(txHash)
      ) return { txHash };
      if (typeof txHash === "string" && txHash !== "") {
        // Not notSent: the signer says it broadcast, so money may move.
        // Its start scrubbed: the signer may echo a header there.
        throw new Error(
          `signer answered ${answer.status} with an unusable txHash (${txHash.length} characters, starting ${
            show(upTo(this.#scrub(txHash), 16))
          }): a txHash must be 1-${MAX_TX_HASH} characters of A-Z a-z 0-9 . _ : + / = -, not "." or ".."; the broadcast may have been sent`,
        );
      }
      throw new Error(
        `signer answered ${answer.status} without a txHash: ${
          shownBody(answer, (t) => this.#scrub(t)) || "empty body"
        }`,
      );
    }

    if (answer.status >= 300 && answer.status < 400) {
      // A redirect is not followed, and says nothing of what was done (a
      // 303 means the POST was processed): whatever its body flags, the
      // broadcast may have been sent.
      throw new Error(
        `signer answered ${answer.status} (a redirect, not followed): the broadcast may have been sent`,
      );
    }
    const { error, notSent: declaredNotSent, poison: declaredPoison } =
      (typeof json === "object" && json !== null ? json : {}) as Record<
        string,
        unknown
      >;
    const failure = new Error(
      `signer answered ${answer.status}: ${
        errorText(answer, error, (t) => this.#scrub(t), "send")
      }`,
    );
    // Only a flag the signer set explicitly counts: a wrong "not sent"
    // fails a payment whose money may have moved.
    const marked = declaredNotSent === true ? notSent(failure) : failure;
    throw declaredPoison === true ? poison(marked) : marked;
  }

  /**
   * Reads the receipt of a transaction from the signer.
   *
   * @param txHash The transaction hash a `send` returned.
   * @param options `signal`: aborts the request (the relayer passes one
   * where it may stop waiting for the answer).
   * @returns `"confirmed"`, `"pending"` or `"dropped"`.
   * @throws {TypeError} If `txHash` is not a non-empty string, or
   * `options.signal` not an `AbortSignal`.
   * @throws {Error} If the signer does not answer 2xx with a valid status
   * (the relayer retries the delivery).
   * @throws The signal's reason, once it aborts (as `fetch` does).
   *
   * @example A receipt the signer cannot read is an error
   * ```ts
   * import { HttpSender } from "@relayer/poison";
   * import assert from "node:assert/strict";
   *
   * const sender = new HttpSender({
   *   url: "https://signer.example",
   *   fetch: () => Promise.resolve(Response.json({ error: "node unreachable" }, { status: 502 })),
   * });
   * await assert.rejects(sender.receipt("0xabc"), /signer answered 502: node unreachable/);
   * ```
   *
   * @example Stop waiting for a receipt
   * ```ts
   * import { HttpSender } from "@relayer/poison";
   * import assert from "node:assert/strict";
   *
   * const sender = new HttpSender({
   *   url: "https://signer.example",
   *   // A signer that never answers, until the request is aborted.
   *   fetch: (_, init) =>
   *     new Promise((_, reject) =>
   *       init?.signal?.addEventListener("abort", () => reject(init.signal?.reason))
   *     ),
   * });
   * const stop = new AbortController();
   * const reading = sender.receipt("0xabc", { signal: stop.signal });
   * stop.abort(new Error("not wanted any more"));
   * await assert.rejects(reading, /not wanted any more/);
   * ```
   */
  async receipt(
    txHash: string,
    options?: { readonly signal?: AbortSignal },
  ): Promise<ReceiptStatus> {
    const signal = (options as { signal?: unknown } | undefined)?.signal;
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw new TypeError(
        `Cannot read receipt as 'options.signal' must be an AbortSignal: current value is ${
          show(signal)
        }`,
      );
    }
    if (typeof txHash !== "string" || txHash === "") {
      throw new TypeError(
        `Cannot read receipt as 'txHash' must be a non-empty string: current value is ${
          show(txHash)
        }`,
      );
    }
    if (txHash === "." || txHash === "..") {
      // As a path segment it would be resolved away: the request would go
      // to another path, whose answer could read as a receipt.
      throw new TypeError(
        `Cannot read receipt as 'txHash' must not be "." or "..": current value is ${
          show(txHash)
        }`,
      );
    }
    const answer = await this.#exchange(
      `/receipt/${encodeURIComponent(txHash)}`,
      "GET",
      undefined,
      signal,
    );
    const json = parseJson(answer);
    if (!answer.ok) {
      const { error, poison: declared } =
        (typeof json === "object" && json !== null ? json : {}) as Record<
          string,
          unknown
        >;
      const failure = new Error(
        `signer answered ${answer.status}: ${
          errorText(answer, error, (t) => this.#scrub(t), "receipt")
        }`,
      );
      // Only `poison`, and not on a redirect (not followed: its body is not
      // the signer's answer); `notSent` says nothing of a receipt.
      const redirect = answer.status >= 300 && answer.status < 400;
      throw declared === true && !redirect ? poison(failure) : failure;
    }
    const status = (json as { status?: unknown } | undefined)?.status;
    if (RECEIPT_STATUSES.has(status)) return status as ReceiptStatus;
    throw new Error(
      `signer answered ${answer.status} without a valid receipt status: ${
        shownBody(answer, (t) => this.#scrub(t)) || "empty body"
      }`,
    );
  }

  /**
   * One request and its answer, body included, within the timeout. A
   * request that gets no answer throws a plain `Error`: it may have arrived.
   * One that `stop` aborts throws its reason.
   */
  async #exchange(
    path: string,
    method: "GET" | "POST",
    body?: string,
    stop?: AbortSignal,
  ): Promise<Answer> {
    if (stop?.aborted) throw stop.reason;
    // A timer of our own, cleared when the exchange ends: the one of
    // `AbortSignal.timeout` runs its whole delay after a quick answer, and
    // holds the signal and what hangs on it until then (every request's,
    // for days, with a timeout near its bound).
    const controller = new AbortController();
    const { signal } = controller;
    const timer = setTimeout(
      () =>
        controller.abort(
          new DOMException("Signal timed out.", "TimeoutError"),
        ),
      this.#timeoutMs,
    );
    const stopped = () => controller.abort(stop!.reason);
    stop?.addEventListener("abort", stopped, { once: true });
    try {
      return await this.#exchangeWithin(path, method, signal, body);
    } catch (error) {
      if (stop?.aborted && signal.reason === stop.reason) throw stop.reason;
      throw error;
    } finally {
      clearTimeout(timer);
      stop?.removeEventListener("abort", stopped);
    }
  }

  /** {@linkcode HttpSender.#exchange} under `signal`, its timeout. */
  async #exchangeWithin(
    path: string,
    method: "GET" | "POST",
    signal: AbortSignal,
    body?: string,
  ): Promise<Answer> {
    const init: RequestInit = method === "POST"
      ? {
        method,
        headers: this.#postHeaders,
        signal,
        redirect: "manual",
        // A Blob, not the string: Deno's fetch sends a request whose body
        // it holds as text or bytes again, on a new connection, when a
        // kept-alive one dies after carrying it whole, and answers with the
        // answer to that copy. The signer may have broadcast on the first
        // (its answer lost), then say "nothing signed" of the copy: read as
        // not sent, the payment would fail with its tx out there. A send is
        // one request; a Blob (its length still declared) is sent once.
        body: body === undefined ? null : new Blob([body]),
      }
      : { method, headers: this.#getHeaders, signal, redirect: "manual" };
    // Called detached: some runtimes' fetch throws when `this` is not global.
    const fetchFn = this.#fetch;
    let response: Response;
    try {
      // The race keeps the timeout even for an injected fetch that ignores
      // the signal.
      response = await abortable(fetchFn(this.#base + path, init), signal);
    } catch (error) {
      throw this.#transportError(signal, "signer unreachable", error);
    }
    let text: { text: string; truncated: boolean };
    try {
      text = await readText(response, signal, MAX_BODY_BYTES);
    } catch (error) {
      throw this.#transportError(
        signal,
        `signer answered ${response.status} but its body could not be read`,
        error,
        // A 2xx to a send says the signer broadcast.
        `, its ${response.status} answer's body unread${
          method === "POST" && response.ok
            ? ": the broadcast may have been sent"
            : ""
        }`,
      );
    }
    // A signer (or a proxy before it) may echo the request: what it says
    // is scrubbed where a message quotes it (errorText, shownBody), not
    // here, which every answer passes.
    return {
      status: response.status,
      statusText: response.statusText,
      ok: response.ok,
      text: text.text,
      truncated: text.truncated,
    };
  }

  /**
   * A request that got no usable answer: `what` happened, or, once its
   * timeout aborted it, it timed out (`afterTimeout` says at what point).
   */
  #transportError(
    signal: AbortSignal,
    what: string,
    error: unknown,
    afterTimeout = "",
  ): Error {
    if (signal.aborted) {
      return new Error(
        `signer timed out after ${
          formatDuration(this.#timeoutMs)
        }${afterTimeout}`,
        { cause: error },
      );
    }
    return new Error(`${what}: ${reasonOf(error, (t) => this.#scrub(t))}`, {
      cause: error,
    });
  }
}

/**
 * What a sender's messages must never show: the URL's path (a key may live
 * there, as in many RPC URLs), shown as `…`, unless it is short, and the
 * value of each header but the plain ones (and its token, after a scheme
 * such as `Bearer`), shown as `<name header>`. Each also as a JSON writer
 * may escape it (`\/` for `/`).
 */
function secretsOf(base: string, headers: Headers): [string, string][] {
  const secrets: [string, string][] = [];
  const add = (secret: string, mask: string) => {
    secrets.push([secret, mask]);
  };
  const { origin, pathname } = new URL(base);
  if (pathname.length >= 8) {
    add(base, `${origin}/…`);
    add(pathname, "/…");
    try {
      const decoded = decodeURIComponent(pathname);
      if (decoded !== pathname) add(decoded, "/…");
    } catch {
      // not percent-encoded text: the path as it is is enough
    }
  }
  for (const [name, value] of headers) {
    if (PLAIN_HEADER.test(name)) continue;
    const mask = `<${name} header>`;
    // The whole value; each of the values a repeated header was joined
    // from (`, `) and each cookie (`; `), and the value after its `=`; a
    // token after a scheme such as `Bearer`. Shorter than 6 characters,
    // a piece is left: it would mask common words.
    const pieces = new Set([value]);
    for (const part of value.split(/,\s*|;\s*/)) {
      pieces.add(part);
      const eq = part.indexOf("=");
      if (eq > 0) pieces.add(part.slice(eq + 1));
      const token = /^\S+\s+(\S+)$/.exec(part)?.[1];
      if (token !== undefined) pieces.add(token);
    }
    for (const piece of pieces) if (piece.length >= 6) add(piece, mask);
  }
  // secretMasker replaces the longest first: a value before the token it
  // holds.
  return secrets;
}

/**
 * The names of headers that carry no secret (content negotiation, the
 * client's name): their values stay readable in messages. Any other
 * header's value (`authorization`, `x-api-key`, `x-jwt`, …) is masked.
 */
const PLAIN_HEADER =
  /^(accept(-charset|-encoding|-language)?|content-(type|language|encoding)|cache-control|pragma|user-agent)$/i;

/** Checks the base URL and returns it without a trailing slash. */
function baseUrl(url: unknown): string {
  let parsed: URL | undefined;
  try {
    parsed = typeof url === "string" || url instanceof URL
      ? new URL(url)
      : undefined;
  } catch {
    parsed = undefined;
  }
  if (
    parsed === undefined ||
    (parsed.protocol !== "http:" && parsed.protocol !== "https:") ||
    parsed.username !== "" || parsed.password !== "" ||
    parsed.search !== "" || parsed.hash !== ""
  ) {
    throw new TypeError(
      `Cannot create HttpSender as 'url' must be an absolute http(s) URL without credentials, query or fragment: current value is ${
        showUrl(url)
      }`,
    );
  }
  return parsed.origin + parsed.pathname.replace(/\/+$/, "");
}

/**
 * The rejected `url` for an error message, as given but with any
 * credentials masked: they belong in `headers`, and messages reach logs.
 */
function showUrl(url: unknown): string {
  const text = url instanceof URL ? url.href : url;
  if (typeof text !== "string") return show(text);
  // Credentials, a query and a fragment may all hold secrets: mask them,
  // as the URL parser reads them (it takes `http:\\u:p@host` and
  // `http:u:p@host` for credentials too).
  let parsed: URL | undefined;
  try {
    parsed = new URL(text);
  } catch {
    parsed = undefined;
  }
  if (parsed !== undefined && parsed.host === "") {
    // No host (`me:secret@signer`): the rest may be anything.
    return show(`${parsed.protocol}…`);
  }
  if (parsed !== undefined) {
    return show(
      clip(
        `${parsed.protocol}//${
          parsed.username !== "" || parsed.password !== "" ? "***@" : ""
        }${parsed.host}${parsed.pathname}${parsed.search ? "?***" : ""}${
          parsed.hash ? "#***" : ""
        }`,
      ),
    );
  }
  // Not a URL: whatever comes before an "@" may be credentials.
  return show(
    clip(
      text.replace(/^[^@]*@/, "***@").replace(/\?[^#]*/, "?***")
        .replace(/#.*/, "#***"),
    ),
  );
}

/** The body as JSON, or `undefined` if it is not (or was cut short). */
function parseJson(answer: Answer): unknown {
  if (answer.truncated) return undefined;
  try {
    return JSON.parse(answer.text);
  } catch {
    return undefined;
  }
}

/** The text after `signer answered <status>: `. */
function errorText(
  answer: Answer,
  error: unknown,
  scrub: (text: string) => string,
  route: "send" | "receipt",
): string {
  // The signer's `error`, decoded from JSON: scrubbed again, since its
  // escapes (`\u0073`) hid it from the scrub of the raw body.
  if (typeof error === "string" && clip(error) !== "") {
    return clip(scrub(error));
  }
  const text = clip(scrub(answer.statusText)) || shownBody(answer, scrub) ||
    "no error message";
  // A 404 the signer did not explain, on /send, is most often a base URL
  // with a path the signer does not serve: every send would so end in
  // review. (On /receipt it may only mean a tx the node does not know.)
  return answer.status === 404 && route === "send"
    ? `${text} (no such route: is the Sender's url the signer's base URL? It posts to <url>/send and reads <url>/receipt/<txHash>)`
    : text;
}

/**
 * The body for a message, scrubbed: a JSON body decoded and written again
 * (keys and strings alike scrubbed in what it writes), any other body as
 * it came. Cut to one line.
 */
function shownBody(answer: Answer, scrub: (text: string) => string): string {
  const json = parseJson(answer);
  return clip(scrub(json === undefined ? answer.text : JSON.stringify(json)));
}

/**
 * Signer-supplied text made fit for one log line: control characters and
 * runs of white space become one space, and it is cut to about
 * {@linkcode MAX_TEXT} characters.
 */
function clip(text: string): string {
  const line = oneLine(text);
  if (line.length <= MAX_TEXT) return line;
  return `${upTo(line, MAX_TEXT - 1)}…`;
}

/**
 * Why a request failed, for `signer unreachable: <reason>`: the innermost
 * cause (runtimes wrap the useful text, e.g. `fetch failed` around
 * `Connection refused`), cut in the middle so both ends survive.
 */
function reasonOf(error: unknown, scrub: (text: string) => string): string {
  let node = error;
  for (let depth = 0; depth < 8; depth++) {
    const cause = node instanceof Error ? node.cause : undefined;
    if (cause === undefined || cause === null) break;
    node = cause;
  }
  // Scrubbed whole, before it is cut: a cut could leave part of a secret.
  const line = oneLine(scrub(messageOf(node))) ||
    oneLine(scrub(messageOf(error))) || "no reason given";
  if (line.length <= MAX_TEXT) return line;
  const head = upTo(line, Math.floor(MAX_TEXT * 0.6));
  const tail = line.slice(-(MAX_TEXT - head.length - 1));
  return `${head}…${tail.replace(/^[\udc00-\udfff]/, "")}`;
}

function oneLine(text: string): string {
  // deno-lint-ignore no-control-regex
  return text.replace(/[\s\u0000-\u001f\u007f-\u009f]+/g, " ").trim();
}

/** The first `length` UTF-16 units of `text`, never half a surrogate pair. */
function upTo(text: string, length: number): string {
  const cut = text.slice(0, length);
  return /[\ud800-\udbff]$/.test(cut) ? cut.slice(0, -1) : cut;
}
