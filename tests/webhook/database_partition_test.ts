/**
 * A network partition between the service and PostgreSQL: packets dropped
 * both ways, no FIN, no RST, no error (a cloud network blip, a failover
 * whose old primary's address stops answering). Every store call and
 * `/readyz` must answer within the service's bound during it, and the
 * service must take the database back once the network heals, without a
 * restart: the pool's silent connections closed and replaced.
 *
 * @module
 */

import assert from "node:assert/strict";
import net from "node:net";
import postgres from "postgres";
import { openService, type ServiceOptions } from "../../main.ts";
import { loadConfig } from "../../webhook/config.ts";
import {
  freshDatabase,
  pgbouncerAvailable,
  postgresAvailable,
} from "../_postgres.ts";
import {
  processPostgres,
  startPgBouncer,
} from "../../support/postgres_server.ts";
import { partitionProxy } from "../../support/partition_proxy.ts";
import { refusingRelay } from "../_refusing_relay.ts";
import { timeout } from "../_timeout.ts";
import { relayUrl } from "../_relay_url.ts";

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** How long `fn` took to settle, in ms, and whether it failed. */
async function timed(
  fn: () => Promise<unknown>,
): Promise<{ ms: number; failed: boolean }> {
  const start = performance.now();
  const failed = await fn().then(() => false, () => true);
  return { ms: performance.now() - start, failed };
}

/** The bound of the services here: PostgreSQL's silence closes a connection after it. */
const ANSWER_MS = 1_000;

/** The service's line as the socket closes a silent connection. */
const CUT =
  /^relayer: PostgreSQL sent nothing for \d+ms after the client wrote to it/;

/** The service on `databaseUrl`, with `ANSWER_MS` as its bound, its log lines pushed to `lines`. */
function serviceOn(databaseUrl: string, lines: string[] = []) {
  return openService(
    loadConfig({
      SENDER_URL: "http://127.0.0.1:9000",
      WEBHOOK_SECRET: "a-secret-of-16-chars",
      DATABASE_URL: databaseUrl,
    }),
    {
      log: (line) => lines.push(line),
      databaseAnswerMs: ANSWER_MS,
    } as ServiceOptions,
  );
}

/** A relay that can partition the network to the server of `databaseUrl`. */
function proxyTo(databaseUrl: string) {
  const target = new URL(databaseUrl);
  return partitionProxy({
    hostname: target.hostname,
    port: Number(target.port),
  });
}

/** The service's read, once the whole pool (10 connections) has answered one. */
async function poolOpened(
  service: Awaited<ReturnType<typeof serviceOn>>,
): Promise<() => Promise<unknown>> {
  const read = () => service.store.getIntent("pi_0001");
  // Tried again until the pool is open: on a loaded machine, opening its
  // connections (through a pooler, each its own login) can outlast the
  // reads' bound, which this warm-up does not measure.
  const opened = await poolBack(read, 20_000);
  assert.ok(opened < Infinity, "the pool did not open within 20 s");
  return read;
}

/**
 * How long after now 10 reads at once first all answered, tried every
 * 100 ms for `withinMs`; `Infinity` if they never did.
 */
async function poolBack(
  read: () => Promise<unknown>,
  withinMs: number,
): Promise<number> {
  const healed = performance.now();
  while (performance.now() - healed < withinMs) {
    const answers = await Promise.allSettled(Array.from({ length: 10 }, read));
    if (answers.every((answer) => answer.status === "fulfilled")) {
      return performance.now() - healed;
    }
    await sleep(100);
  }
  return Infinity;
}

/**
 * A schema change, VACUUM FULL or LOCK TABLE of an operator's on `admin`:
 * the intents table locked for `ms`. Resolves once the lock is held, with
 * the transaction that holds it (in an object, so that it is not awaited).
 */
async function lockIntents(
  admin: postgres.Sql,
  ms: number,
): Promise<{ lock: Promise<unknown> }> {
  let locked!: () => void;
  const held = new Promise<void>((resolve) => locked = resolve);
  const lock = admin.begin(async (tx) => {
    await tx.unsafe("LOCK TABLE relayer.intents IN ACCESS EXCLUSIVE MODE");
    locked();
    await sleep(ms);
  });
  await held;
  return { lock };
}

