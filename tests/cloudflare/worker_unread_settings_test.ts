/**
 * docs/queues.md tells an operator which of the service's settings to leave
 * out of a Worker's environment: held here to the settings `workerConfig`
 * neither checks nor refuses (`SERVICE_ONLY`), each of which leaves the
 * Worker's `Config` as it was without it, and is named once. (Each example
 * Worker, run with them: worker_service_settings_test.ts.)
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  SERVICE_ONLY,
  SETTINGS,
  unknownSettingLines,
  workerConfig,
} from "../../webhook/_settings.ts";

const ROOT = new URL("../../", import.meta.url);

const base = {
  SENDER_URL: "http://127.0.0.1:9000",
  WEBHOOK_SECRET: "a-webhook-secret-16",
  CLOUDFLARE_MAX_RETRIES: "9",
  CLOUDFLARE_DLQ_MAX_RETRIES: "100",
};

/** A value of each setting that the service takes. */
const TAKEN: Record<string, string> = {
  KV_PATH: "./data/other.kv",
  KV_URL: "https://kv.example.test/db",
  DENO_KV_ACCESS_TOKEN: "a-kv-connect-token",
  KV_QUEUE: "1",
  QSTASH_TOKEN: "a-qstash-token-0123",
  QSTASH_URL: "http://127.0.0.1:8080",
  DATABASE_URL: "postgres://u:p@db.test/r",
  DENO_DEPLOYMENT_ID: "abc123",
  DENO_KV_DEFAULT_PATH: "https://kv.example.test/deploy",
  DENO_KV_PATH_PREFIX: "",
};

Deno.test("the settings docs/queues.md says to leave out of a Worker are those workerConfig neither checks nor refuses, each named once and changing nothing", async () => {
  const doc = (await Deno.readTextFile(new URL("docs/queues.md", ROOT)))
    .replace(/\s+/g, " ");
  const sentence = /Leave out the settings only `main\.ts` reads: (.*?)\. /
    .exec(doc);
  assert.ok(sentence, "docs/queues.md no longer lists them");
  const named = [...sentence[1]!.matchAll(/`([A-Z_]+)`/g)].map((m) => m[1]!);
  assert.deepEqual(named.sort(), Object.keys(SERVICE_ONLY).sort());
  // The line it quotes is the one a Worker logs.
  const quoted = workerConfig({ ...base, KV_PATH: TAKEN.KV_PATH! }).unread[0]!;
  assert.ok(doc.includes(`\`${quoted}\``), `docs/queues.md quotes ${quoted}`);
  const plain = workerConfig(base).config;
  for (const name of Object.keys(SERVICE_ONLY)) {
    for (const value of [TAKEN[name] || "x", "a value refused: ://"]) {
      const { config, unread } = workerConfig({ ...base, [name]: value });
      assert.deepEqual(config, plain, `${name}=${value}`);
      assert.deepEqual(unread, [
        `relayer: ${name} is set, but only main.ts reads it (${
          SERVICE_ONLY[name]
        }), not a Cloudflare Worker, so it is ignored: remove it from the Worker's settings`,
      ]);
    }
  }
});

Deno.test("workerConfig() reads DATABASE_URL for a Worker on PostgreSQL, names the settings nothing reads beside the rest as main.ts does, and Cloudflare's own not at all", () => {
  const database = workerConfig(
    { ...base, DATABASE_URL: TAKEN.DATABASE_URL },
    { database: true },
  );
  assert.equal(database.config.database?.url, TAKEN.DATABASE_URL);
  assert.deepEqual(database.unread, []);
  assert.throws(
    () =>
      workerConfig({ ...base, DATABASE_URL: "mysql://x" }, { database: true }),
    /^ConfigError: DATABASE_URL must be a PostgreSQL URL/,
  );
  // Taken by main.ts, which gives the client its host and port as lists;
  // the Worker's client is given the URL alone.
  assert.throws(
    () =>
      workerConfig({
        ...base,
        DATABASE_URL: "postgres://relayer:s3cret-pw@[::1]:5432/payments",
      }, { database: true }),
    /^ConfigError: DATABASE_URL must be a PostgreSQL URL such as postgres:\/\/user:password@host:5432\/dbname: its host is an IPv6 address in brackets, which a Cloudflare Worker's PostgreSQL client does not dial: use a host name that resolves to it, or bind Hyperdrive as HYPERDRIVE$/,
  );
  // A [vars] number is a setting given, as loadConfig reads it.
  const { unread } = workerConfig({
    ...base,
    QSTASH_RETRIES: 9,
    CLOUDFLARE_MESSAGE_RETENTION: "96h",
  });
  assert.deepEqual(unread, [
    "relayer: QSTASH_RETRIES is set, but a Cloudflare Worker reads it only for QStash's route (its check of QStash's retries), which needs QSTASH_CURRENT_SIGNING_KEY and QSTASH_NEXT_SIGNING_KEY, and neither is set, so it is ignored: set both signing keys from the QStash console to take QStash's deliveries, or remove it",
  ]);
  // Unset, the queues' max_retries are Cloudflare's 3: refused beside the
  // default MAX_DELIVERIES, as the queue handler would.
  assert.throws(
    () =>
      workerConfig({
        SENDER_URL: base.SENDER_URL,
        WEBHOOK_SECRET: base.WEBHOOK_SECRET,
      }),
    /^ConfigError: CLOUDFLARE_MAX_RETRIES is 3/,
  );
});

