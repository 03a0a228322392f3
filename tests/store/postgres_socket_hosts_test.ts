/**
 * A client given several hosts (`postgres://…@a:5432,b:5432/db`) tries the
 * next when one does not answer: postgres.js 3.4.9 moves to the next host
 * at each connect of its own socket, but with a `socket` option it opens
 * none of its own, and it swallows a connect error while another host is
 * listed. `answeredSocketOption`'s socket, which opened the first host
 * only, left every query waiting for good where that host was down. It
 * goes to the listed hosts in turn, as postgres.js does.
 *
 * @module
 */

import assert from "node:assert/strict";
import net from "node:net";
import postgres from "postgres";
import { answeredSocketOption } from "../../store/postgres_socket.ts";
import { postgresAvailable, postgresUrl } from "../_postgres.ts";

/** A loopback port nothing listens on (a host that is down: refused). */
async function downPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
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
    for (const given of [false, true]) {
      const answered = answeredSocketOption(5_000);
      const sql = postgres(twoHosts, {
        max: 1,
        onnotice: () => {},
        max_lifetime: null,
        ...(given ? answered : {}),
      } as postgres.Options<Record<string, never>>);
      try {
        assert.equal(
          await selectOne(sql, 5_000),
          "one: 1",
          given ? "with answeredSocketOption" : "plain",
        );
      } finally {
        await sql.end({ timeout: 0 });
        await answered.socket.closed(5_000);
      }
    }
  },
});
