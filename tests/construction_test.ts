import assert from "node:assert/strict";
import {
  createRelayer,
  HttpSender,
  MemoryStore,
  ScriptedSender,
} from "../mod.ts";
import { createQueueHandler } from "../cloudflare/queue_handler.ts";
import { KvStore } from "../store/kv.ts";
import { createApp, googleJwks } from "../webhook/app.ts";

/**
 * Runs `build` with randomness, timers and fetch turned into errors, as a
 * Cloudflare Worker's global scope does, and restores them after.
 */
function withoutSideEffects<T>(build: () => T): T {
  const forbidden = (what: string) => () => {
    throw new Error(`${what} called during construction`);
  };
  const saved = {
    randomUUID: crypto.randomUUID,
    getRandomValues: crypto.getRandomValues,
    random: Math.random,
    setTimeout: globalThis.setTimeout,
    setInterval: globalThis.setInterval,
    fetch: globalThis.fetch,
  };
  // deno-lint-ignore no-explicit-any
  const c = crypto as any;
  c.randomUUID = forbidden("crypto.randomUUID");
  c.getRandomValues = forbidden("crypto.getRandomValues");
  Math.random = forbidden("Math.random");
  // deno-lint-ignore no-explicit-any
  const g = globalThis as any;
  g.setTimeout = forbidden("setTimeout");
  g.setInterval = forbidden("setInterval");
  g.fetch = forbidden("fetch");
  try {
    return build();
  } finally {
    c.randomUUID = saved.randomUUID;
    c.getRandomValues = saved.getRandomValues;
    Math.random = saved.random;
    g.setTimeout = saved.setTimeout;
    g.setInterval = saved.setInterval;
    g.fetch = saved.fetch;
  }
}

Deno.test("createApp(), createRelayer(), createQueueHandler() and the stores' constructors use no randomness, timer or fetch", async () => {
  const { app, queue } = withoutSideEffects(() => {
    const store = new MemoryStore();
    new KvStore(
      {
        atomic: () => {
          throw new Error("no I/O");
        },
        getMany: () => Promise.reject(new Error("no I/O")),
        list: () => {
          throw new Error("no I/O");
        },
      } as unknown as ConstructorParameters<typeof KvStore>[0],
    );
    const sender = new HttpSender({ url: "http://127.0.0.1:9" });
    const app = createApp({
      store,
      sender,
      qstash: {
        currentSigningKey: "sig_current_0123456789",
        nextSigningKey: "sig_next_0123456789",
        url: "https://relayer.example/v1/qstash",
      },
      pubsub: {
        audience: "https://relayer.example/v1/pubsub",
        serviceAccount: "pusher@my-project.iam.gserviceaccount.com",
        jwks: googleJwks(),
      },
      webhookSecret: "a-secret-of-16-chars",
      opsToken: "an-ops-token-0123456789",
    });
    const queue = createQueueHandler({
      relayer: createRelayer({
        store,
        sender: new ScriptedSender({}),
        policy: { maxDeliveries: 4 },
      }),
      maxRetries: 3,
    });
    return { app, queue };
  });
  // Built lazily, they still work once a request comes.
  assert.equal((await app.request("/healthz")).status, 200);
  await queue({ queue: "jobs", messages: [] });
});