Deno.test("nameUnread() names the unread settings on the first call of any handler only, passing each call through", async () => {
  const { nameUnread } = workerConfig({ ...base, KV_QUEUE: "1" });
  const logged: string[] = [];
  const calls: unknown[][] = [];
  const worker = nameUnread({
    fetch: (...args: unknown[]) => {
      calls.push(args);
      return Promise.resolve(new Response("ok"));
    },
    queue: (...args: unknown[]) => void calls.push(args),
  }, (line) => void logged.push(line));
  assert.deepEqual(logged, []);
  worker.queue("batch", "env", "ctx");
  assert.equal(logged.length, 1);
  assert.match(logged[0]!, /^relayer: KV_QUEUE is set, but only main\.ts/);
  assert.equal(await (await worker.fetch("request")).text(), "ok");
  worker.queue("again");
  assert.equal(logged.length, 1);
  assert.deepEqual(calls, [["batch", "env", "ctx"], ["request"], ["again"]]);
});

Deno.test("workerConfig() names PUBLIC_URL and QSTASH_RETRIES beside a QSTASH_TOKEN the Worker ignores as wanting the signing keys, never QSTASH_TOKEN as not set", () => {
  const qstash = {
    ...base,
    PUBLIC_URL: "https://relayer.example.com",
    QSTASH_RETRIES: "9",
    QSTASH_TOKEN: TAKEN.QSTASH_TOKEN!,
  };
  const { unread } = workerConfig(qstash);
  assert.deepEqual(unread, [
    "relayer: QSTASH_TOKEN is set, but only main.ts reads it (its QStash publisher), not a Cloudflare Worker, so it is ignored: remove it from the Worker's settings",
    "relayer: PUBLIC_URL is set, but a Cloudflare Worker uses it only for QStash's route, which needs QSTASH_CURRENT_SIGNING_KEY and QSTASH_NEXT_SIGNING_KEY, and neither is set, so it is read only to refuse, at a URL off this machine, the docs' local-run secrets and RELAYER_INSECURE_DEV: set both signing keys from the QStash console to take QStash's deliveries",
    "relayer: QSTASH_RETRIES is set, but a Cloudflare Worker reads it only for QStash's route (its check of QStash's retries), which needs QSTASH_CURRENT_SIGNING_KEY and QSTASH_NEXT_SIGNING_KEY, and neither is set, so it is ignored: set both signing keys from the QStash console to take QStash's deliveries, or remove it",
  ]);
  // PUBLIC_URL is read all the same: a Worker reached off this machine
  // refuses the docs' local-run secrets, and RELAYER_INSECURE_DEV.
  assert.throws(
    () =>
      workerConfig({ ...qstash, WEBHOOK_SECRET: "local-secret-0123456789" }),
    /reached at PUBLIC_URL, off this machine/,
  );
  assert.throws(
    () => workerConfig({ ...qstash, RELAYER_INSECURE_DEV: "1" }),
    /RELAYER_INSECURE_DEV is for local runs, and this service is reached at PUBLIC_URL, off this machine/,
  );
  // No line names QSTASH_TOKEN as read by anything in the Worker.
  for (const line of unread.slice(1)) {
    assert.doesNotMatch(line, /QSTASH_TOKEN/, line);
  }
  // With the signing keys, the route reads both: nothing more is named.
  const keys = {
    QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
    QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789ab",
  };
  assert.deepEqual(workerConfig({ ...qstash, ...keys }).unread, [unread[0]]);
});

Deno.test("workerConfig() refuses what is not the Worker's env object, saying so rather than naming a setting missing", () => {
  // An array is an object too, and its spread names no setting: refused
  // as what it is, not as "No delivery route is configured".
  const envs = [null, undefined, "SENDER_URL=x", 42, () => {}, [], [
    "SENDER_URL=x",
  ]];
  for (const env of envs) {
    assert.throws(
      () => workerConfig(env as never),
      (error: unknown) =>
        error instanceof TypeError &&
        error.message ===
          `Cannot read the Worker's settings as workerConfig takes the Worker's env object (import { env } from "cloudflare:workers", or a handler's env argument): current value is ${
            env === null ? "null" : Array.isArray(env) ? "an array" : typeof env
          }`,
      String(env),
    );
  }
});

