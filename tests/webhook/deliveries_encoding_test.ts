/**
 * A generic delivery signed over bytes the route does not read as JSON
 * text (compressed, or UTF-16): refused 400 as any unreadable body is,
 * with nothing written, and its detail says what was wrong and what to
 * send instead, not only "not JSON".
 *
 * @module
 */

import assert from "node:assert/strict";
import { hmacSignature } from "../../webhook/_auth.ts";
import { makeApp, NOW, SECRET } from "./_app.ts";

const delivery = JSON.stringify({
  job: { intentId: "pi_0001", kind: "settle" },
  delivery: 1,
});
const EXAMPLE =
  `{"job":{"intentId":"pi_0001","kind":"settle"},"delivery":1,"messageId":"m-1"} ('delivery' and 'messageId' are optional)`;

/** A signed POST of `bytes` to /v1/deliveries, with `headers`. */
function signed(
  bytes: Uint8Array,
  headers: Record<string, string>,
): RequestInit {
  return {
    method: "POST",
    body: bytes as Uint8Array<ArrayBuffer>,
    headers: {
      "x-signature": hmacSignature(SECRET, bytes, Math.floor(NOW / 1000)),
      ...headers,
    },
  };
}

async function gzip(text: string): Promise<Uint8Array> {
  const stream = new Blob([text]).stream().pipeThrough(
    new CompressionStream("gzip"),
  );
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** `text` as UTF-16 little-endian, with its byte order mark if `bom`. */
function utf16le(text: string, bom: boolean): Uint8Array {
  const bytes = new Uint8Array((bom ? 2 : 0) + text.length * 2);
  const view = new DataView(bytes.buffer);
  if (bom) view.setUint16(0, 0xfeff, true);
  for (let i = 0; i < text.length; i++) {
    view.setUint16((bom ? 2 : 0) + i * 2, text.charCodeAt(i), true);
  }
  return bytes;
}

/** `text` as UTF-16 big-endian, with its byte order mark. */
function utf16be(text: string): Uint8Array {
  const bytes = new Uint8Array(2 + text.length * 2);
  const view = new DataView(bytes.buffer);
  view.setUint16(0, 0xfeff, false);
  for (let i = 0; i < text.length; i++) {
    view.setUint16(2 + i * 2, text.charCodeAt(i), false);
  }
  return bytes;
}

async function refusal(init: RequestInit): Promise<string> {
  const { app, writes } = await makeApp({
    intents: [{ id: "pi_0001", state: "created" }],
  });
  const res = await app.request("/v1/deliveries", init);
  const body = await res.json();
  assert.equal(res.status, 400, JSON.stringify(body));
  assert.equal(body.type, "urn:relayer:problem:bad-job");
  assert.equal(writes(), 0);
  return body.detail;
}

Deno.test("POST /v1/deliveries refuses a compressed body naming its Content-Encoding, and says to send it uncompressed", async () => {
  for (const coding of ["gzip", "GZIP", "x-gzip"]) {
    assert.equal(
      await refusal(
        signed(await gzip(delivery), {
          "content-type": "application/json",
          "content-encoding": coding,
        }),
      ),
      `The body is not JSON: Content-Encoding ${coding} is not read here. Send the body uncompressed, with no Content-Encoding, and sign the bytes sent: ${EXAMPLE}.`,
      coding,
    );
  }
  // Compressed, the header left out: told by gzip's own first bytes.
  assert.equal(
    await refusal(
      signed(await gzip(delivery), { "content-type": "application/json" }),
    ),
    `The body is not JSON: it is gzip-compressed (it starts with gzip's magic bytes 1f 8b). Send the body uncompressed, with no Content-Encoding, and sign the bytes sent: ${EXAMPLE}.`,
  );
});

Deno.test("POST /v1/deliveries refuses a UTF-16 body saying so, and says to send UTF-8", async () => {
  const advice =
    `Send the body as UTF-8, as JSON between systems is (RFC 8259 §8.1), and sign the bytes sent: ${EXAMPLE}.`;
  const cases: [string, RequestInit, string][] = [
    [
      "charset=utf-16 and a byte order mark",
      signed(utf16le(delivery, true), {
        "content-type": "application/json; charset=utf-16",
      }),
      "its Content-Type says charset=utf-16",
    ],
    [
      "a quoted charset",
      signed(utf16le(delivery, false), {
        "content-type": 'application/json;charset="UTF-16LE"',
      }),
      "its Content-Type says charset=UTF-16LE",
    ],
    [
      "a little-endian byte order mark alone",
      signed(utf16le(delivery, true), { "content-type": "application/json" }),
      "it starts with a UTF-16 byte order mark",
    ],
    [
      "a big-endian byte order mark alone",
      signed(utf16be(delivery), { "content-type": "application/json" }),
      "it starts with a UTF-16 byte order mark",
    ],
    [
      "neither: NUL bytes",
      signed(utf16le(delivery, false), { "content-type": "application/json" }),
      "it holds NUL bytes, as UTF-16 text does",
    ],
  ];
  for (const [name, init, why] of cases) {
    assert.equal(
      await refusal(init),
      `The body is not JSON: ${why}. ${advice}`,
      name,
    );
  }
});

Deno.test("POST /v1/deliveries names a charset it does not read when the body is not JSON, and no cause where there is none", async () => {
  assert.equal(
    await refusal(
      signed(new TextEncoder().encode("{"), {
        "content-type": "application/json; charset=iso-8859-1",
      }),
    ),
    `The body is not JSON: its Content-Type says charset=iso-8859-1, and the body is read as UTF-8. Send the body as UTF-8, as JSON between systems is (RFC 8259 §8.1), and sign the bytes sent: ${EXAMPLE}.`,
  );
  // Plain bad JSON, sent as UTF-8 (said or not), keeps its text.
  for (const type of ["application/json", "application/json; charset=utf-8"]) {
    assert.equal(
      await refusal(
        signed(new TextEncoder().encode("{"), { "content-type": type }),
      ),
      `The body is not JSON: send ${EXAMPLE}.`,
      type,
    );
  }
  // A body that is JSON is taken, whatever its headers say.
  const { app } = await makeApp({
    intents: [{ id: "pi_0001", state: "created" }],
  });
  const res = await app.request(
    "/v1/deliveries",
    signed(new TextEncoder().encode(delivery), {
      "content-type": "application/json; charset=utf-16",
      "content-encoding": "identity",
    }),
  );
  assert.notEqual(res.status, 400, await res.clone().text());
  await res.body?.cancel();
});
