/**
 * A network partition on 127.0.0.1, for the tests of a client's pool
 * across one (store/postgres_partition_pool_test.ts,
 * store/postgres_closed_partition_test.ts, _docs_service.ts).
 *
 * @module
 */

import net from "node:net";
import { relayUrl } from "./_relay_url.ts";

/**
 * A relay to `target` whose `hole()` stops forwarding and reading both
 * ways on every connection, its sockets left open, and accepts new ones
 * without forwarding them; `replace()` forwards new connections again
 * (the held ones stay silent). Once `arm()`ed, it holes by itself on the
 * first connection whose server answers an ErrorResponse: it forwards the
 * answers up to the ReadyForQuery after it, then nothing more.
 */
export async function blackHole(target: string) {
  const sockets = new Set<net.Socket>();
  const held = new Set<net.Socket>();
  let holding = false;
  let armed = false;
  const hold = (socket: net.Socket) => {
    socket.pause();
    held.add(socket);
  };
  const hole = () => {
    holding = true;
    for (const socket of sockets) hold(socket);
  };
  const relay = net.createServer((client) => {
    client.on("error", () => {});
    sockets.add(client);
    if (holding) return hold(client);
    const { hostname, port } = new URL(target);
    const server = net.connect(Number(port), hostname);
    sockets.add(server);
    server.on("error", () => {});
    server.on("close", () => client.destroy());
    client.on("close", () => server.destroy());
    client.on("data", (bytes: Uint8Array) => {
      if (!held.has(client)) server.write(bytes);
    });
    // Armed: the server's messages (a type byte, then a length counting
    // itself) are read whole, across chunks, up to the ReadyForQuery
    // ('Z') after an ErrorResponse ('E').
    let pending = new Uint8Array(0);
    let failed = false;
    server.on("data", (bytes: Uint8Array) => {
      if (held.has(server)) return;
      if (!armed) return void client.write(bytes);
      const all = new Uint8Array(pending.length + bytes.length);
      all.set(pending);
      all.set(bytes, pending.length);
      let at = 0;
      while (at + 5 <= all.length) {
        const end = at + 1 + new DataView(all.buffer, at + 1, 4).getUint32(0);
        if (end > all.length) break;
        failed ||= all[at] === 0x45; // 'E'
        if (all[at] === 0x5a && failed) { // 'Z'
          client.write(all.subarray(pending.length, end));
          armed = false;
          return hole();
        }
        at = end;
      }
      client.write(bytes);
      pending = all.subarray(at);
    });
  });
  return {
    url: await relayUrl(relay, target),
    hole,
    arm: () => void (armed = true),
    replace: () => void (holding = false),
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        relay.close(() => resolve());
      }),
  };
}