Deno.test("the secrets docs/queues.md and wrangler.toml say to put with wrangler secret put are every secret a Worker reads, the rotations' second ones too", async () => {
  // Every secret of the service (a key, a token) a Worker does not leave
  // out; DATABASE_URL is postgres_worker.ts's.
  const secrets = [...SETTINGS].filter((name) =>
    /SECRET|TOKEN|SIGNING_KEY/.test(name) && !(name in SERVICE_ONLY)
  );
  const doc = (await Deno.readTextFile(new URL("docs/queues.md", ROOT)))
    .replace(/\s+/g, " ");
  const step = /Put the secrets \((.*?)\) with `wrangler secret put <NAME>`/
    .exec(doc);
  assert.ok(step, "docs/queues.md no longer lists the secrets to put");
  const named = (text: string) =>
    [...text.matchAll(/\b[A-Z][A-Z_]*_[A-Z_]+\b/g)].map((m) => m[0]).sort();
  assert.deepEqual(named(step[1]!), [...secrets, "DATABASE_URL"].sort());
  const toml = await Deno.readTextFile(
    new URL("examples/cloudflare/wrangler.toml", ROOT),
  );
  const comment = /^# .*?Secrets \(([^)]*)\) go in with/ms.exec(toml);
  assert.ok(comment, "wrangler.toml no longer lists the secrets");
  assert.deepEqual(named(comment[1]!), secrets.sort());
});

Deno.test("workerConfig() names a misspelt setting as main.ts does, and not a binding: a Worker given MAX_DELIVERY=3 kept MAX_DELIVERIES at 10 with nothing said", () => {
  const misspelt = { MAX_DELIVERY: "3", STUCK_AFTR: "10m", OPS_TOKENS: 7 };
  const { config, unread, nameUnread } = workerConfig({
    ...base,
    ...misspelt,
    // Bindings are objects, not settings, whatever their name.
    RELAYER_JOBS: { send: () => Promise.resolve() },
    HYPERDRIVE: { connectionString: "postgres://u:p@db.test/r" },
  });
  assert.equal(config.policy.maxDeliveries, 10); // MAX_DELIVERY is ignored
  assert.deepEqual(unread, unknownSettingLines(Object.keys(misspelt)));
  assert.equal(unread.length, 3);
  assert.match(
    unread[0]!,
    /^relayer: MAX_DELIVERY is not a setting of the relayer, so it is ignored: did you mean MAX_DELIVERIES\?/,
  );
  const logged: string[] = [];
  const worker = nameUnread(
    { fetch: () => new Response("ok") },
    (line) => void logged.push(line),
  );
  worker.fetch();
  worker.fetch();
  assert.deepEqual(logged, unread);
  // The settings themselves, and names outside their families, are not.
  assert.deepEqual(
    workerConfig({ ...base, JOBS: "not a setting", CHECK_DATABASE_URL: "x" })
      .unread,
    [],
  );
});

Deno.test("nameUnread() says on the first event a rotation under way or over, as main.ts's start line does: a Worker left one half done with nothing said", () => {
  const first = (env: Record<string, string>) => {
    const logged: string[] = [];
    const worker = workerConfig({ ...base, ...env }).nameUnread(
      { fetch: () => new Response("ok") },
      (line) => void logged.push(line),
    );
    worker.fetch();
    worker.fetch();
    return logged;
  };
  const ops = "an-ops-token-0123456789";
  const next = "another-ops-token-0123456789";
  assert.deepEqual(
    first({
      WEBHOOK_SECRET_NEXT: "another-webhook-secret",
      OPS_TOKEN: ops,
      OPS_TOKEN_NEXT: next,
    }),
    [
      "relayer: routes: deliveries (two secrets: WEBHOOK_SECRET_NEXT, a rotation under way)",
      "relayer: routes: ops (two tokens: OPS_TOKEN_NEXT, a rotation under way)",
    ],
  );
  assert.deepEqual(
    first({
      WEBHOOK_SECRET_NEXT: base.WEBHOOK_SECRET,
      OPS_TOKEN: ops,
      OPS_TOKEN_NEXT: ops,
    }),
    [
      "relayer: routes: deliveries (WEBHOOK_SECRET_NEXT equals WEBHOOK_SECRET: a rotation over, unset it)",
      "relayer: routes: ops (OPS_TOKEN_NEXT equals OPS_TOKEN: a rotation over, unset it)",
    ],
  );
  // No rotation: nothing to say.
  assert.deepEqual(first({ OPS_TOKEN: ops }), []);
});
