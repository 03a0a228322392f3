import assert from "node:assert/strict";
import postgres from "postgres";
import {
  createRelayer,
  HttpSender,
  type Job,
  MemoryStore,
  ScriptedSender,
} from "../mod.ts";
import { createQueueHandler } from "../cloudflare/queue_handler.ts";
import { KvStore } from "../store/kv.ts";
import { PostgresStore } from "../store/postgres.ts";
import { createApp, googleJwks, qstashPublisher } from "../webhook/app.ts";
import { localQueueConsumer } from "../webhook/_local_queue.ts";

/**
 * Runs `build` with randomness, timers and fetch turned into errors, as a
 * Cloudflare Worker's global scope does, and keeps them so for a few
 * microtask turns and one macrotask after it returns: a construction that
 * leaves a promise behind (`Promise.resolve().then(() => setTimeout(…))`)
 * is still in the global scope when that promise runs. A call during
 * `build` throws, as workerd's does; a call after is recorded rather than
 * thrown (a throw in a detached callback would surface as an unhandled
 * rejection, far from here), and either fails the run with its stack.
 */
async function withoutSideEffects<T>(build: () => T): Promise<T> {
  const fired: string[] = [];
  let when = "during construction";
  // deno-lint-ignore no-explicit-any
  type Fn = (...args: any[]) => any;
  const forbidden = (what: string, harmless: Fn): Fn => (...args) => {
    const call = new Error(`${what} called ${when}`);
    fired.push(call.stack ?? call.message);
    if (when === "during construction") throw call;
    return harmless(...args);
  };
  // deno-lint-ignore no-explicit-any
  const c = crypto as any;
  // deno-lint-ignore no-explicit-any
  const g = globalThis as any;
  const saved = {
    randomUUID: c.randomUUID,
    getRandomValues: c.getRandomValues,
    random: Math.random,
    setTimeout: g.setTimeout,
    setInterval: g.setInterval,
    setImmediate: g.setImmediate,
    fetch: g.fetch,
  };
  c.randomUUID = forbidden(
    "crypto.randomUUID",
    () => "00000000-0000-4000-8000-000000000000",
  );
  c.getRandomValues = forbidden("crypto.getRandomValues", <A>(a: A) => a);
  Math.random = forbidden("Math.random", () => 0.5);
  g.setTimeout = forbidden("setTimeout", () => 0);
  g.setInterval = forbidden("setInterval", () => 0);
  g.setImmediate = forbidden("setImmediate", () => 0);
  g.fetch = forbidden("fetch", () => new Promise(() => {}));
  try {
    const built = build();
    when = "after construction returned";
    for (let turn = 0; turn < 5; turn++) await Promise.resolve();
    await new Promise<void>((resolve) => queueMicrotask(resolve));
    // One macrotask, on the real timer: a chain of promises longer than
    // the turns above has run by then.
    await new Promise((resolve) => saved.setTimeout(resolve, 0));
    for (let turn = 0; turn < 5; turn++) await Promise.resolve();
    assert.deepEqual(
      fired,
      [],
      `side effects of construction:\n${fired.join("\n")}`,
    );
    return built;
  } finally {
    c.randomUUID = saved.randomUUID;
    c.getRandomValues = saved.getRandomValues;
    Math.random = saved.random;
    g.setTimeout = saved.setTimeout;
    g.setInterval = saved.setInterval;
    g.setImmediate = saved.setImmediate;
    g.fetch = saved.fetch;
  }
}

Deno.test("createApp() with every option, createRelayer(), createQueueHandler(), localQueueConsumer() and the stores' constructors use no randomness, timer or fetch, then or soon after", async () => {
  // postgres.js 3.4.9 connects on the first query, and sets its timers
  // then; but postgres() itself draws Math.random (statement ids, the
  // connections' lifetimes) and reads process.env, so a Worker makes its
  // client in a request (examples/cloudflare/postgres_worker.ts), and only
  // the store's constructor is checked here.
  const sql = postgres("postgres://relayer@127.0.0.1:9/payments", { max: 1 });
  const logged: string[] = [];
  const enqueued: Job[] = [];
  const { app, queue, store, consume } = await withoutSideEffects(() => {
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
    new PostgresStore(sql, { schema: "relayer_construction" });
    const sender = new HttpSender({ url: "http://127.0.0.1:9" });
    const publisher = qstashPublisher({
      token: "qstash-token",
      publicUrl: "https://relayer.example",
      retries: 3,
      baseUrl: "http://127.0.0.1:9",
    });
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
      pubsubDeadLetter: {
        audience: "https://relayer.example/v1/pubsub/dead-letter",
        serviceAccount: "pusher@my-project.iam.gserviceaccount.com",
        jwks: googleJwks(),
      },
      webhookSecret: "a-secret-of-16-chars",
      webhookSecretNext: "the-next-secret-16ch",
      opsToken: "an-ops-token-0123456789",
      enqueue: (job) => {
        enqueued.push(job);
        return Promise.resolve();
      },
      redriveTo: {
        publish: async (job, deduplicationId) =>
          void await publisher.publish(job, { deduplicationId }),
      },
      log: (line) => void logged.push(line),
    });
    const queue = createQueueHandler({
      relayer: createRelayer({
        store,
        sender: new ScriptedSender({}),
        policy: { maxDeliveries: 4 },
      }),
      maxRetries: 3,
    });
    const consume = localQueueConsumer({
      relayer: createRelayer({ store, sender }),
      enqueue: () => Promise.resolve(),
      log: (line) => void logged.push(line),
    });
    return { app, queue, store, consume };
  });
  await sql.end();
  // Built lazily, they still work once a request comes.
  assert.equal((await app.request("/healthz")).status, 200);
  await store.createIntent({ id: "pi_0001" });
  const jobs = await app.request("/v1/jobs", {
    method: "POST",
    headers: { authorization: "Bearer an-ops-token-0123456789" },
    body: JSON.stringify({ intentId: "pi_0001", kind: "settle" }),
  });
  assert.equal(jobs.status, 202, await jobs.text());
  assert.deepEqual(enqueued, [{ intentId: "pi_0001", kind: "settle" }]);
  await queue({ queue: "jobs", messages: [] });
  await consume({ job: "not a job" });
  assert.match(logged.at(-1) ?? "", /acked a malformed message unread/);
});

Deno.test("withoutSideEffects() fails a construction whose side effect comes a few turns after it returns", async (t) => {
  const cases: Record<string, () => void> = {
    "a timer set in a then": () =>
      void Promise.resolve().then(() => setTimeout(() => {}, 0)),
    "a fetch in a microtask": () =>
      queueMicrotask(() => void fetch("http://127.0.0.1:9")),
    "Math.random behind twenty thens": () => {
      let p = Promise.resolve();
      for (let i = 0; i < 20; i++) p = p.then(() => {});
      void p.then(() => Math.random());
    },
    "crypto.randomUUID in an async function": () =>
      void (async () => {
        await null;
        crypto.randomUUID();
      })(),
  };
  for (const [name, build] of Object.entries(cases)) {
    await t.step(name, async () => {
      await assert.rejects(
        () => withoutSideEffects(build),
        /called after construction returned/,
      );
    });
  }
  await t.step("and one during it", async () => {
    await assert.rejects(
      () => withoutSideEffects(() => setInterval(() => {}, 1_000)),
      /setInterval called during construction/,
    );
  });
});
