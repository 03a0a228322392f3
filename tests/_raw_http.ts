/**
 * An HTTP/1.1 server on a raw loopback socket, for what `Deno.serve`
 * cannot do: drop a kept-alive connection after reading a request whole,
 * before its answer (a restart, a proxy's idle timeout).
 *
 * @module
 */

/** A request as the server read it, whole. */
export interface RawRead {
  /** Which connection carried it, counted from 1. */
  readonly connection: number;
  /** Its request line, such as `POST /send HTTP/1.1`. */
  readonly line: string;
  readonly body: string;
}

/** An answer's status line and JSON body, or `"drop"`: the connection dies unanswered. */
export type RawAnswer =
  | { readonly status: string; readonly body: string }
  | "drop";

/** Closes each of `conns`, passing over any closed already. */
export function closeEach(conns: Iterable<Deno.Conn>): void {
  for (const conn of conns) {
    try {
      conn.close();
    } catch {
      // closed already
    }
  }
}

/**
 * Listens on 127.0.0.1 at a free port and hands each connection, counted
 * from 1, to `serve`; `close()` stops listening and closes every
 * connection still open.
 */
export function loopbackSockets(
  serve: (conn: Deno.Conn, connection: number) => void,
): { readonly url: string; close(): Promise<void> } {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns = new Set<Deno.Conn>();
  const serving = (async () => {
    let connection = 0;
    for await (const conn of listener) {
      conns.add(conn);
      serve(conn, ++connection);
    }
  })();
  return {
    url: `http://127.0.0.1:${listener.addr.port}`,
    async close() {
      listener.close();
      closeEach(conns);
      await serving.catch(() => {});
    },
  };
}

/**
 * Serves on 127.0.0.1 at a free port, answering each request read whole
 * (by its `Content-Length`) with what `answer` gives, the connection kept
 * alive, or dropping it.
 */
export function rawHttpServer(answer: (request: RawRead) => RawAnswer): {
  readonly url: string;
  readonly read: RawRead[];
  close(): Promise<void>;
} {
  const read: RawRead[] = [];
  const serve = async (conn: Deno.Conn, connection: number) => {
    const buffer = new Uint8Array(65536);
    const decoder = new TextDecoder();
    let text = "";
    for (;;) {
      const n = await conn.read(buffer).catch(() => null);
      if (n === null) return;
      text += decoder.decode(buffer.subarray(0, n), { stream: true });
      for (;;) {
        const end = text.indexOf("\r\n\r\n");
        if (end < 0) break;
        const head = text.slice(0, end);
        const length = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? 0);
        if (text.length < end + 4 + length) break;
        const body = text.slice(end + 4, end + 4 + length);
        text = text.slice(end + 4 + length);
        const request = { connection, line: head.split("\r\n")[0]!, body };
        read.push(request);
        const given = answer(request);
        if (given === "drop") {
          conn.close();
          return;
        }
        await conn.write(
          new TextEncoder().encode(
            `HTTP/1.1 ${given.status}\r\ncontent-type: application/json\r\ncontent-length: ${given.body.length}\r\n\r\n${given.body}`,
          ),
        ).catch(() => {});
      }
    }
  };
  const server = loopbackSockets((conn, connection) => {
    void serve(conn, connection);
  });
  return { url: server.url, read, close: () => server.close() };
}
