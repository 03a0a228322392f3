/**
 * A TCP relay to a PostgreSQL server that, once armed, sends the next
 * ReadyForQuery it relays to the client twice, in one chunk. To
 * postgres.js the second reads as the answer of a query it had sent ahead
 * on that connection, read before the microtasks queued by the first: the
 * ordering Deno's `node:net` allows when a socket's next chunk is emitted
 * before them. The server's session is untouched.
 *
 * @module
 */

import net from "node:net";
import { Buffer } from "node:buffer";
import { relayUrl } from "../_relay_url.ts";

/** A relay from {@linkcode readyAgainRelay}. */
export interface ReadyAgainRelay {
  /** `target` with the relay's port: connect through it. */
  readonly url: string;
  /**
   * The next ReadyForQuery from the server goes to the client twice; with
   * `after`, the next once the client sent a chunk holding `after` (a
   * query's text), on any connection.
   */
  arm(after?: string): void;
  /** How many ReadyForQuery messages were sent twice so far. */
  readonly repeated: number;
  /** Ends every connection opened through the relay, and the listener. */
  close(): void;
}

/** A relay on 127.0.0.1 to the server at `target` (a `postgres://` URL). */
export async function readyAgainRelay(
  target: string,
): Promise<ReadyAgainRelay> {
  const to = new URL(target);
  const sockets: net.Socket[] = [];
  let armed = false;
  let after: string | undefined;
  let repeated = 0;
  const relay = net.createServer((client) => {
    const upstream = net.connect(Number(to.port), to.hostname);
    sockets.push(client, upstream);
    client.on("error", () => {});
    upstream.on("error", () => {});
    client.on("data", (chunk: Buffer) => {
      if (after !== undefined && chunk.toString("latin1").includes(after)) {
        after = undefined;
        armed = true;
      }
      upstream.write(chunk);
    });
    client.on("end", () => upstream.end());
    // The server's messages, whole: a type byte, then a length that
    // counts itself. The first, the answer to an SSL request, has none,
    // and postgres.js sends none without `ssl`.
    let pending = Buffer.alloc(0);
    upstream.on("data", (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      const out: Buffer[] = [];
      while (pending.length >= 5) {
        const length = pending.readUInt32BE(1) + 1;
        if (pending.length < length) break;
        const message = pending.subarray(0, length);
        out.push(message);
        if (armed && message[0] === 0x5a) { // 'Z'
          armed = false;
          repeated++;
          out.push(message);
        }
        pending = pending.subarray(length);
      }
      if (out.length > 0) client.write(Buffer.concat(out));
    });
    upstream.on("end", () => client.end());
  });
  const url = await relayUrl(relay, target);
  return {
    url,
    arm(text?: string) {
      if (text === undefined) armed = true;
      else after = text;
    },
    get repeated() {
      return repeated;
    },
    close() {
      if (relay.listening) relay.close();
      for (const socket of sockets) socket.destroy();
    },
  };
}
