/**
 * The service as a real process when PostgreSQL ends a connection that
 * postgres.js has just opened, while it still reads the server's array
 * types (its own first query on every new connection, with `fetch_types`
 * on): a failover or a `pg_terminate_backend` that lands on the pool's
 * reconnect. postgres.js drops that query's promise (porsager/postgres#1192,
 * #1223), so its rejection is no one's: the process must live on, and the
 * store with it.
 *
 * @module
 */

import assert from "node:assert/strict";
import { startMain } from "../_main_process.ts";
import {
  freshDatabase,
  postgresAvailable,
  postgresUrl,
  sharedClient,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";
import { closeEach } from "../_raw_http.ts";

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * A TCP relay to the server. Once armed, the first client message that
 * asks for `pg_catalog.pg_type` is held while `onTypeFetch` runs, then
 * passed on.
 */
function relay(target: { hostname: string; port: number }) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns: Deno.Conn[] = [];
  const state: { armed: (() => Promise<void>) | null; held: number } = {
    armed: null,
    held: 0,
  };
  (async () => {
    for await (const client of listener) {
      conns.push(client);
      (async () => {
        const server = await Deno.connect(target);
        conns.push(server);
        server.readable.pipeTo(client.writable).catch(() => {});
        const text = new TextDecoder("latin1");
        try {
          for await (const chunk of client.readable) {
            const onTypeFetch = state.armed;
            if (
              onTypeFetch && text.decode(chunk).includes("pg_catalog.pg_type")
            ) {
              state.armed = null;
              state.held++;
              await onTypeFetch();
            }
            const writer = server.writable.getWriter();
            try {
              await writer.write(chunk);
            } finally {
              writer.releaseLock();
            }
          }
        } catch {
          // either side gone
        }
        try {
          server.close();
        } catch {
          // closed already
        }
      })().catch(() => {});
    }
  })().catch(() => {});
  return {
    port: (listener.addr as Deno.NetAddr).port,
    arm(onTypeFetch: () => Promise<void>) {
      state.armed = onTypeFetch;
    },
    held: () => state.held,
    close() {
      listener.close();
      closeEach(conns);
    },
  };
}

/**
 * `main.ts` as a process on `databaseUrl` (`database`'s, or a relay's to
 * it), over a dir of its own, and how a test watches it.
 */
async function serveOn(database: { url: string }, databaseUrl: string) {
  const admin = await sharedClient();
  const name = new URL(database.url).pathname.slice(1);
  const dir = await Deno.makeTempDir({ prefix: "relayer_types_" });
  const service = startMain({
    SENDER_URL: "http://127.0.0.1:9/",
    WEBHOOK_SECRET: "types-secret-0123456789abcdef",
    DATABASE_URL: databaseUrl,
  }, { writeDir: dir });
  let exited = false;
  service.child.status.then(() => exited = true);
  /** Fails with what the process said on its way out. */
  const alive = async () => {
    if (!exited) return;
    const { code, stderr } = await service.ended();
    assert.fail(`the service's process ended (code ${code}): ${stderr}`);
  };
  const base = await service.base() ?? "http://127.0.0.1:0";
  /** `/readyz`'s status, 0 while nothing answers. */
  const ready = async (): Promise<number> => {
    try {
      const res = await fetch(`${base}/readyz`);
      await res.body?.cancel();
      return res.status;
    } catch {
      return 0;
    }
  };
  return {
    admin,
    name,
    service,
    alive,
    ready,
    /** Ends every session of the database but `admin`'s: only this service's, the server is shared with other files. */
    terminate: () =>
      admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE datname = ${name} AND pid <> pg_backend_pid()`,
    /** Waits for the service's first ready answer, failing if it ends. */
    async started() {
      while (await ready() !== 200) {
        await alive();
        await sleep(50);
      }
    },
    /** Ends the process and removes its dir. */
    async stop() {
      service.kill();
      await service.ended();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

Deno.test({
  name:
    "main.ts on PostgreSQL lives on when the server ends a new connection while postgres.js reads its types, and reads again",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    const database = await freshDatabase();
    const real = new URL(await postgresUrl());
    const proxy = relay({
      hostname: real.hostname,
      port: Number(real.port || 5432),
    });
    const url = new URL(database.url);
    url.port = String(proxy.port);
    const { admin, name, service, alive, ready, terminate, started, stop } =
      await serveOn(database, url.href);
    try {
      await started();
      // Every session of the pool ended: the next read opens a new one,
      // whose type query the server ends before it runs.
      proxy.arm(async () => {
        await terminate();
        for (;;) {
          const [row] = await admin`SELECT count(*)::int AS n
            FROM pg_stat_activity WHERE datname = ${name}`;
          if (row!.n === 0) return;
          await sleep(20);
        }
      });
      await terminate();
      let status = 0;
      const until = performance.now() + 20_000;
      while (performance.now() < until) {
        status = await ready();
        if (status === 200 && proxy.held() > 0) break;
        await alive();
        await sleep(100);
      }
      assert.equal(proxy.held(), 1, "no new connection asked for its types");
      // Time for a dropped rejection to end the process, then a read again.
      await sleep(500);
      await alive();
      assert.equal(await ready(), 200);
      service.kill();
      const { stdout } = await service.ended();
      assert.match(
        stdout,
        /PostgreSQL ended a new connection while postgres\.js read its types \(57P01\): it connects again/,
      );
    } finally {
      await stop();
      proxy.close();
      await database.drop();
    }
  }),
});

Deno.test({
  name:
    "main.ts on PostgreSQL lives on when a statement_timeout cancels postgres.js's type query on a new connection, and reads again once it is lifted",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    const database = await freshDatabase();
    const { admin, name, service, alive, ready, terminate, started, stop } =
      await serveOn(database, database.url);
    try {
      await started();
      // A statement_timeout too short for any statement, on this
      // database's new sessions (as on the role): every connection the
      // pool opens again has its type query cancelled (57014).
      await admin.unsafe(`ALTER DATABASE "${name}" SET statement_timeout = 1`);
      await terminate();
      // /readyz caches its write probe for a second: asked over 3 s, it
      // writes, so the pool opens its connections again.
      let refused = 0;
      for (let i = 0; i < 30; i++) {
        if (await ready() !== 200) refused++;
        await alive();
        await sleep(100);
      }
      assert.ok(refused > 0, "no write was refused under a 1 ms timeout");
      // Time for a dropped rejection to end the process.
      await sleep(500);
      await alive();
      await admin.unsafe(`ALTER DATABASE "${name}" RESET statement_timeout`);
      // The sessions opened under it keep it: an operator ends them.
      await terminate();
      let status = 0;
      const until = performance.now() + 20_000;
      while (performance.now() < until) {
        status = await ready();
        if (status === 200) break;
        await alive();
        await sleep(100);
      }
      assert.equal(status, 200);
      service.kill();
      const { stdout } = await service.ended();
      assert.match(
        stdout,
        /PostgreSQL cancelled postgres\.js.s type query on a new connection \(57014: /,
      );
    } finally {
      await stop();
      await database.drop();
    }
  }),
});
