/**
 * QStash's publish API, stood in for on loopback, for checks that run
 * `main.ts` as shipped: the service is given `QSTASH_TOKEN` and
 * `QSTASH_URL` (which takes an `http:` URL) and publishes through its
 * `qstashPublisher` exactly as in production. The stand-in does
 * what QStash's documentation says of a publish
 * (https://upstash.com/docs/qstash/features/deduplication): a message is
 * taken with `201` and its id; a publish whose `Upstash-Deduplication-Id`
 * was seen within the last 10 minutes is answered `202` with the earlier
 * message's id and is not enqueued; an id with a colon is refused (`400`,
 * as QStash answers "DeduplicationId cannot contain ':'"). The caller
 * decides, publish by publish, whether QStash is down (`503`, nothing
 * taken) or takes the message and the answer is lost on the way back (cut
 * off mid-body), and turns each message taken into deliveries of its own;
 * it may watch every publish's fate (`observe`).
 *
 * @module
 */

/** One message the stand-in took. */
export interface Publication {
  /** QStash's id of the message, as it answered it. */
  readonly messageId: string;
  /** The message's destination (`…/v1/qstash`). */
  readonly url: string;
  /** The body as published. */
  readonly body: string;
  /** `Upstash-Deduplication-Id`, if any. */
  readonly deduplicationId: string | null;
  /** `Upstash-Retries`. */
  readonly retries: string | null;
  /** `Upstash-Failure-Callback`. */
  readonly failureCallback: string | null;
  /** `Upstash-Failure-Callback-Retries`. */
  readonly failureCallbackRetries: string | null;
  /** When it was taken (`performance.now()`). */
  readonly at: number;
}

/** What QStash does with one publish, drawn by the caller. */
export type PublishFate = "take" | "down" | "lose-answer";

/**
 * What became of one publish that was read whole, for a trail: taken (its
 * answer sent or lost), answered 503, or dropped as a repeat of a
 * deduplication id (answered 202 with the first message's id).
 */
export interface PublishEvent {
  readonly fate: PublishFate | "deduplicated";
  /** The body as published (the job). */
  readonly body: string;
  /** `Upstash-Deduplication-Id`, if any. */
  readonly deduplicationId: string | null;
  /** The message's id: the new one, or the first one's for a repeat. */
  readonly messageId: string | null;
}

/** A running stand-in for QStash's publish API. */
export interface QStashStandIn {
  /** `QSTASH_URL`: the stand-in's base URL. */
  readonly url: string;
  /** Publishes dropped as a repeat of a deduplication id (each answered 202). */
  readonly deduplicated: number;
  /** Publishes answered 503 (QStash down: nothing taken). */
  readonly down: number;
  /** Publishes taken whose answer was lost. */
  readonly lostAnswers: number;
  /** What the stand-in refused (a wrong token, a bad path or id): each a report. */
  readonly refused: readonly string[];
  /** Resolves once no publish is being read (one may be mid-request at a kill). */
  idle(): Promise<void>;
  /** Stops the server. */
  stop(): Promise<void>;
}

/** How long QStash remembers a deduplication id (its documentation: 10 minutes). */
export const DEDUPLICATION_WINDOW_MS = 10 * 60_000;

/**
 * Starts the stand-in on 127.0.0.1.
 *
 * @param options `token`: the bearer token it takes (`QSTASH_TOKEN`);
 * `fate`: what happens to a publish that is not a repeat; `onPublish`:
 * called with each message taken (not with a repeat); `latencyMs`: how
 * long an answer takes (an API round trip), drawn per publish; `observe`:
 * called with what became of each publish read whole (a trail's); `port`:
 * where it listens (any free port by default).
 * @returns The stand-in.
 */
