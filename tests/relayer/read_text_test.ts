/**
 * The bounded body read (relayer/_read_text.ts) over a real fetch: a
 * Content-Length header does not bound what fetch delivers when a
 * Transfer-Encoding is also sent (RFC 9112 §6.3: the Content-Length is
 * then ignored; Deno's fetch reads such an answer to the connection's
 * close, and still shows the header). Read whole as "of its declared
 * length", an endless such answer (a broken proxy, a wrong URL) filled the
 * read's deadline with gigabytes, past the cap of HttpSender, googleJwks()
 * and qstashPublisher().
 *
 * @module
 */
import assert from "node:assert/strict";
import { readText } from "../../relayer/_read_text.ts";
import { googleJwks } from "../../webhook/google_jwks.ts";
import { loopbackSockets } from "../_raw_http.ts";

/**
 * A raw HTTP/1.1 server on 127.0.0.1 that answers every request 200 with
 * `Content-Length: 16` and `Transfer-Encoding: identity`, then 1 MiB of
 * JSON whitespace, then holds the connection open: the answer never ends
 * (within the test's bound) and is far over 64 KiB.
 */
function lyingLength() {
  return loopbackSockets(async (conn) => {
    await conn.read(new Uint8Array(65536)).catch(() => null);
    const head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n" +
      "content-length: 16\r\ntransfer-encoding: identity\r\n\r\n";
    await conn.write(new TextEncoder().encode(head)).catch(() => {});
    await conn.write(new Uint8Array(2 ** 20).fill(0x20)).catch(() => {});
  });
}

Deno.test("readText() reads at most its cap of an answer whose Content-Length a Transfer-Encoding overrides, not to its end or the deadline", async () => {
  const server = lyingLength();
  try {
    const response = await fetch(server.url);
    assert.equal(response.headers.get("content-length"), "16");
    const started = performance.now();
    const read = await readText(
      response,
      AbortSignal.timeout(3_000),
      64 * 1024,
    );
    assert.equal(read.truncated, true);
    assert.equal(read.text.length, 64 * 1024);
    assert.ok(performance.now() - started < 2_000, "read to the deadline");
  } finally {
    await server.close();
  }
});

Deno.test("googleJwks() refuses an answer over 64 KiB whose Content-Length a Transfer-Encoding overrides, at the cap, not at the 5 s deadline", async () => {
  const server = lyingLength();
  try {
    const keys = googleJwks({ url: server.url, now: () => 0 });
    const started = performance.now();
    await assert.rejects(
      keys(),
      /Google's keys answer is over 65536 bytes \(64 KiB\)/,
    );
    assert.ok(performance.now() - started < 2_000, "read to the deadline");
  } finally {
    await server.close();
  }
});