/** Checks that each of `during` failed, within the bound and half a second. */
function failedInBound(
  during: { ms: number; failed: boolean }[],
  answered: string,
  took: (ms: number) => string,
): void {
  for (const { ms, failed } of during) {
    assert.ok(failed, answered);
    assert.ok(ms < ANSWER_MS + 500, took(Math.round(ms)));
  }
}

Deno.test({
  name:
    "openService() on PostgreSQL: through a partition, every read and /readyz answers within the bound, and after it heals the whole pool reads again without a restart",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    const database = await freshDatabase();
    const proxy = await proxyTo(database.url);
    const lines: string[] = [];
    const service = await serviceOn(proxy.via(database.url), lines);
    const ready = () => service.fetch(new Request("http://127.0.0.1/readyz"));
    try {
      // The whole pool open (10 connections): each will have a read lost.
      const read = await poolOpened(service);
      proxy.partition();
      const during = await Promise.all(
        Array.from({ length: 12 }, () => timed(read)),
      );
      await sleep(1_100); // past /readyz's cached probe
      const start = performance.now();
      const probe = await ready();
      await probe.body?.cancel();
      const probeMs = performance.now() - start;
      proxy.heal();
      const back = await poolBack(read, 5_000);
      assert.ok(
        back < 5_000,
        "10 reads at once did not all answer within 5 s of the network's return",
      );
      failedInBound(
        during,
        "a read answered through the partition",
        (ms) => `a read took ${ms} ms to fail in the partition`,
      );
      assert.equal(probe.status, 503);
      assert.ok(probeMs < 2_500, `/readyz took ${Math.round(probeMs)} ms`);
      const after = await ready();
      await after.body?.cancel();
      assert.equal(after.status, 200);
      // One line, at the first: each connection closed in turn is not one.
      const cuts = lines.filter((line) =>
        /PostgreSQL sent nothing for 1000ms/.test(line)
      );
      assert.equal(
        cuts.length,
        1,
        `the lines that said a connection was closed:\n${cuts.join("\n")}`,
      );
      // The measurement, for docs/postgres.md.
      // deno-lint-ignore no-console
      console.log(
        `partition: reads failed in ${
          during.map(({ ms }) => Math.round(ms)).join(", ")
        } ms, /readyz ${probe.status} in ${
          Math.round(probeMs)
        } ms; the pool read again ${Math.round(back)} ms after the heal`,
      );
    } finally {
      await service.close();
      await proxy.close();
      await database.drop();
    }
  }),
});

Deno.test({
  name:
    "openService() on PostgreSQL: the reads a long partition left waiting for a connection past the bound leave the pool's queue, and do not all run at the heal",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    const database = await freshDatabase();
    const proxy = await proxyTo(database.url);
    const service = await serviceOn(proxy.via(database.url));
    const admin = postgres(database.url, { max: 1, onnotice: () => {} });
    // The reads of the intents table the server ran (its statistics are
    // sent at most once a second, so taken after that long idle).
    const scans = async () => {
      await sleep(1_500);
      const [row] = await admin<{ n: number }[]>`
        SELECT COALESCE(sum(idx_scan), 0)::int AS n
        FROM pg_stat_user_tables WHERE relname = 'intents'`;
      return row!.n;
    };
    try {
      const read = await poolOpened(service);
      const before = await scans();
      proxy.partition();
      // 50 reads a second for 4 s, each failing at its bound.
      const during: Promise<unknown>[] = [];
      for (let n = 0; n < 200; n++) {
        during.push(read().catch(() => {}));
        await sleep(20);
      }
      await Promise.all(during);
      proxy.heal();
      // The service's traffic goes on for 3 s, its reads answered.
      let fresh = 0;
      const healed = performance.now();
      while (performance.now() - healed < 3_000) {
        fresh++;
        await read().catch(() => {});
        await sleep(50);
      }
      const ran = await scans() - before - fresh;
      // At most the first query of each connection opened for them (the
      // pool's 10, and once more each as the silent ones are replaced).
      assert.ok(
        ran <= 20,
        `${ran} of the 200 reads the partition failed ran after the heal`,
      );
    } finally {
      await admin.end();
      await service.close();
      await proxy.close();
      await database.drop();
    }
  }),
});

