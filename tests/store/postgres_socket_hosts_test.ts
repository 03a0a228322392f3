/**
 * A client given several hosts (`postgres://…@a:5432,b:5432/db`) tries the
 * next when one does not answer: postgres.js 3.4.9 moves to the next host
 * at each connect of its own socket, but with a `socket` option it opens
 * none of its own, and it swallows a connect error while another host is
 * listed. `answeredSocketOption`'s socket, which opened the first host
 * only, left every query waiting for good where that host was down. It
 * moves to the next host once a connect fails, and a first host that
 * answers keeps every connection.
 *
 * @module
 */

import assert from "node:assert/strict";
import net from "node:net";
import postgres from "postgres";
import { answeredSocketOption } from "../../store/postgres_socket.ts";
import { postgresAvailable, postgresUrl } from "../_postgres.ts";
import { downPort } from "./_down_port.ts";

/**
 * A loopback port whose connects never complete (a host whose address
 * drops packets: a failover's old primary): a listener that accepts none,
 * its queue filled, so the system answers no further connect.
 */
async function blackHolePort(): Promise<{ port: number; close(): void }> {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  const filling: net.Socket[] = [];
  // Batches until one connect of a batch hangs (512 on Linux's defaults).
  for (let hung = false; !hung && filling.length < 8192;) {
    const batch = Array.from({ length: 64 }, () => {
      const socket = net.connect(port, "127.0.0.1");
      socket.on("error", () => {});
      filling.push(socket);
      return new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(true), 300);
        socket.once("connect", () => {
          clearTimeout(timer);
          resolve(false);
        });
      });
    });
    hung = (await Promise.all(batch)).includes(true);
  }
  return {
    port,
    close() {
      for (const socket of filling) socket.destroy();
      listener.close();
    },
  };
}

/**
 * A loopback host that takes connections and never says a word: `taken`
 * holds the connections it took.
 */
function silentHost(): {
  port: number;
  taken: Deno.Conn[];
  close(): Promise<void>;
} {
  const silent = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const taken: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const conn of silent) taken.push(conn);
  })();
  return {
    port: (silent.addr as Deno.NetAddr).port,
    taken,
    async close() {
      silent.close();
      await accepting.catch(() => {});
      for (const conn of taken) conn.close();
    },
  };
}

/**
 * Runs `check` on a client of `href` given `options`, plain and then with
 * answeredSocketOption(`ms`); `check` gets the one or the other's name.
 */
async function plainThenAnswered(
  href: string,
  ms: number,
  options: postgres.Options<Record<string, never>>,
  check: (sql: postgres.Sql, what: string) => Promise<void>,
): Promise<void> {
  for (const given of [false, true]) {
    const answered = answeredSocketOption(ms);
    const sql = postgres(href, {
      ...options,
      onnotice: () => {},
      max_lifetime: null,
      ...(given ? answered : {}),
    } as postgres.Options<Record<string, never>>);
    try {
      await check(sql, given ? "with answeredSocketOption" : "plain");
    } finally {
      await sql.end({ timeout: 0 });
      await answered.socket.closed(5_000);
    }
  }
}

/**
 * Runs `check` as {@linkcode plainThenAnswered} does (a 1 s bound, one
 * connection, postgres.js's connect timeout 2 s) on two hosts: `first`,
 * which never answers, then this run's server; closes `first` after.
 */
async function afterUnanswering(
  first: { port: number; close(): unknown },
  check: (sql: postgres.Sql, what: string) => Promise<void>,
): Promise<void> {
  try {
    const url = new URL(await postgresUrl());
    const hosts = `127.0.0.1:${first.port},${url.host}`;
    await plainThenAnswered(
      url.href.replace(url.host, hosts),
      1_000,
      { max: 1, connect_timeout: 2 },
      check,
    );
  } finally {
    await first.close();
  }
}

/**
 * Runs `body` on a client given answeredSocketOption and two hosts, this
 * run's server first and a {@linkcode silentHost} second, with `options`;
 * then checks that no connection went to the second host.
 */
async function withSilentSecond(
  url: URL,
  options: postgres.Options<Record<string, never>>,
  body: (sql: postgres.Sql) => Promise<void>,
): Promise<void> {
  const silent = silentHost();
  const hosts = `${url.host},127.0.0.1:${silent.port}`;
  const answered = answeredSocketOption(5_000);
  const sql = postgres(url.href.replace(url.host, hosts), {
    ...options,
    onnotice: () => {},
    max_lifetime: null,
    ...answered,
  } as postgres.Options<Record<string, never>>);
  try {
    await body(sql);
    assert.equal(
      silent.taken.length,
      0,
      "connections sent to the second host",
    );
  } finally {
    await sql.end({ timeout: 0 });
    await answered.socket.closed(5_000);
    await silent.close();
  }
}

