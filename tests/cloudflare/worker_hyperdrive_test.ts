/**
 * A Worker on PostgreSQL given both a `DATABASE_URL` and a Hyperdrive
 * binding (`HYPERDRIVE`): it connects through Hyperdrive, as the docs and
 * `examples/cloudflare/postgres_worker.ts` do, and says so on its first
 * event, naming `DATABASE_URL` as ignored, where it said nothing and an
 * operator who set both could believe `DATABASE_URL` (its TLS, its host)
 * was the database in use.
 *
 * @module
 */

import assert from "node:assert/strict";
import { workerConfig } from "../../webhook/app.ts";
import { worker } from "./_worker.ts";

const ENV = {
  SENDER_URL: "http://127.0.0.1:9000",
  WEBHOOK_SECRET: "a-webhook-secret-16",
  CLOUDFLARE_MAX_RETRIES: "9",
  CLOUDFLARE_DLQ_MAX_RETRIES: "100",
};
const DATABASE_URL = "postgres://relayer:s3cret-pw@db.test:5432/payments";
/** workerd's binding: its connection string is made per request. */
const HYPERDRIVE = {
  get connectionString(): string {
    throw new Error("read at the Worker's top level");
  },
};
const LINE =
  "relayer: DATABASE_URL is set beside the Hyperdrive binding HYPERDRIVE, which a Worker on PostgreSQL connects through, so DATABASE_URL is ignored (its host, database and TLS settings too): remove it from the Worker's secrets (wrangler secret delete DATABASE_URL), or remove the [[hyperdrive]] binding to connect by DATABASE_URL";

Deno.test("a Worker on PostgreSQL given DATABASE_URL beside a Hyperdrive binding says on its first event that it connects through Hyperdrive and ignores DATABASE_URL, once, without its password", async () => {
  const { fetch, logged } = worker(
    { ...ENV, DATABASE_URL, HYPERDRIVE },
    { database: true },
  );
  assert.deepEqual(logged, []);
  const res = await fetch(new Request("http://127.0.0.1:8787/healthz"));
  await res.body?.cancel();
  await (await fetch(new Request("http://127.0.0.1:8787/healthz"))).body
    ?.cancel();
  assert.deepEqual(logged, [LINE]);
  assert.ok(!logged.join("\n").includes("s3cret-pw"));
});

Deno.test("a Worker on PostgreSQL with only one of DATABASE_URL and a Hyperdrive binding, or a Worker that reads no DATABASE_URL, names no Hyperdrive binding", async () => {
  for (
    const [env, options] of [
      [{ ...ENV, DATABASE_URL }, { database: true }],
      [{ ...ENV, HYPERDRIVE }, { database: true }],
      [{ ...ENV, DATABASE_URL: "", HYPERDRIVE }, { database: true }],
    ] as const
  ) {
    const { fetch, logged } = worker(env, options);
    await (await fetch(new Request("http://127.0.0.1:8787/healthz"))).body
      ?.cancel();
    assert.deepEqual(logged, [], JSON.stringify(Object.keys(env)));
  }
  // A Worker on another store: DATABASE_URL is named as main.ts's alone.
  const { unread } = workerConfig({ ...ENV, DATABASE_URL, HYPERDRIVE });
  assert.equal(unread.length, 1);
  assert.match(unread[0]!, /^relayer: DATABASE_URL is set, but only main\.ts/);
});

Deno.test("a Worker on PostgreSQL given DATABASE_URL beside a Hyperdrive binding neither reads nor refuses it: one it would refuse alone starts, named as ignored", () => {
  // Each refused on its own: a host in brackets (the refusal says to bind
  // Hyperdrive, which is bound), a target_session_attrs the client does
  // not take.
  for (
    const url of [
      "postgres://relayer:s3cret-pw@[2001:db8::7]:5432/payments",
      "postgres://relayer:s3cret-pw@db.test:5432/payments?target_session_attrs=any",
    ]
  ) {
    assert.throws(
      () => workerConfig({ ...ENV, DATABASE_URL: url }, { database: true }),
      /^ConfigError: DATABASE_URL /,
    );
    const { config, unread } = workerConfig(
      { ...ENV, DATABASE_URL: url, HYPERDRIVE },
      { database: true },
    );
    assert.equal(config.database, undefined);
    assert.deepEqual(unread, [LINE]);
  }
  // Beside it, the one it would take is not read either.
  const { config } = workerConfig(
    { ...ENV, DATABASE_URL, HYPERDRIVE },
    { database: true },
  );
  assert.equal(config.database, undefined);
});

Deno.test("a Worker on PostgreSQL whose HYPERDRIVE is a var, not a binding (a text, a JSON null), reads DATABASE_URL and names no Hyperdrive binding", () => {
  for (const value of ["postgres://db.test:5432/payments", null]) {
    const { config, unread } = workerConfig(
      { ...ENV, DATABASE_URL, HYPERDRIVE: value },
      { database: true },
    );
    assert.notEqual(config.database, undefined, JSON.stringify(value));
    assert.ok(!unread.includes(LINE), JSON.stringify(value));
  }
});