Deno.test({
  name:
    "openService() on PostgreSQL: after a partition no query met, the first read after the heal fails within the bound and every read after it answers: the pool's idle connections go with the silent one",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    const database = await freshDatabase();
    const proxy = await proxyTo(database.url);
    const answerMs = ANSWER_MS;
    const lines: string[] = [];
    const service = await serviceOn(proxy.via(database.url), lines);
    try {
      const read = await poolOpened(service);
      proxy.partition();
      await sleep(2 * answerMs); // nothing asked of the database meanwhile
      proxy.heal();
      // One read after another, as a quiet service's deliveries come.
      const reads: { ms: number; failed: boolean }[] = [];
      for (let n = 0; n < 10; n++) {
        reads.push(await timed(read));
        if (n === 0) {
          // The store's bound runs from the read's call, the socket's from
          // its write, a few ms later: on a loaded machine a stall between
          // them (150 ms) had the next read, 50 ms on, written to another
          // silent connection before the cut, which then left it as not
          // idle, and it failed at its own bound too. What this proves is
          // that the cut takes the idle ones: the next read waits for it.
          for (let waited = 0; !lines.some((l) => CUT.test(l)); waited += 20) {
            assert.ok(waited < 2 * answerMs, "the socket never cut");
            await sleep(20);
          }
        }
        await sleep(50);
      }
      const failed = reads.filter((r) => r.failed).length;
      assert.ok(
        failed <= 1 && reads.every((r) => r.ms < answerMs + 500),
        `reads after the heal: ${
          reads.map((r) =>
            `${r.failed ? "failed" : "ok"} in ${Math.round(r.ms)} ms`
          )
            .join(", ")
        }`,
      );
    } finally {
      await service.close();
      await proxy.close();
      await database.drop();
    }
  }),
});

Deno.test({
  name:
    "openService() on PostgreSQL: a read held behind a table lock past the bound fails within it, the pool reads again once the lock goes, and the line of the connection closed names the lock as well as the network",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    const database = await freshDatabase();
    const answerMs = ANSWER_MS;
    const lines: string[] = [];
    const service = await serviceOn(database.url, lines);
    const admin = postgres(database.url, { max: 1, onnotice: () => {} });
    try {
      const read = await poolOpened(service);
      // The network is fine, and a read waits on the server, sending
      // nothing.
      const { lock } = await lockIntents(admin, 1.5 * answerMs);
      const during = await timed(read);
      await lock;
      const after = await timed(read);
      failedInBound(
        [during],
        "a read answered behind the lock",
        (ms) => `the read behind the lock took ${ms} ms to fail`,
      );
      assert.ok(!after.failed, "a read after the lock went failed");
      // Whether the silent connection was closed is a race between the
      // store's cancel at its bound and the socket's; a line, if any,
      // must not send the operator to the network alone.
      const cuts = lines.filter((line) => /PostgreSQL sent nothing/.test(line));
      for (const line of cuts) {
        assert.match(line, /behind a table lock/);
        assert.match(line, /pg_stat_activity/);
      }
    } finally {
      await admin.end();
      await service.close();
      await database.drop();
    }
  }),
});

/**
 * A relay to the server of `databaseUrl` that holds each chunk of the
 * server's bytes for `slowMs` (0: none) before passing it on, in order:
 * a connection's start-up, a few round trips, then takes several times
 * that, each silence shorter than the service's bound.
 */
