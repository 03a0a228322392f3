/**
 * A TCP relay on 127.0.0.1 between a client and PostgreSQL that can cut
 * the network as a partition does: no FIN, no RST, no error, the packets
 * of both directions dropped. `partition()` stops forwarding on every
 * connection open through it and keeps their sockets open; a connection
 * made during the partition is accepted and never forwarded. `heal()`
 * forwards new connections again; the ones the partition caught stay
 * silent for good, as those to a primary whose address stopped answering
 * (a failover) or past TCP's retransmissions do.
 *
 * @module
 */

import net from "node:net";

/** A relay that can black-hole its connections (see the module). */
export interface PartitionProxy {
  /** The port it listens on, on 127.0.0.1. */
  readonly port: number;
  /** `url` with its host and port replaced by the relay's. */
  via(url: string): string;
  /** Drops every byte of every open connection and of each new one. */
  partition(): void;
  /**
   * Drops the server's answers on every open connection while the
   * client's bytes still reach it (a partition that fell just after a
   * `COMMIT` went out: it lands, and its answer is lost), and every byte
   * of each new connection; `partition()` then drops both ways.
   */
  loseAnswers(): void;
  /** Forwards new connections again (the partitioned ones stay silent). */
  heal(): void;
  /** How many client connections it holds open now. */
  open(): number;
  /** How many client connections it accepted in all. */
  accepted(): number;
  /** Closes every connection and the listener. */
  close(): Promise<void>;
}

/** A client's connection through the relay, and its way to the server. */
interface Pair {
  client: net.Socket;
  upstream?: net.Socket;
  /** Nothing forwarded either way, for good. */
  silent: boolean;
  /** The server's answers dropped. */
  deaf?: boolean;
}

/** Starts a relay to `host:port` (a server of `support/postgres_server.ts`). */
export async function partitionProxy(
  target: { hostname: string; port: number },
): Promise<PartitionProxy> {
  let cut = false;
  let accepted = 0;
  const pairs = new Set<
    Pair
  >();
  const server = net.createServer((client) => {
    accepted++;
    const pair: Pair = {
      client,
      silent: cut,
    };
    pairs.add(pair);
    client.on("error", () => {});
    client.on("close", () => {
      pairs.delete(pair);
      if (!pair.silent) pair.upstream?.destroy();
    });
    if (pair.silent) {
      client.on("data", () => {}); // read and dropped
      return;
    }
    const upstream = net.connect(target.port, target.hostname);
    pair.upstream = upstream;
    upstream.on("error", () => {});
    upstream.on("close", () => {
      if (!pair.silent) client.destroy();
    });
    client.on("data", (bytes) => {
      if (!pair.silent) upstream.write(bytes);
    });
    upstream.on("data", (bytes) => {
      if (!pair.silent && !pair.deaf) client.write(bytes);
    });
  });
  await new Promise<void>((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve())
  );
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    via(url) {
      const relayed = new URL(url);
      relayed.hostname = "127.0.0.1";
      relayed.port = String(port);
      return relayed.href;
    },
    partition() {
      cut = true;
      for (const pair of pairs) pair.silent = true;
    },
    loseAnswers() {
      cut = true;
      for (const pair of pairs) pair.deaf = true;
    },
    heal() {
      cut = false;
    },
    open: () => pairs.size,
    accepted: () => accepted,
    async close() {
      for (const pair of pairs) {
        pair.client.destroy();
        pair.upstream?.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
