/**
 * A TCP relay to a PostgreSQL server whose listener can close while the
 * connections opened through it go on: the server's address then refuses
 * new connections (a cancel's among them), as one whose postmaster stopped
 * taking connections in a failover or a restart. It can also reset the
 * connections opened through it (an RST: the client's socket fails with
 * `ECONNRESET`, then closes), as a peer or a middlebox that dropped the
 * connection's state does. Or drop them all at once without a word to the
 * client: each meets an RST on its next write only, as a server host gone
 * in a failover answers the connections it had.
 *
 * @module
 */

import net from "node:net";
import { relayUrl } from "./_relay_url.ts";

/** A relay from {@linkcode refusingRelay}. */
export interface RefusingRelay {
  /** `target` with the relay's port: connect through it. */
  readonly url: string;
  /** Closes the listener: new connections are refused from here on. */
  refuse(): void;
  /** Resets every connection opened through it so far (an RST to the client). */
  reset(): void;
  /**
   * Drops every connection opened through it so far: the server's side
   * ends, and the client's hears nothing until it writes, then gets an
   * RST. Connections opened after pass as ever.
   */
  drop(): void;
  /** Ends every connection opened through the relay, and the listener. */
  close(): void;
}

/** A relay on 127.0.0.1 to the server at `target` (a `postgres://` URL). */
export async function refusingRelay(target: string): Promise<RefusingRelay> {
  const to = new URL(target);
  const sockets: net.Socket[] = [];
  let pairs: [net.Socket, net.Socket][] = [];
  const relay = net.createServer((client) => {
    const upstream = net.connect(Number(to.port), to.hostname);
    sockets.push(client, upstream);
    pairs.push([client, upstream]);
    client.on("error", () => {});
    upstream.on("error", () => {});
    client.pipe(upstream);
    upstream.pipe(client);
  });
  const url = await relayUrl(relay, target);
  return {
    url,
    refuse: () => void relay.close(),
    reset() {
      for (const [i, socket] of sockets.entries()) {
        // The client's side (even places) gets the RST; the server's side
        // is ended as the relay's own.
        if (i % 2 === 0) socket.resetAndDestroy();
        else socket.destroy();
      }
      sockets.length = 0;
      pairs = [];
    },
    drop() {
      for (const [client, upstream] of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        upstream.destroy();
        client.on("data", () => client.resetAndDestroy());
        client.resume();
      }
      pairs = [];
    },
    close() {
      if (relay.listening) relay.close();
      for (const socket of sockets) socket.destroy();
    },
  };
}