async function slowRelay(databaseUrl: string) {
  const target = new URL(databaseUrl);
  let slowMs = 0;
  const sockets = new Set<net.Socket>();
  const timers = new Set<ReturnType<typeof setTimeout>>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    client.on("error", () => {});
    upstream.on("error", () => {});
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
    client.on("data", (bytes) => upstream.write(bytes));
    let last = Promise.resolve();
    upstream.on("data", (bytes) => {
      const wait = slowMs;
      last = last.then(() =>
        wait === 0 ? undefined : new Promise<void>((resolve) => {
          const timer = setTimeout(() => {
            timers.delete(timer);
            resolve();
          }, wait);
          timers.add(timer);
        })
      ).then(() => {
        if (!client.destroyed) client.write(bytes);
      });
    });
  });
  const url = await relayUrl(server, databaseUrl);
  return {
    url,
    slow(ms: number) {
      slowMs = ms;
    },
    async close() {
      for (const timer of timers) clearTimeout(timer);
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

Deno.test({
  name:
    "openService() on PostgreSQL: a read whose bound passes while the connection it waits for is being opened leaves that connection to the pool: after a restart's slow reconnects every read answers again",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    const database = await freshDatabase();
    const relay = await slowRelay(database.url);
    const service = await serviceOn(relay.url);
    const admin = postgres(database.url, { max: 1, onnotice: () => {} });
    try {
      const read = await poolOpened(service);
      // The server ends every connection of the service's (a restart,
      // pg_terminate_backend), and the next ones open slowly: each answer
      // of the start-up takes 0.4 s, so a read that opens one passes its
      // bound of 1 s first.
      relay.slow(0.4 * ANSWER_MS);
      await admin`
        SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid()`;
      await sleep(200);
      const waiting = await Promise.all(
        Array.from({ length: 10 }, () => timed(read)),
      );
      await sleep(3 * ANSWER_MS); // their connections open meanwhile
      relay.slow(0);
      const answers = await Promise.allSettled(
        Array.from({ length: 10 }, read),
      );
      for (const { failed } of waiting) {
        assert.ok(failed, "a read answered through the slow start-ups");
      }
      assert.deepEqual(
        answers.map((answer) => answer.status),
        Array(10).fill("fulfilled"),
        "the connections opened for reads that gave up never took a read again",
      );
    } finally {
      await admin.end();
      await service.close();
      await relay.close();
      await database.drop();
    }
  }),
});

Deno.test({
  name:
    "openService() on PostgreSQL: a partition that falls while the pool's writes wait for row locks, their flights half answered, leaves no connection stuck: after the heal the whole pool reads again",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    const database = await freshDatabase();
    const proxy = await proxyTo(database.url);
    const service = await serviceOn(proxy.via(database.url));
    const admin = postgres(database.url, { max: 1, onnotice: () => {} });
    let release!: () => void;
    const go = new Promise<void>((resolve) => release = resolve);
    let lock: Promise<unknown> | undefined;
    try {
      const read = await poolOpened(service);
      // Each connection has prepared the write's statements: its flight
      // goes out in one write, and BEGIN's answer comes back at once.
      const count = (key: string) =>
        service.store.admit({ count: key, now: Date.now() });
      for (let round = 0; round < 3; round++) {
        await Promise.all(
          Array.from({ length: 10 }, (_, i) => count(`warm-${round}-${i}`)),
        );
      }
      // Another session's uncommitted rows: each write waits for one,
      // the rest of its flight unanswered, when the network goes.
      let locked!: () => void;
      const held = new Promise<void>((resolve) => locked = resolve);
      lock = admin.begin(async (tx) => {
        for (let i = 0; i < 10; i++) {
          await tx.unsafe(
            `INSERT INTO relayer.counters (job_id, deliveries, expires_at) VALUES ('held-${i}', 1, 9999999999999)`,
          );
        }
        locked();
        await go;
      });
      await held;
      const writes = Array.from(
        { length: 10 },
        (_, i) => timed(() => count(`held-${i}`)),
      );
      await sleep(ANSWER_MS / 5);
      proxy.partition();
      const during = await Promise.all(writes);
      proxy.heal();
      release();
      await lock;
      const back = await poolBack(read, 8_000);
      for (const { failed } of during) {
        assert.ok(failed, "a write answered through the partition");
      }
      assert.ok(
        back < 8_000,
        "10 reads at once did not all answer within 8 s of the network's return (a connection stuck for good)",
      );
    } finally {
      release();
      await lock?.catch(() => {});
      await admin.end();
      await service.close();
      await proxy.close();
      await database.drop();
    }
  }),
});

