/**
 * An operator who copies a service's environment into a Worker: the
 * example Workers, run as workerd runs them (their module's top level,
 * then their default export's `fetch` and `queue`), start with each setting
 * only `main.ts` reads, whatever its value, and name each of them once, on
 * the isolate's first event. `cloudflare:workers` is the one import
 * replaced: by a module whose `env` is the environment given.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import assert from "node:assert/strict";

const ROOT = new URL("../../", import.meta.url);

const config = JSON.parse(
  await Deno.readTextFile(new URL("deno.json", ROOT)),
) as { exports: Record<string, string>; imports: Record<string, string> };

/** A Worker's default export, as workerd calls it. */
interface Worker {
  fetch(request: Request, env: unknown, ctx: unknown): Promise<Response>;
  queue(batch: unknown, env: unknown, ctx: unknown): Promise<void>;
}

/**
 * Runs `example`'s module with `env` as its `cloudflare:workers` env and
 * gives its default export, and every line it logged (through
 * `console.log`, as the examples do) until `use` is done.
 */
async function withWorker(
  example: "worker.ts" | "postgres_worker.ts",
  env: Record<string, unknown>,
  use: (worker: Worker, logged: string[]) => Promise<void>,
): Promise<void> {
  const source = await Deno.readTextFile(
    new URL(`examples/cloudflare/${example}`, ROOT),
  );
  const workers = `data:text/javascript,${
    encodeURIComponent(`export const env = ${JSON.stringify(env)};`)
  }`;
  // The package's names and deno.json's bare imports, made absolute: the
  // copy lives outside the repository.
  const copy = source
    .replace('"cloudflare:workers"', JSON.stringify(workers))
    .replace(/"(@relayer\/poison(?:\/[a-z-]+)?|postgres)"/g, (_, name) => {
      const target = name === "postgres" ? config.imports.postgres! : new URL(
        config.exports[`.${name.slice("@relayer/poison".length)}`]!,
        ROOT,
      ).href;
      return JSON.stringify(target);
    });
  const dir = await Deno.makeTempDir({ prefix: "relayer_worker_env_" });
  const logged: string[] = [];
  const log = console.log;
  console.log = (line: unknown) => void logged.push(String(line));
  try {
    await Deno.writeTextFile(`${dir}/${example}`, copy);
    const module = await import(`${dir}/${example}`) as { default: Worker };
    await use(module.default, logged);
  } finally {
    console.log = log;
    await Deno.remove(dir, { recursive: true });
  }
}

const base = {
  SENDER_URL: "http://127.0.0.1:9",
  WEBHOOK_SECRET: "a-webhook-secret-16",
  OPS_TOKEN: "an-ops-token-0123456789",
  CLOUDFLARE_MAX_RETRIES: "9",
  CLOUDFLARE_DLQ_MAX_RETRIES: "100",
};

/** Settings of a service that only `main.ts` reads, and values it refuses or not. */
const SERVICE_ONLY: Record<string, Record<string, unknown>> = {
  "a KV_PATH the service takes": { KV_PATH: "./data/relayer.kv" },
  "a KV_PATH that is a URL": { KV_PATH: "https://kv.example.test/db" },
  "KV_PATH and KV_URL both": {
    KV_PATH: "./data/relayer.kv",
    KV_URL: "https://kv.example.test/db",
  },
  "KV_QUEUE beside QSTASH_TOKEN": {
    KV_QUEUE: "1",
    QSTASH_TOKEN: "a-qstash-token-0123",
  },
  "KV_QUEUE=yes": { KV_QUEUE: "yes" },
  "QSTASH_URL alone": { QSTASH_URL: "http://127.0.0.1:8080" },
  "a DENO_KV_ACCESS_TOKEN with a space": {
    KV_URL: "https://kv.example.test/db",
    DENO_KV_ACCESS_TOKEN: " a-kv-connect-token",
  },
  "DENO_DEPLOYMENT_ID": { DENO_DEPLOYMENT_ID: "abc123" },
};

/** Fails unless `logged` names each of `names` once, as only main.ts reads it. */
function assertNamedOnce(logged: string[], names: string[], what: string) {
  for (const name of names) {
    const prefix = `relayer: ${name} is set, but only main.ts reads it`;
    assert.equal(
      logged.filter((line) => line.startsWith(prefix)).length,
      1,
      `${what}: ${name} named once in ${JSON.stringify(logged)}`,
    );
  }
}

const bad = { DATABASE_URL: "mysql://u:p@db.test/r" };
const database = { DATABASE_URL: "postgres://u:p@127.0.0.1:9/r" };

Deno.test("worker.ts starts beside each setting only main.ts reads, whatever its value, a malformed DATABASE_URL too, and names each once, on the first event", async (t) => {
  for (
    const [what, env] of Object.entries({
      ...SERVICE_ONLY,
      "a malformed DATABASE_URL": bad,
      "a DATABASE_URL beside a KV_PATH": {
        ...database,
        KV_PATH: "./data/relayer.kv",
      },
    })
  ) {
    await t.step(
      what,
      () =>
        withWorker("worker.ts", { ...base, ...env }, async (worker, logged) => {
          assert.equal(
            logged.length,
            0,
            `${what}: nothing said before an event`,
          );
          const ready = await worker.fetch(
            new Request("http://worker.test/healthz"),
            {},
            {},
          );
          assert.equal(ready.status, 200, what);
          await ready.body?.cancel();
          const named = [...logged];
          assertNamedOnce(named, Object.keys(env), what);
          await worker.queue({ queue: "relayer-jobs", messages: [] }, {}, {});
          await worker.fetch(new Request("http://worker.test/healthz"), {}, {})
            .then((response) => response.body?.cancel());
          assert.deepEqual(
            logged,
            named,
            `${what}: named on the first event only`,
          );
        }),
    );
  }
});

Deno.test("worker.ts names nothing when it is given only what it reads", async () => {
  await withWorker("worker.ts", base, async (worker, logged) => {
    await worker.queue({ queue: "relayer-jobs", messages: [] }, {}, {});
    assert.equal(logged.join("\n"), "");
  });
});

Deno.test("postgres_worker.ts reads DATABASE_URL, starts beside each setting only main.ts reads, and names each once, on its first event", async (t) => {
  for (const [what, env] of Object.entries(SERVICE_ONLY)) {
    await t.step(what, () =>
      withWorker(
        "postgres_worker.ts",
        { ...base, ...database, ...env },
        async (worker, logged) => {
          assert.equal(
            logged.length,
            0,
            `${what}: nothing said before an event`,
          );
          const waited: Promise<unknown>[] = [];
          const ctx = {
            waitUntil: (p: Promise<unknown>) => void waited.push(p),
          };
          // No store call, so no connection: the client ends at once.
          await worker.queue({ queue: "relayer-jobs", messages: [] }, {}, ctx);
          await worker.queue({ queue: "relayer-jobs", messages: [] }, {}, ctx);
          await Promise.all(waited);
          assertNamedOnce(logged, Object.keys(env), what);
          assert.ok(
            !logged.some((line) => line.includes("DATABASE_URL")),
            `${what}: DATABASE_URL is read: ${JSON.stringify(logged)}`,
          );
        },
      ));
  }
});
