/**
 * A webhook under test: every route configured with test keys, a memory
 * store that counts writes, a scripted Sender and a fixed clock.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  MemoryStore,
  type NewIntent,
  ScriptedSender,
  type SenderScript,
  type Store,
} from "../../mod.ts";
import { type AppDeps, createApp } from "../../webhook/app.ts";
import { watchWrites } from "../_stores.ts";
import {
  envelope,
  fakeGoogle,
  type Google,
  PUBSUB,
  QSTASH,
  signHmac,
} from "./_signing.ts";

export const SECRET = "webhook-secret-for-tests";
export const OPS = "ops-token-for-tests";
/** The test app's clock, in milliseconds: generic deliveries are signed at this time. */
export const NOW = 1_000_000;

/** The intent the webhook's tests deliver for: `pi_0001`, authorized, its hold pending. */
export const AUTHORIZED = {
  id: "pi_0001",
  state: "authorized",
  hold: "pending",
} as const;

/** `pi_0001` sent as `0xabc` a second before {@linkcode NOW}, its receipt not yet in: a delivery only looks. */
export const SENT_WAITING = {
  id: "pi_0001",
  state: "settling",
  hold: "pending",
  settlingSince: NOW - 1000,
  lastBroadcast: { outcome: "sent", txHash: "0xabc", at: NOW - 1000 },
} as const;

/** The audience of the test app's Pub/Sub dead-letter route, with {@linkcode withDeadLetterRoute}. */
export const DEAD_LETTER_AUDIENCE =
  "https://relayer.example.test/v1/pubsub/dead-letter";

/** For the fuzz tests' `makeApp({ intents })`: an intent in each state a delivery meets. */
export const FUZZ_INTENTS = [
  { id: "pi_0001", state: "created" },
  { id: "pi_0002", state: "authorized", hold: "pending" },
  { id: "pi_0003", state: "settling", hold: "pending", settlingSince: 0 },
  { id: "pi_0004", state: "settled", hold: "captured" },
] as const;

/** A stack trace's marks (an `at` line, a file URL, a `.ts:line:col`), which no answer may carry. */
export const STACK = /\n\s+at |\bat [\w.<>]+ \(|file:\/\/|\.ts:\d+:\d+/;

let google: Google | undefined;

/** The shared fake Google issuer (key generation is slow; make it once). */
export async function theGoogle(): Promise<Google> {
  return google ??= await fakeGoogle();
}

/** Builds the app with every route configured; `intents` are created first. */
export async function makeApp(
  options: {
    intents?: NewIntent[];
    scripts?: Record<string, SenderScript>;
    deps?: Partial<AppDeps>;
  } = {},
) {
  const memory = new MemoryStore();
  for (const intent of options.intents ?? []) await memory.createIntent(intent);
  const { store, writes } = watchWrites(memory);
  const sender = new ScriptedSender(options.scripts ?? {});
  const g = await theGoogle();
  const app = createApp({
    store,
    sender,
    policy: { maxDeliveries: 3 },
    now: () => NOW,
    random: () => 0,
    qstash: QSTASH,
    pubsub: {
      audience: PUBSUB.audience,
      jwks: g.jwks,
      serviceAccount: PUBSUB.serviceAccount,
    },
    webhookSecret: SECRET,
    opsToken: OPS,
    ...options.deps,
  });
  return { app, store: memory, writes, sender };
}

/** A POST to the generic route, signed at the test clock's time unless `signature` is given. */
export function genericRequest(
  body: string,
  init: { signature?: string; timeS?: number } = {},
): Promise<RequestInit> {
  return Promise.resolve({
    method: "POST",
    body,
    headers: {
      "content-type": "application/json",
      "x-signature": init.signature ??
        signHmac(SECRET, body, init.timeS ?? Math.floor(NOW / 1000)),
    },
  });
}

/**
 * A push of `job` to `POST /v1/pubsub` as message `messageId` (an
 * {@linkcode envelope}), numbered `deliveryAttempt` if given, with Google's
 * token.
 */
export async function pubsubRequest(
  job: unknown,
  messageId: string,
  deliveryAttempt?: number,
): Promise<RequestInit> {
  const g = await theGoogle();
  return {
    method: "POST",
    body: envelope(job, {
      messageId,
      ...(deliveryAttempt === undefined ? {} : { deliveryAttempt }),
    }),
    headers: { authorization: `Bearer ${await g.token()}` },
  };
}

/**
 * The dead-letter subscription's push of `job` to
 * `POST /v1/pubsub/dead-letter`, with Google's token for that route:
 * message `messageId` on the dead-letter topic, forwarded from the jobs'
 * message published 11:00:00.123 after `deliveryCount` deliveries through
 * `subscription` (`relayer` unless given) of `project` (`p` unless given),
 * numbered `deliveryAttempt` if given (as only a subscription with a
 * dead-letter policy of its own numbers its pushes).
 */
export async function deadLetterRequest(
  job: unknown,
  options: {
    messageId: string;
    deliveryCount: string;
    subscription?: string;
    project?: string;
    deliveryAttempt?: number | string;
  },
): Promise<RequestInit> {
  const g = await theGoogle();
  const { deliveryAttempt } = options;
  return {
    method: "POST",
    body: JSON.stringify({
      message: {
        data: btoa(JSON.stringify(job)),
        messageId: options.messageId,
        publishTime: "2026-11-30T12:00:09.000Z",
        attributes: {
          CloudPubSubDeadLetterSourceDeliveryCount: options.deliveryCount,
          CloudPubSubDeadLetterSourceSubscription: options.subscription ??
            "relayer",
          CloudPubSubDeadLetterSourceSubscriptionProject: options.project ??
            "p",
          CloudPubSubDeadLetterSourceTopicPublishTime:
            "2026-11-30T11:00:00.123+00:00",
        },
      },
      subscription: "projects/p/subscriptions/relayer-dead-letter",
      ...(deliveryAttempt === undefined ? {} : { deliveryAttempt }),
    }),
    headers: {
      authorization: `Bearer ${await g.token({ aud: DEAD_LETTER_AUDIENCE })}`,
    },
  };
}

/**
 * A request body that never ends: `chunkBytes` of `x` at each pull. `sent`
 * is how much was pulled, `cancelled` whether the reader gave up on it.
 */
export function endlessBody(chunkBytes: number): {
  readonly body: ReadableStream<Uint8Array>;
  readonly sent: number;
  readonly cancelled: boolean;
} {
  const chunk = new Uint8Array(chunkBytes).fill(0x78);
  let sent = 0;
  let cancelled = false;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      sent += chunk.byteLength;
      controller.enqueue(chunk);
    },
    cancel() {
      cancelled = true;
    },
  }, { highWaterMark: 0 });
  return {
    body,
    get sent() {
      return sent;
    },
    get cancelled() {
      return cancelled;
    },
  };
}