Deno.test({
  name:
    "openService() through PgBouncer in transaction mode: reads queued by the pooler past the bound fail within it, the pool reads again once the pooler has a server connection, and the line of the connection closed names the pooler's queue",
  ignore: !await pgbouncerAvailable(),
  fn: timeout(60_000, async () => {
    const { server, missing } = await processPostgres();
    if (server === null) throw new Error(missing);
    const pooler = await startPgBouncer(server, {
      mode: "transaction",
      poolSize: 2,
    });
    const answerMs = ANSWER_MS;
    const lines: string[] = [];
    const service = await serviceOn(`${pooler.url}?prepare=false`, lines);
    const other = postgres(pooler.url, {
      max: 2,
      onnotice: () => {},
      prepare: false,
    });
    try {
      const read = await poolOpened(service);
      // Another client's transactions take both server connections of
      // the pool: the service's reads wait in PgBouncer's queue, and
      // nothing comes back meanwhile.
      const held = Promise.all(
        [0, 1].map(() =>
          other.begin(async (tx) => {
            // Long enough for the reads' bound, however late they start
            // (at most 2 × answerMs after, below).
            await tx`SELECT pg_sleep(${(5 * answerMs) / 1000})`;
          })
        ),
      );
      // Both running on the server before the reads are sent: a fixed
      // wait let a read take a server connection first on a loaded machine.
      const admin = postgres(server.url, { max: 1, onnotice: () => {} });
      try {
        for (const start = Date.now();;) {
          const [row] = await admin`
            SELECT count(*)::int AS sleeping FROM pg_stat_activity
            WHERE state = 'active' AND query LIKE 'SELECT pg_sleep(%'`;
          if (Number(row?.sleeping) >= 2) break;
          assert.ok(
            Date.now() - start < 2 * answerMs,
            "the other client's transactions did not both start",
          );
          await sleep(20);
        }
      } finally {
        await admin.end();
      }
      const during = await Promise.all(
        Array.from({ length: 3 }, () => timed(read)),
      );
      await held;
      // Tried again for 5 s, as after the partition above (the crash
      // test's bound for a service back after its database): one try of
      // 10 reads at once failed on a loaded machine, the pool's connections
      // opened again through the pooler (each its own login) past the
      // reads' bound.
      const back = await poolBack(read, 5_000);
      failedInBound(
        during,
        "a read answered while the pooler queued it",
        (ms) => `a queued read took ${ms} ms`,
      );
      assert.ok(
        back < Infinity,
        "reads after the pooler had a server connection again failed for 5 s",
      );
      const cuts = lines.filter((line) => /PostgreSQL sent nothing/.test(line));
      for (const line of cuts) assert.match(line, /pooler's queue/);
    } finally {
      await other.end();
      await service.close();
      await pooler.stop();
    }
  }),
});

Deno.test({
  name:
    "openService() on PostgreSQL: a read cancelled at the bound while the server's address refuses new connections leaves no unhandled rejection (the process goes on)",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    const database = await freshDatabase();
    const relay = await refusingRelay(database.url);
    const answerMs = ANSWER_MS;
    const service = await serviceOn(relay.url);
    const admin = postgres(database.url, { max: 1, onnotice: () => {} });
    const unhandled: string[] = [];
    const onUnhandled = (event: PromiseRejectionEvent) => {
      unhandled.push(String(event.reason));
      event.preventDefault();
    };
    globalThis.addEventListener("unhandledrejection", onUnhandled);
    try {
      const read = await poolOpened(service);
      const { lock } = await lockIntents(admin, 1.5 * answerMs);
      relay.refuse(); // new connections refused from here on
      // Held by the lock past the bound: the store cancels it, and the
      // cancel's connection is refused.
      const during = await timed(read);
      await lock;
      await sleep(300);
      assert.ok(during.failed, "a read answered behind the lock");
      assert.deepEqual(
        unhandled,
        [],
        "an unhandled rejection would end the process",
      );
    } finally {
      globalThis.removeEventListener("unhandledrejection", onUnhandled);
      await admin.end();
      relay.close();
      await service.close();
      await database.drop();
    }
  }),
});
