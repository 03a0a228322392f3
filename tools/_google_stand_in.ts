/**
 * Google's key endpoint, stood in for on the network path, for checks that
 * run `main.ts` as shipped (configured by its environment only): the
 * service fetches `GOOGLE_CERTS_URL` exactly as in production (through
 * `googleJwks()`, over TLS, checking the certificate), and two of Deno's
 * own settings route that one request here. `HTTPS_PROXY` names a
 * loopback proxy that tunnels `CONNECT` to Google's host, and only to it,
 * into a TLS server of this process; `DENO_CERT` makes the service trust
 * the throwaway CA that signed its certificate. No product setting is
 * added for tests: Pub/Sub signs its pushes with Google's keys only, and a
 * setting that pointed the verifier elsewhere would be one more way to
 * trust a signer that is not Google.
 *
 * @module
 */

import { GOOGLE_CERTS_URL } from "../webhook/google_jwks.ts";
import { testCertificates } from "../support/test_tls.ts";

/** A running stand-in for Google's key endpoint. */
export interface GoogleStandIn {
  /**
   * The variables to add to the service's environment: `HTTPS_PROXY`
   * (and `https_proxy`), `NO_PROXY` (loopback goes direct), `DENO_CERT`.
   */
  readonly env: Readonly<Record<string, string>>;
  /** How many times the keys were fetched. */
  readonly fetches: number;
  /** When each fetch was answered (`performance.now()`), in order. */
  readonly fetchedAt: readonly number[];
  /**
   * Serves `jwks` from now on, as Google's endpoint does when it rotates
   * its keys: a new key listed beside the old, then the old withdrawn.
   */
  serve(jwks: readonly JsonWebKey[]): void;
  /**
   * What the stand-in refused: a tunnel to another host, a request for
   * another path. Each would mean the service reached for something else
   * through the proxy; a check reports them.
   */
  readonly refused: readonly string[];
  /** Stops the proxy and the TLS server, and removes the certificates. */
  stop(): Promise<void>;
}

/** The variables Deno reads for proxies, in both cases: none leaks in from the caller. */
export const PROXY_SETTINGS: readonly string[] = [
  "HTTP_PROXY",
  "http_proxy",
  "HTTPS_PROXY",
  "https_proxy",
  "ALL_PROXY",
  "all_proxy",
  "NO_PROXY",
  "no_proxy",
  "DENO_CERT",
];

const encoder = new TextEncoder();

/**
 * Starts the stand-in: a CA and a certificate for Google's key host, a TLS
 * server that answers `GET` of the keys' path with `jwks` (cached an hour,
 * as Google says) until {@linkcode GoogleStandIn.serve} changes them, and a
 * loopback `CONNECT` proxy in front.
 *
 * @param jwks The keys to serve first, as Google's endpoint lists them.
 * @returns The stand-in, and the environment that routes the service to it.
 * @throws {Error} If `openssl` is missing or fails.
 */
export async function startGoogleStandIn(
  jwks: readonly JsonWebKey[],
): Promise<GoogleStandIn> {
  const target = new URL(GOOGLE_CERTS_URL);
  const authority = `${target.hostname}:${target.port || "443"}`;
  const certs = await testCertificates([target.hostname]);
  let served = jwks;
  const fetchedAt: number[] = [];
  const refused: string[] = [];
  const tls = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    cert: certs.cert,
    key: certs.key,
    onListen() {},
  }, (request) => {
    const url = new URL(request.url);
    if (request.method !== "GET" || url.pathname !== target.pathname) {
      refused.push(`${request.method} ${url.pathname}`);
      return Response.json({ error: "not found" }, { status: 404 });
    }
    fetchedAt.push(performance.now());
    return Response.json({ keys: served }, {
      headers: { "cache-control": "public, max-age=3600" },
    });
  });

  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns = new Set<Deno.Conn>();
  const tunnel = async (conn: Deno.Conn) => {
    conns.add(conn);
    try {
      // The request head: `CONNECT host:port HTTP/1.1`, headers, a blank line.
      let head = new Uint8Array(0);
      let end = -1;
      while (end < 0) {
        const chunk = new Uint8Array(4096);
        const n = await conn.read(chunk);
        if (n === null || head.length > 16_384) return;
        head = new Uint8Array([...head, ...chunk.subarray(0, n)]);
        end = new TextDecoder().decode(head).indexOf("\r\n\r\n");
      }
      const line = new TextDecoder().decode(head).split("\r\n")[0] ?? "";
      const [method, where] = line.split(" ");
      if (method !== "CONNECT" || where !== authority) {
        refused.push(line.slice(0, 200));
        await conn.write(
          encoder.encode("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"),
        );
        return;
      }
      const server = await Deno.connect({
        hostname: "127.0.0.1",
        port: tls.addr.port,
      });
      conns.add(server);
      await conn.write(
        encoder.encode("HTTP/1.1 200 Connection established\r\n\r\n"),
      );
      // Bytes the client sent after the head already belong to the tunnel.
      const rest = head.subarray(end + 4);
      if (rest.length > 0) await server.write(rest);
      await Promise.all([
        conn.readable.pipeTo(server.writable).catch(() => {}),
        server.readable.pipeTo(conn.writable).catch(() => {}),
      ]);
      conns.delete(server);
    } catch {
      // the service died under the tunnel (a kill)
    } finally {
      conns.delete(conn);
      try {
        conn.close();
      } catch {
        // closed by the pipe
      }
    }
  };
  const accepting = (async () => {
    for await (const conn of listener) void tunnel(conn);
  })().catch(() => {});

  const proxy = `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`;
  return {
    env: {
      HTTPS_PROXY: proxy,
      https_proxy: proxy,
      NO_PROXY: "127.0.0.1,localhost",
      no_proxy: "127.0.0.1,localhost",
      DENO_CERT: certs.caFile,
    },
    get fetches() {
      return fetchedAt.length;
    },
    fetchedAt,
    serve(jwks) {
      served = jwks;
    },
    refused,
    async stop() {
      listener.close();
      for (const conn of conns) {
        try {
          conn.close();
        } catch {
          // already closed
        }
      }
      await accepting;
      await tls.shutdown();
      await certs.remove().catch(() => {});
    },
  };
}
