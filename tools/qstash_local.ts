/**
 * A QStash on loopback, to rehearse the Deno Deploy + QStash set-up on one
 * machine with `main.ts` as shipped: its publish API is the stand-in the
 * checks use (`tools/_qstash_stand_in.ts`), and each message it takes is
 * delivered as QStash delivers one: signed with the current signing key
 * for its URL, `Upstash-Message-Id` and `Upstash-Retried` (from 0) set,
 * the next delivery after the answer's `Retry-After`, and once
 * `Upstash-Retries` retries are spent, the message's failure callback,
 * signed too, retried as a message is (`Upstash-Failure-Callback-Retries`
 * times, else as often as the message). QStash's own backoff (an answer
 * without `Retry-After`, a connection refused) is shortened to at most a
 * minute. Its console, plan caps, schedules and DLQ are not modelled.
 *
 * `deno task qstash-local` (port 8080, or `PORT`: it refuses arguments,
 * `--port` too) prints the settings to start the service with.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { type Publication, startQStashStandIn } from "./_qstash_stand_in.ts";
import { signQStash } from "./_sign.ts";

/** What became of one delivery or failure callback, for the log. */
export interface LocalDelivery {
  /** QStash's id of the message. */
  readonly messageId: string;
  /** `delivery` (with its `Upstash-Retried`) or `failure-callback`. */
  readonly kind: "delivery" | "failure-callback";
  /** `Upstash-Retried` of a delivery; the retries spent, for a callback. */
  readonly retried: number;
  /** The answer's status, or 0 when no answer came (refused, reset). */
  readonly status: number;
  /**
   * The wait before the next delivery (or failure-callback call), or
   * `null` when there is none.
   */
  readonly nextInMs: number | null;
}

/** A running local QStash. */
export interface LocalQStash {
  /** `QSTASH_URL`: its base URL. */
  readonly url: string;
  /** Stops it: no delivery is made after, and none is left in flight. */
  stop(): Promise<void>;
}

/**
 * QStash's own wait after a delivery with `Upstash-Retried: retried`,
 * shortened to `capMs`.
 */
function ownBackoffMs(retried: number, capMs: number): number {
  // QStash documents its default backoff as e^(2.5 n) seconds before its
  // n-th retry, capped at a day: 12 s before the first, 2m28s, 30m….
  const n = retried + 1;
  return Math.min(capMs, 86_400_000, Math.round(Math.exp(2.5 * n) * 1000));
}

/**
 * Starts a QStash on 127.0.0.1 that takes publishes made with `token` and
 * delivers them signed with `signingKey`.
 *
 * @param options `port` (0: any free one), `ownBackoffCapMs` (the longest
 * wait of QStash's own backoff, default a minute), `report` (each delivery
 * and callback, once answered).
 * @returns The running QStash.
 */
