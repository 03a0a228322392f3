/**
 * A KV Connect metadata endpoint that refuses, quoting the request's
 * `Authorization` header in its answer, as some proxies and servers do:
 * what must never reach a log line or an error with the access token.
 *
 * @module
 */

/**
 * A KV Connect metadata answer (protocol version 2) for a database whose
 * data path is `/data` on the same server, its token good for an hour.
 */
export function kvMetadata(expiresInMs = 3_600_000): Response {
  return Response.json({
    version: 2,
    databaseId: "a1b2c3d4-e5f6-4a8b-9c1d-2e3f4a5b6c7d",
    endpoints: [{ url: "/data", consistency: "strong" }],
    token: "data-path-token",
    expiresAt: new Date(Date.now() + expiresInMs).toISOString(),
  });
}

/**
 * An answer only once the caller is gone (a 504 then, so the server can
 * shut down): a request that never hears back.
 */
function untilGone(req: Request): Promise<Response> {
  return new Promise<Response>((resolve) => {
    const gone = () => resolve(new Response(null, { status: 504 }));
    if (req.signal.aborted) gone();
    else req.signal.addEventListener("abort", gone, { once: true });
  });
}

/**
 * Serves on 127.0.0.1 at a free port a KV Connect endpoint whose metadata
 * URL, `http://127.0.0.1:<port>/kv`, answers {@linkcode kvMetadata}, and
 * whose every other path `data` answers.
 */
function serveKvConnect(
  data: (req: Request, path: string) => Response | Promise<Response>,
): Deno.HttpServer<Deno.NetAddr> {
  return Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    (req) => {
      const path = new URL(req.url).pathname;
      return path === "/kv" ? kvMetadata() : data(req, path);
    },
  );
}

/** A 401 whose text quotes the request's `Authorization` header. */
export function echoedRefusal(req: Request): Response {
  return new Response(
    `unauthorized: you sent ${req.headers.get("authorization")}`,
    { status: 401 },
  );
}

/** Serves {@linkcode echoedRefusal} on 127.0.0.1 at a free port. */
export function refusingMetadata(): Deno.HttpServer<Deno.NetAddr> {
  return Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    echoedRefusal,
  );
}

/**
 * A KV Connect endpoint whose metadata exchange succeeds and whose data
 * path refuses every read with a 403, as a database assigned but not
 * connected could: Deno opens it (Deno 2.5 opens any URL without a
 * request) and fails the first read. Serves on 127.0.0.1 at a free port;
 * its metadata URL is `http://127.0.0.1:<port>/kv`.
 */
export function readRefusingKv(): Deno.HttpServer<Deno.NetAddr> {
  return serveKvConnect(() =>
    new Response("this database is not connected", { status: 403 })
  );
}

/**
 * A KV Connect endpoint whose metadata exchange succeeds and whose data
 * path refuses every call with {@linkcode echoedRefusal}: the refusal
 * quotes the data-path token the metadata gave (`data-path-token`), a
 * credential to the database until the metadata expires. Serves on
 * 127.0.0.1 at a free port; its metadata URL is
 * `http://127.0.0.1:<port>/kv`.
 */
export function dataEchoingKv(): Deno.HttpServer<Deno.NetAddr> {
  return serveKvConnect(echoedRefusal);
}

/**
 * A KV Connect endpoint whose metadata exchange succeeds and whose data
 * path never answers a read (it answers only once the caller is gone, so
 * the server can shut down), as a database behind a stalled network could.
 * Serves on 127.0.0.1 at a free port; its metadata URL is
 * `http://127.0.0.1:<port>/kv`.
 */
export function silentKv(): Deno.HttpServer<Deno.NetAddr> {
  return serveKvConnect(untilGone);
}

/**
 * A KV Connect endpoint that answers: its metadata exchange succeeds, each
 * read finds nothing (one empty range for each range asked, strongly
 * consistent) and each write succeeds. Enough for a service to open it and
 * start; it keeps no data. Serves on 127.0.0.1 at a free port; its metadata
 * URL is `http://127.0.0.1:<port>/kv`.
 */
export function emptyKv(): Deno.HttpServer<Deno.NetAddr> {
  return serveKvConnect(emptyData);
}

/**
 * {@linkcode emptyKv} whose metadata lasts a second, so that Deno fetches
 * it again at the next call after one, until `revoke()`: from then on the
 * metadata endpoint answers {@linkcode echoedRefusal}, as one whose access
 * token was revoked or rotated under a running service does.
 */
export function revocableKv(): {
  server: Deno.HttpServer<Deno.NetAddr>;
  revoke(): void;
} {
  let revoked = false;
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    (req) => {
      const path = new URL(req.url).pathname;
      if (path !== "/kv") return emptyData(req, path);
      return revoked ? echoedRefusal(req) : kvMetadata(1_000);
    },
  );
  return { server, revoke: () => (revoked = true) };
}

/** The data path of {@linkcode emptyKv}. */
async function emptyData(req: Request, path: string): Promise<Response> {
  const body = new Uint8Array(await req.arrayBuffer());
  if (path === "/data/snapshot_read") {
    // SnapshotRead: field 1 (ranges), each length-delimited.
    const out: number[] = [];
    for (let i = 0; i < body.length;) {
      i++; // the tag
      let length = 0;
      for (let shift = 0;; shift += 7) {
        const byte = body[i++]!;
        length |= (byte & 0x7f) << shift;
        if ((byte & 0x80) === 0) break;
      }
      i += length;
      out.push(0x0a, 0x00); // ranges: an empty ReadRangeOutput
    }
    // read_is_strongly_consistent: true; status: SR_SUCCESS.
    out.push(0x20, 0x01, 0x40, 0x01);
    return new Response(new Uint8Array(out));
  }
  if (path === "/data/atomic_write") {
    // status: AW_SUCCESS; versionstamp: 10 bytes.
    return new Response(
      new Uint8Array([0x08, 0x01, 0x12, 10, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0]),
    );
  }
  return new Response("not a KV Connect path", { status: 404 });
}

/**
 * A KV Connect metadata endpoint that never answers (it answers only once
 * the caller is gone, so the server can shut down): Deno ≥ 2.9 asks it as
 * the database is opened (2.9.0 was the first seen to; 2.8.3 did not), Deno
 * 2.5 to 2.8 once the opening resolved. Serves on 127.0.0.1 at
 * a free port; its metadata URL is `http://127.0.0.1:<port>/kv`.
 */
export function silentMetadata(): Deno.HttpServer<Deno.NetAddr> {
  return Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    untilGone,
  );
}
