/**
 * The edges of `answeredSocketOption`'s count of failed rounds (which
 * connects a round counts, what counts as a server that takes the client)
 * and of its held close (ended by the client while held), each checked
 * on the socket itself, with the closes it held read as it chose them
 * (`_held_closes.ts`).
 *
 * @module
 */

import assert from "node:assert/strict";
import net from "node:net";
import process from "node:process";
import type { PostgresSocket } from "../../store/postgres_socket.ts";
import { heldCloses, twoHostsDown } from "./_held_closes.ts";
import { countedConnects } from "./_counted_connects.ts";

/** Resolves once `socket` emitted its close, with whether it had an error, and the errors it emitted. */
function closing(
  socket: PostgresSocket,
): Promise<{ hadError: boolean; errors: Error[] }> {
  const errors: Error[] = [];
  socket.on("error", (error) => errors.push(error));
  return new Promise((resolve) =>
    socket.once("close", (hadError: boolean) => resolve({ hadError, errors }))
  );
}

/** A CancelRequest: its length (16), the code 80877102, a pid and a key. */
function cancelRequest(): Uint8Array {
  const bytes = new Uint8Array(16);
  const view = new DataView(bytes.buffer);
  view.setInt32(0, 16);
  view.setInt32(4, 80877102);
  view.setInt32(8, 4242);
  view.setInt32(12, 1);
  return bytes;
}

Deno.test("answeredSocketOption()'s socket counts no cancel's connection in a round in which every host failed: the round's held close comes at the connect that ends it, not one connect sooner", async () => {
  const { answered, options } = await twoHostsDown();
  try {
    // postgres.js's cancel of a query goes to the host in use: refused,
    // it moves the next connect on to the next host, and counts for no
    // round (a cancel says nothing of whether a host takes the client).
    const cancel = answered.socket(options);
    const cancelled = closing(cancel);
    cancel.write(cancelRequest());
    assert.deepEqual((await cancelled).errors, []);
    // Then the client's connects: the second host, the first (the round
    // both failed: held), the second, the first (held).
    for (let i = 0; i < 4; i++) await closing(answered.socket(options));
    assert.deepEqual(
      answered.holds.map(({ connect, wait }) => [connect, wait]),
      [[3, 50], [5, 100]],
    );
  } finally {
    await answered.socket.closed(5_000);
    answered.restore();
  }
});

Deno.test("answeredSocketOption()'s socket takes a connection the client ended for no sign that the server takes the client, however long it lasted: a round in which every host failed then, its goodbye not yet closed, is held", async () => {
  // A server that answers each connection with a byte.
  const taken: net.Socket[] = [];
  const server = net.createServer((socket) => {
    socket.write("N");
    taken.push(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  const answered = heldCloses(2_000, () => 1);
  try {
    const lasting = answered.socket({ host: ["127.0.0.1"], port: [port] });
    const ended = closing(lasting);
    await new Promise((resolve) => lasting.once("data", resolve));
    lasting.on("data", () => {});
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    // The client ends the connection that lasted 1 s (its idle time, its
    // lifetime), and in the same turns two hosts fail in a row: the
    // refusal of TLS over a Unix socket is the close that comes within
    // them, before the goodbye's socket closed.
    const refused = {
      host: ["127.0.0.1", "127.0.0.1"],
      port: [5432, 5433],
      path: "/run/relayer-no-such-dir/.s.PGSQL.5432",
      ssl: "require",
    };
    lasting.end();
    const first = closing(answered.socket(refused));
    let second: ReturnType<typeof closing> | undefined;
    process.nextTick(() => second = closing(answered.socket(refused)));
    await first;
    await second;
    await ended;
    assert.deepEqual(
      answered.holds.map(({ connect, wait }) => [connect, wait]),
      [[3, 50]],
    );
  } finally {
    for (const socket of taken) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
    await answered.socket.closed(5_000);
    answered.restore();
  }
});

Deno.test("answeredSocketOption()'s socket, ended by the client while its close is held, hands the close on once, with the connect's error and nothing else, and the next connect goes to the next host", async () => {
  const { ports, answered, options } = await twoHostsDown();
  try {
    await closing(answered.socket(options));
    const last = answered.socket(options);
    let closes = 0;
    last.on("close", () => closes++);
    const closed = closing(last);
    await answered.hold(1);
    // The client's end, which ends a socket it finds open.
    assert.equal(last.readyState, "open");
    last.end();
    const { hadError, errors } = await closed;
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(closes, 1);
    assert.equal(hadError, true);
    assert.deepEqual(
      errors.map((error) => (error as { code?: string }).code),
      ["ECONNREFUSED"],
    );
    // The round is over: the next connect goes to the first host again,
    // which fails within the new round, not held.
    const next = answered.socket(options);
    await closing(next);
    assert.equal(next.port, ports[0]);
    assert.equal(answered.holds.length, 1);
  } finally {
    await answered.socket.closed(5_000);
    answered.restore();
  }
});

Deno.test("answeredSocketOption()'s socket refuses TLS over a Unix socket without connecting to it", async () => {
  const connects = countedConnects();
  const answered = heldCloses(2_000, () => 1);
  try {
    const { errors } = await closing(answered.socket({
      host: ["/run/relayer-no-such-dir"],
      port: [5432],
      path: "/run/relayer-no-such-dir/.s.PGSQL.5432",
      ssl: "require",
    }));
    assert.match(errors[0]?.message ?? "", /does not do TLS/);
    assert.equal(connects.count(), 0);
  } finally {
    connects.restore();
    await answered.socket.closed(5_000);
    answered.restore();
  }
});