/** `text` as a stream of 16 KiB chunks, as a socket hands a body over (sent chunked). */
export function chunkedBody(text: string): ReadableStream<Uint8Array> {
  const encoded = new TextEncoder().encode(text);
  return new ReadableStream<Uint8Array>({
    start(controller) {
      for (let at = 0; at < encoded.length; at += 16_384) {
        controller.enqueue(encoded.subarray(at, at + 16_384));
      }
      controller.close();
    },
  });
}

/**
 * A request body that never comes: only the headers are sent. `pulled` is
 * whether the server asked for any of it.
 */
export function bodyNeverSent(): {
  readonly body: ReadableStream<Uint8Array>;
  readonly pulled: boolean;
} {
  let pulled = false;
  const body = new ReadableStream<Uint8Array>({
    pull() {
      pulled = true;
      return new Promise(() => {});
    },
  }, { highWaterMark: 0 });
  return {
    body,
    get pulled() {
      return pulled;
    },
  };
}

/** {@linkcode makeApp} with Pub/Sub's dead-letter route configured too. */
export async function withDeadLetterRoute(
  intents: NewIntent[],
  deps: Partial<AppDeps> = {},
): ReturnType<typeof makeApp> {
  const g = await theGoogle();
  return await makeApp({
    intents,
    deps: {
      pubsubDeadLetter: {
        audience: DEAD_LETTER_AUDIENCE,
        jwks: g.jwks,
        serviceAccount: PUBSUB.serviceAccount,
      },
      ...deps,
    },
  });
}

/**
 * `app` answers `/readyz` 503 and delivery 1 of `pi_0001`'s settle job 503:
 * not ready, and the delivery a retry, never an ack.
 */
export async function assertNotReadyRetried(app: {
  request(input: string, init?: RequestInit): Response | Promise<Response>;
}): Promise<void> {
  const ready = await app.request("/readyz");
  assert.equal(ready.status, 503);
  await ready.body?.cancel();
  const delivered = await app.request(
    "/v1/deliveries",
    await genericRequest(JSON.stringify({
      job: { intentId: "pi_0001", kind: "settle" },
      delivery: 1,
    })),
  );
  assert.equal(delivered.status, 503, "a retry, never an ack");
  await delivered.body?.cancel();
}

/**
 * An app over `store` at the clock `now`, its Sender sending `pi_0001` as
 * one tx: the lines it logs, and how many sends it made.
 */
export function countingApp(store: Store, now: () => number): {
  app: ReturnType<typeof createApp>;
  lines: string[];
  sent(): number;
} {
  const lines: string[] = [];
  let sends = 0;
  const scripted = new ScriptedSender({
    pi_0001: { sends: [{ txHash: `0x${"ab".repeat(32)}` }] },
  });
  const app = createApp({
    store,
    sender: {
      send: (...args) => (sends++, scripted.send(...args)),
      receipt: (hash) => scripted.receipt(hash),
    },
    opsToken: OPS,
    webhookSecret: SECRET,
    now,
    random: () => 0,
    log: (line) => lines.push(line),
  });
  return { app, lines, sent: () => sends };
}

/**
 * `store`, but its `putDeadLetter` fails (with `message`): a store down
 * just as an unreadable message is to be kept.
 */
export function lettersDown<S extends Store>(
  store: S,
  message = "store down",
): S {
  return new Proxy(store, {
    get: (target, key) =>
      key === "putDeadLetter"
        ? () => Promise.reject(new Error(message))
        : Reflect.get(target, key, target),
  });
}

/**
 * Holds that `last` (its `store`'s third delivery of `pi_0001/settle`,
 * the policy's last) poisoned the job as exhausted and sent its intent,
 * whose broadcast is unknown, to review; `what` names the case.
 */
export async function assertThirdToReview(
  last: Response,
  store: Store,
  what: string,
): Promise<void> {
  assert.equal(last.status, 200, what);
  assert.deepEqual(await last.json(), {
    outcome: "poison",
    job: "pi_0001/settle",
    delivery: 3,
    reason: "no luck after 3 deliveries",
    resolution: "last broadcast unknown, needs review",
  }, what);
  assert.equal((await store.getIntent("pi_0001"))?.state, "needs_review");
}
