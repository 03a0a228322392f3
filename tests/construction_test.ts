import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
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
import { withoutSideEffects } from "./_side_effects.ts";

Deno.test("createApp() with every option, createRelayer(), createQueueHandler(), localQueueConsumer() and the stores' constructors use no randomness, timer, fetch or other object a Worker's global scope refuses, then or soon after", async () => {
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
      deadLetterQueue: "jobs-dlq",
      deadLetterMaxRetries: 100,
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
    // What workerd refuses in a Worker's global scope besides (see
    // REQUEST_BOUND in tests/_side_effects.ts), after the construction.
    "an AbortController in a then": () =>
      void Promise.resolve().then(() => new AbortController()),
    "AbortSignal.timeout in a then": () =>
      void Promise.resolve().then(() => AbortSignal.timeout(1_000)),
    "a Response with a body in a then": () =>
      void Promise.resolve().then(() => new Response("ok")),
    "crypto.subtle.generateKey in a then": () =>
      void Promise.resolve().then(() =>
        crypto.subtle.generateKey(
          { name: "HMAC", hash: "SHA-256" },
          false,
          ["sign"],
        )
      ),
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
  const during: Record<string, [() => unknown, RegExp]> = {
    "an AbortController": [
      () => new AbortController(),
      /new AbortController called during construction/,
    ],
    "AbortSignal.any": [
      () => AbortSignal.any([]),
      /AbortSignal\.any called during construction/,
    ],
    "Response.json": [
      () => Response.json({}),
      /Response\.json called during construction/,
    ],
    "a Request with a body": [
      () => new Request("http://127.0.0.1:9", { method: "POST", body: "x" }),
      /new Request with a body called during construction/,
    ],
    "a TextEncoderStream": [
      () => new TextEncoderStream(),
      /new TextEncoderStream called during construction/,
    ],
  };
  for (const [name, [build, expected]] of Object.entries(during)) {
    await t.step(`${name} during it`, async () => {
      await assert.rejects(() => withoutSideEffects(build), expected);
    });
  }
  await t.step(
    "and not what workerd allows there, nor after the traps are lifted",
    async () => {
      const built = await withoutSideEffects(() => ({
        response: new Response(null, { status: 204 }),
        request: new Request("http://127.0.0.1:9"),
        headers: new Headers({ a: "b" }),
      }));
      assert.ok(built.response instanceof Response);
      assert.ok(built.request instanceof Request);
      assert.equal(await new Response("after").text(), "after");
      assert.ok(new AbortController().signal instanceof AbortSignal);
      assert.equal(
        (await crypto.subtle.generateKey(
          { name: "HMAC", hash: "SHA-256" },
          false,
          ["sign"],
        )).type,
        "secret",
      );
    },
  );
});

/**
 * `tests/_import_quietly.ts` on `modules` (paths from the root, or
 * absolute), in a process of its own: this file's imports have run
 * their modules' top levels already.
 */
async function importQuietly(
  modules: string[],
): Promise<{ code: number; out: string }> {
  const { code, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "--no-check", "--allow-read", "tests/_import_quietly.ts"]
      .concat(modules),
    cwd: fileURLToPath(new URL("../", import.meta.url)),
    env: { NO_COLOR: "1" },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder();
  return { code, out: text.decode(stdout) + text.decode(stderr) };
}

/** The modules whose top levels a Worker, or any importer, runs. */
const PORTABLE_MODULES = [
  "mod.ts",
  "webhook/app.ts",
  "webhook/_local_queue.ts",
  "cloudflare/queue_handler.ts",
  "store/kv.ts",
  "store/postgres.ts",
];

Deno.test("importing mod.ts, the webhook, the queue handlers and the stores' modules uses no randomness, timer, fetch or other object a Worker's global scope refuses, then or soon after", async () => {
  const { code, out } = await importQuietly(PORTABLE_MODULES);
  assert.equal(code, 0, out);
  assert.match(out, /^imported quietly: mod\.ts, /);
});

Deno.test("importQuietly() fails a module whose top level draws a random number, sets a timer, fetches (even a fetch whose failure it swallows) or makes an object a Worker's global scope refuses", async (t) => {
  const dir = await Deno.makeTempDir({ prefix: "relayer_import_quietly_" });
  try {
    const cases: Record<string, [string, RegExp]> = {
      "Math.random": [
        "export const seed = Math.random();",
        /Math\.random called during construction/,
      ],
      "crypto.getRandomValues": [
        "crypto.getRandomValues(new Uint8Array(4));",
        /crypto\.getRandomValues called during construction/,
      ],
      "a timer": [
        "setTimeout(() => {}, 0);",
        /setTimeout called during construction/,
      ],
      "a fetch whose failure it swallows": [
        'void fetch("http://127.0.0.1:9/").catch(() => {});',
        /fetch called during construction/,
      ],
      "a fetch a few turns later": [
        'void Promise.resolve().then(() => fetch("http://127.0.0.1:9/").catch(() => {}));',
        /fetch called/,
      ],
      "an AbortController (a shutdown signal, say)": [
        "export const shutdown = new AbortController();",
        /new AbortController called during construction/,
      ],
      "a prepared Response": [
        "export const ok = Response.json({ ok: true });",
        /Response\.json called during construction/,
      ],
    };
    for (const [name, [source, expected]] of Object.entries(cases)) {
      await t.step(name, async () => {
        const file = `${dir}/${name.replaceAll(/\W+/g, "_")}.ts`;
        await Deno.writeTextFile(file, `${source}\n`);
        const { code, out } = await importQuietly(["mod.ts", file]);
        assert.equal(code, 1, out);
        assert.match(out, expected);
      });
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
