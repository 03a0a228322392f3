/**
 * Which host `answeredSocket` opens, told apart without a server: three
 * loopback listeners stand for the client's hosts, and the sockets are
 * made and ended by hand, in an order a pool of several connections can
 * take (`tests/store/postgres_standby_pool_test.ts` runs real servers).
 *
 * @module
 */

import assert from "node:assert/strict";
import net from "node:net";
import { answeredSocket } from "../../store/_postgres_socket.ts";

/** Loopback listeners that count the connections each took, and close those that write a CancelRequest. */
async function listeners(n: number) {
  const taken: number[] = Array(n).fill(0);
  const servers: net.Server[] = [];
  const conns: net.Socket[] = [];
  const ports: number[] = [];
  for (let i = 0; i < n; i++) {
    const server = net.createServer((conn) => {
      taken[i]!++;
      conns.push(conn);
      conn.on("error", () => {});
      // A CancelRequest is closed without a word, as PostgreSQL does.
      conn.on("data", (bytes) => {
        if (bytes.length === 16) conn.end();
      });
    });
    await new Promise<void>((resolve) =>
      server.listen(0, "127.0.0.1", resolve)
    );
    servers.push(server);
    ports.push((server.address() as net.AddressInfo).port);
  }
  return {
    taken,
    ports,
    async close() {
      for (const conn of conns) conn.destroy();
      await Promise.all(
        servers.map((server) =>
          new Promise((resolve) => server.close(resolve))
        ),
      );
    },
  };
}

/** Waits until `taken` sums to `n`. */
async function accepted(taken: number[], n: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (taken.reduce((a, b) => a + b, 0) >= n) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`${n} connections not taken: ${taken}`);
}

/** Ends `socket` as postgres.js does (its goodbye, then the end), and waits for its close. */
async function ended(socket: net.Socket | import("node:stream").Duplex) {
  const closed = new Promise((resolve) => socket.once("close", resolve));
  socket.end(new Uint8Array([88, 0, 0, 0, 4]));
  await closed;
}

Deno.test("answeredSocket under target_session_attrs: a connection to the first host the client ends late, after the next host failed, does not send the next connection back to that host", async () => {
  const hosts = await listeners(3);
  const make = answeredSocket(5_000);
  const options = {
    host: ["127.0.0.1", "127.0.0.1", "127.0.0.1"],
    port: hosts.ports,
    target_session_attrs: "primary",
  };
  try {
    // Two connections at once, to the first host (a standby).
    const a = make(options);
    const b = make(options);
    await accepted(hosts.taken, 2);
    assert.deepEqual(hosts.taken, [2, 0, 0]);
    // The client ends the first (a standby): the next goes to the second
    // host, which the client ends too (a standby again, say).
    await ended(a);
    const c = make(options);
    await accepted(hosts.taken, 3);
    assert.deepEqual(hosts.taken, [2, 1, 0]);
    await ended(c);
    // The other connection to the first host ends late: the next
    // connection goes on to the third host, not back to the second.
    await ended(b);
    const d = make(options);
    await accepted(hosts.taken, 4);
    assert.deepEqual(hosts.taken, [2, 1, 1]);
    await ended(d);
  } finally {
    await make.closed(5_000);
    await hosts.close();
  }
});

Deno.test("answeredSocket: a query's cancel, whose connection the server closes without a word, does not move the next connection to the next host", async () => {
  const hosts = await listeners(2);
  const make = answeredSocket(5_000);
  const options = {
    host: ["127.0.0.1", "127.0.0.1"],
    port: hosts.ports,
  };
  try {
    // postgres.js's cancel: its own connection, one CancelRequest.
    const cancel = make(options);
    const closed = new Promise((resolve) => cancel.once("close", resolve));
    const request = new Uint8Array(16);
    new DataView(request.buffer).setInt32(0, 16);
    new DataView(request.buffer).setInt32(4, 80877102);
    cancel.write(request);
    await closed;
    const next = make(options);
    await accepted(hosts.taken, 2);
    assert.deepEqual(hosts.taken, [2, 0]);
    await ended(next);
  } finally {
    await make.closed(5_000);
    await hosts.close();
  }
});
