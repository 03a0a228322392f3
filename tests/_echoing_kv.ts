/**
 * A KV Connect metadata endpoint that refuses, quoting the request's
 * `Authorization` header in its answer, as some proxies and servers do:
 * what must never reach a log line or an error with the access token.
 *
 * @module
 */

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