/** What `sql\`SELECT 1\`` gave within `ms`. */
async function selectOne(sql: postgres.Sql, ms: number): Promise<string> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      sql`SELECT 1 AS one`.then(
        (rows) => `one: ${rows[0]?.one}`,
        (error) => `failed: ${(error as Error).message}`,
      ),
      new Promise<string>((resolve) => {
        timer = setTimeout(() => resolve(`no answer within ${ms} ms`), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

Deno.test({
  name:
    "a client given answeredSocketOption and two hosts, the first down, answers from the second, as a plain client does",
  ignore: !postgresAvailable,
  async fn() {
    const url = new URL(await postgresUrl());
    // The first host refuses; the second is this run's server.
    const hosts = `127.0.0.1:${await downPort()},${url.host}`;
    const twoHosts = url.href.replace(url.host, hosts);
    await plainThenAnswered(twoHosts, 5_000, { max: 1 }, async (sql, what) => {
      assert.equal(await selectOne(sql, 5_000), "one: 1", what);
    });
  },
});

Deno.test({
  name:
    "a client given answeredSocketOption and two hosts, the first up, keeps every connection on the first, after the server ended them too: a second host that never answers gets none",
  ignore: !postgresAvailable,
  async fn() {
    const url = new URL(await postgresUrl());
    // The second host takes connections and never says a word (a standby
    // behind a balancer that hangs, say): a connection sent there waits.
    await withSilentSecond(url, {
      max: 3,
      connection: { application_name: "hosts_test" },
    }, async (sql) => {
      // Three at once: the pool opens three connections.
      const answers = await Promise.all(
        [0, 1, 2].map(() => selectOne(sql, 3_000)),
      );
      assert.deepEqual(answers, ["one: 1", "one: 1", "one: 1"]);
      // The server ends those connections (an administrator's
      // pg_terminate_backend, a restart): they had connected, so the next
      // go to the first host again.
      const admin = postgres(url.href, { max: 1, onnotice: () => {} });
      try {
        await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE application_name = 'hosts_test'`;
      } finally {
        await admin.end({ timeout: 0 });
      }
      // The client hears each end (an error, then the server's close).
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.deepEqual(
        await Promise.all([0, 1, 2].map(() => selectOne(sql, 3_000))),
        ["one: 1", "one: 1", "one: 1"],
      );
    });
  },
});

Deno.test({
  name:
    "a client given answeredSocketOption and two hosts, the first taking connections and never answering, answers from the second, as a plain client does",
  ignore: !postgresAvailable,
  async fn() {
    // The first host takes connections and never says a word (a server
    // hung, or a proxy whose database hangs): postgres.js 3.4.9's own
    // socket fails the connect at `connect_timeout` and moves to the next
    // host. The socket, on a close with nothing heard, stayed on it, and
    // every query waited for good.
    await afterUnanswering(silentHost(), async (sql, what) => {
      // The first query may fail as its connect timed out; the next goes
      // to the second host.
      const answers = [await selectOne(sql, 5_000)];
      if (answers[0] !== "one: 1") {
        answers.push(await selectOne(sql, 5_000));
      }
      assert.equal(answers.at(-1), "one: 1", `${what}: ${answers}`);
    });
  },
});

Deno.test({
  name:
    "a client given answeredSocketOption and two hosts without target_session_attrs, the first up, keeps to the first after its connections end for their idle time",
  ignore: !postgresAvailable,
  async fn() {
    const url = new URL(await postgresUrl());
    // A second host that takes connections and never says a word: a
    // connection sent there waits.
    await withSilentSecond(url, { max: 2, idle_timeout: 1 }, async (sql) => {
      for (let round = 0; round < 2; round++) {
        const answers = await Promise.all(
          [0, 1].map(() => selectOne(sql, 3_000)),
        );
        assert.deepEqual(answers, ["one: 1", "one: 1"], `round ${round}`);
        // Both connections end for their idle time (1 s): ended by the
        // client, not under target_session_attrs.
        await new Promise((resolve) => setTimeout(resolve, 1_600));
      }
    });
  },
});

Deno.test("answeredSocketOption's socket names the host it connects to (postgres.js names it to TLS: SNI, the certificate check): the second, once the first refused", async () => {
  const down = await downPort();
  const server = net.createServer((conn) => conn.end());
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  const answered = answeredSocketOption(5_000);
  const options = { host: ["127.0.0.1", "localhost"], port: [down, port] };
  try {
    const first = answered.socket(options);
    assert.equal(first.host, "127.0.0.1");
    await new Promise((resolve) => first.once("close", resolve));
    const second = answered.socket(options);
    assert.equal(second.host, "localhost");
    second.destroy();
    await answered.socket.closed(5_000);
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
});

Deno.test({
  name:
    "a client given answeredSocketOption and two hosts, the first dropping every connect, answers from the second after postgres.js's connect timeout, as a plain client does",
  ignore: !postgresAvailable,
  async fn() {
    await afterUnanswering(await blackHolePort(), async (sql, what) => {
      // The first query may fail with the first host's connect (a plain
      // client's fails CONNECT_TIMEOUT); the next is answered.
      const answers = [
        await selectOne(sql, 6_000),
        await selectOne(sql, 6_000),
      ];
      assert.ok(answers.includes("one: 1"), `${what}: ${answers}`);
    });
  },
});