export function startLocalQStash(options: {
  readonly token: string;
  readonly signingKey: string;
  readonly port?: number;
  readonly ownBackoffCapMs?: number;
  readonly report?: (delivery: LocalDelivery) => void;
}): LocalQStash {
  const capMs = options.ownBackoffCapMs ?? 60_000;
  const timers = new Set<ReturnType<typeof setTimeout>>();
  const inFlight = new Set<Promise<void>>();
  const stopping = new AbortController();

  const later = (ms: number, run: () => Promise<void>) => {
    const timer = setTimeout(() => {
      timers.delete(timer);
      track(run());
    }, ms);
    timers.add(timer);
  };
  const track = (work: Promise<void>) => {
    inFlight.add(work);
    work.finally(() => inFlight.delete(work)).catch(() => {});
  };

  const post = async (
    url: string,
    body: string,
    headers: Record<string, string>,
  ): Promise<Response | null> => {
    try {
      return await fetch(url, {
        method: "POST",
        body,
        headers: {
          "content-type": "application/json",
          "upstash-signature": await signQStash(body, url, options.signingKey),
          ...headers,
        },
        signal: stopping.signal,
      });
    } catch {
      return null; // refused, reset, or stopped
    }
  };

  const deliver = async (message: Publication, retried: number) => {
    if (stopping.signal.aborted) return;
    const retries = Number(message.retries ?? "3");
    const res = await post(message.url, message.body, {
      "upstash-message-id": message.messageId,
      "upstash-retried": String(retried),
    });
    const answer = res === null ? "" : await res.text().catch(() => "");
    const status = res?.status ?? 0;
    const done = res !== null &&
      (res.ok || res.headers.get("upstash-nonretryable-error") === "true");
    let nextInMs: number | null = null;
    if (!done && retried < retries) {
      const after = Number(res?.headers.get("retry-after") ?? NaN);
      nextInMs = Number.isFinite(after) && after >= 0
        ? after * 1000
        : ownBackoffMs(retried, capMs);
    }
    options.report?.({
      messageId: message.messageId,
      kind: "delivery",
      retried,
      status,
      nextInMs,
    });
    if (done || stopping.signal.aborted) return;
    if (nextInMs !== null) {
      later(nextInMs, () => deliver(message, retried + 1));
      return;
    }
    if (message.failureCallback === null) return;
    // QStash's failure callback: the last answer, and the message's body,
    // each base64.
    const body = JSON.stringify({
      status,
      header: {},
      body: btoa(
        String.fromCharCode(...new TextEncoder().encode(answer)),
      ),
      retried,
      maxRetries: retries,
      sourceMessageId: message.messageId,
      url: message.url,
      method: "POST",
      sourceHeader: {},
      sourceBody: btoa(
        String.fromCharCode(...new TextEncoder().encode(message.body)),
      ),
      createdAt: Date.now(),
    });
    await callBack(message, message.failureCallback, body, retried, 0);
  };

  // A failure callback not answered 2xx is retried as a message is, its
  // `Upstash-Failure-Callback-Retries` times (the message's, if not given).
  const callBack = async (
    message: Publication,
    url: string,
    body: string,
    retried: number,
    callbackRetried: number,
  ): Promise<void> => {
    if (stopping.signal.aborted) return;
    const retries = Number(
      message.failureCallbackRetries ?? message.retries ?? "3",
    );
    const called = await post(url, body, {});
    await called?.body?.cancel();
    let nextInMs: number | null = null;
    if (!called?.ok && callbackRetried < retries) {
      const after = Number(called?.headers.get("retry-after") ?? NaN);
      nextInMs = Number.isFinite(after) && after >= 0
        ? after * 1000
        : ownBackoffMs(callbackRetried, capMs);
    }
    options.report?.({
      messageId: message.messageId,
      kind: "failure-callback",
      retried,
      status: called?.status ?? 0,
      nextInMs,
    });
    if (nextInMs === null || stopping.signal.aborted) return;
    later(
      nextInMs,
      () => callBack(message, url, body, retried, callbackRetried + 1),
    );
  };

  const standIn = startQStashStandIn({
    token: options.token,
    fate: () => "take",
    latencyMs: () => 0,
    port: options.port ?? 0,
    onPublish: (message) => later(0, () => deliver(message, 0)),
  });
  return {
    url: standIn.url,
    async stop() {
      stopping.abort();
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      await Promise.allSettled([...inFlight]);
      await standIn.stop();
    },
  };
}

if (import.meta.main) {
  // `deno task qstash-local --port 8081` hands `--port 8081` to this
  // script, not to Deno: refused, where serving on 8080 would go
  // unnoticed. Counted, not shown: an argument may be a secret.
  if (Deno.args.length > 0) {
    const count = Deno.args.length;
    console.error(
      `local QStash: it reads no arguments, so it refuses the ${count} argument${
        count === 1 ? "" : "s"
      } given (not shown): its port is PORT's, 8080 unless set (PORT=8081 deno task qstash-local)`,
    );
    Deno.exit(2);
  }
  const text = Deno.env.get("PORT") || "8080";
  const port = /^\d{1,5}$/.test(text) ? Number(text) : Number.NaN;
  if (!(port >= 0 && port <= 65535)) {
    console.error(
      `local QStash: PORT must be a port number, 0-65535: current value is ${
        JSON.stringify(text)
      }`,
    );
    Deno.exit(1);
  }
  const token = "local-qstash-token-0123456789";
  const signingKey = "sig_local_current_0123456789";
  let qstash: LocalQStash;
  try {
    qstash = startLocalQStash({
      token,
      signingKey,
      port,
      report: (d) =>
        console.log(
          `qstash  ${d.messageId}  ${
            d.kind === "delivery"
              ? `Upstash-Retried ${d.retried}`
              : "failure callback"
          }  -> ${d.status || "no answer"}${
            d.nextInMs === null ? "" : `, again in ${d.nextInMs / 1000}s`
          }`,
        ),
    });
  } catch (error) {
    if (!(error instanceof Deno.errors.AddrInUse)) throw error;
    console.error(
      `local QStash: port ${port} is in use (another local QStash still running?): stop it, or set PORT to another port`,
    );
    Deno.exit(1);
  }
  console.log(`local QStash on ${qstash.url}; start the service with:
export QSTASH_URL=${qstash.url} QSTASH_TOKEN=${token}
export QSTASH_CURRENT_SIGNING_KEY=${signingKey} QSTASH_NEXT_SIGNING_KEY=sig_local_next_0123456789
export PUBLIC_URL=http://127.0.0.1:8000`);
}