export function startQStashStandIn(options: {
  readonly token: string;
  readonly fate: () => PublishFate;
  readonly onPublish: (publication: Publication) => void;
  readonly latencyMs: () => number;
  readonly observe?: (event: PublishEvent) => void;
  /** The port to listen on (0, the default: any free one). */
  readonly port?: number;
}): QStashStandIn {
  const seen = new Map<string, { messageId: string; at: number }>();
  const refused: string[] = [];
  let taken = 0;
  let deduplicated = 0;
  let down = 0;
  let lostAnswers = 0;
  let reading = 0;
  let waiters: (() => void)[] = [];
  const settle = () => {
    if (reading > 0) return;
    const ready = waiters;
    waiters = [];
    for (const resolve of ready) resolve();
  };
  const refuse = (status: number, what: string, error: string) => {
    refused.push(what);
    return Response.json({ error }, { status });
  };

  const handle = async (request: Request): Promise<Response> => {
    const path = new URL(request.url).pathname;
    if (request.method !== "POST" || !path.startsWith("/v2/publish/")) {
      await request.body?.cancel();
      return refuse(
        404,
        `${request.method} ${path}`,
        "not found: only POST /v2/publish/<url> is stood in for",
      );
    }
    if (request.headers.get("authorization") !== `Bearer ${options.token}`) {
      await request.body?.cancel();
      return refuse(401, `a publish without QSTASH_TOKEN`, "Unauthorized");
    }
    const deduplicationId = request.headers.get("upstash-deduplication-id");
    if (deduplicationId?.includes(":")) {
      await request.body?.cancel();
      return refuse(
        400,
        `a deduplication id with a colon (${deduplicationId})`,
        "DeduplicationId cannot contain ':'",
      );
    }
    // Taken once the whole request is read (a service killed mid-request
    // published nothing), and decided at once, as one step: two publishes
    // with one deduplication id never both get in.
    let body: string;
    try {
      body = await request.text();
    } catch {
      // The publisher died mid-request (a kill): nothing taken.
      return new Response(null, { status: 400 });
    }
    const at = performance.now();
    const answer = (response: Response) =>
      new Promise<Response>((resolve) =>
        setTimeout(() => resolve(response), options.latencyMs())
      );
    if (deduplicationId !== null) {
      const earlier = seen.get(deduplicationId);
      if (earlier !== undefined && at - earlier.at < DEDUPLICATION_WINDOW_MS) {
        deduplicated++;
        options.observe?.({
          fate: "deduplicated",
          body,
          deduplicationId,
          messageId: earlier.messageId,
        });
        return answer(
          Response.json({ messageId: earlier.messageId }, { status: 202 }),
        );
      }
    }
    const fate = options.fate();
    if (fate === "down") {
      down++;
      options.observe?.({ fate, body, deduplicationId, messageId: null });
      return answer(
        Response.json({ error: "service unavailable" }, { status: 503 }),
      );
    }
    const messageId = `msg_qstash_${++taken}`;
    if (deduplicationId !== null) {
      seen.set(deduplicationId, { messageId, at });
    }
    options.observe?.({ fate, body, deduplicationId, messageId });
    options.onPublish({
      messageId,
      url: decodeURIComponent(path.slice("/v2/publish/".length)),
      body,
      deduplicationId,
      retries: request.headers.get("upstash-retries"),
      failureCallback: request.headers.get("upstash-failure-callback"),
      failureCallbackRetries: request.headers.get(
        "upstash-failure-callback-retries",
      ),
      at,
    });
    if (fate === "lose-answer") {
      // Taken, and the answer cut off mid-body (a connection that breaks
      // on the way back): the client cannot tell whether QStash has the
      // message. (A body stream that errors breaks the connection too,
      // but Deno's server prints the error.)
      lostAnswers++;
      return answer(
        new Response(JSON.stringify({ messageId }).slice(0, 12), {
          status: 201,
          headers: { "content-type": "application/json" },
        }),
      );
    }
    return answer(Response.json({ messageId }, { status: 201 }));
  };

  const server = Deno.serve(
    { hostname: "127.0.0.1", port: options.port ?? 0, onListen() {} },
    async (request) => {
      reading++;
      try {
        return await handle(request);
      } finally {
        reading--;
        settle();
      }
    },
  );
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    get deduplicated() {
      return deduplicated;
    },
    get down() {
      return down;
    },
    get lostAnswers() {
      return lostAnswers;
    },
    refused,
    idle() {
      if (reading === 0) return Promise.resolve();
      return new Promise((resolve) => waiters.push(resolve));
    },
    stop: () => server.shutdown(),
  };
}
