/**
 * `notJsonCause` names what was wrong with a body that did not parse as
 * JSON, from its headers and first bytes, and shows a header's value only
 * where it is a short token: a refusal never echoes a client's longer
 * text. A header that says nothing wrong (`identity`, an empty value, a
 * charset that is UTF-8 by another name) gives no cause, so plain bad JSON
 * keeps its plain refusal.
 *
 * @module
 */

import assert from "node:assert/strict";
import { notJsonCause } from "../../webhook/_not_json.ts";

const BAD = new TextEncoder().encode("{");

/** The `why` of a body of `bytes` (bad JSON by default) sent with `headers`. */
const why = (headers: Record<string, string>, bytes = BAD) =>
  notJsonCause(new Headers(headers), bytes)?.why;

Deno.test("notJsonCause() finds no cause in headers that say the body is uncompressed UTF-8", () => {
  for (
    const headers of [
      {},
      { "content-encoding": "identity" },
      { "content-encoding": "IDENTITY" },
      { "content-encoding": "" },
      { "content-type": "application/json" },
      { "content-type": "application/json; charset=utf-8" },
      { "content-type": "application/json; charset=UTF8" },
      { "content-type": "application/json; charset=us-ascii" },
      { "content-type": "application/json; charset=ascii" },
      { "content-type": 'application/json; charset=""' },
    ]
  ) {
    assert.equal(why(headers), undefined, JSON.stringify(headers));
  }
  // 0x1f alone is no gzip: its magic is two bytes.
  assert.equal(why({}, new Uint8Array([0x1f, 0x41])), undefined);
});

Deno.test("notJsonCause() names every UTF-16 charset a Content-Type says, by any case of 'charset'", () => {
  for (
    const charset of [
      "utf-16",
      "UTF16",
      "utf-16le",
      "UTF-16BE",
      "utf16be",
      "ucs-2",
      "UCS2",
      "unicode",
    ]
  ) {
    for (const name of ["charset", "Charset", "CHARSET"]) {
      assert.deepEqual(
        notJsonCause(
          new Headers({
            "content-type": `application/json; ${name}=${charset}`,
          }),
          BAD,
        ),
        {
          why: `its Content-Type says charset=${charset}`,
          send:
            "Send the body as UTF-8, as JSON between systems is (RFC 8259 §8.1)",
        },
        `${name}=${charset}`,
      );
    }
  }
  // Only the whole name: one that merely starts so is another charset.
  assert.equal(
    why({ "content-type": "application/json; charset=utf-16x" }),
    "its Content-Type says charset=utf-16x, and the body is read as UTF-8",
  );
  assert.equal(
    why({ "content-type": "application/json; charset=utf-8x" }),
    "its Content-Type says charset=utf-8x, and the body is read as UTF-8",
  );
});

Deno.test("notJsonCause() shows a header's value only as a token of at most 40 characters", () => {
  const forty = "x".repeat(40);
  assert.equal(
    why({ "content-encoding": forty }),
    `Content-Encoding ${forty} is not read here`,
  );
  for (const coding of [`${forty}y`, "gzip, br", "gzip;q=1", "<b>zip</b>"]) {
    assert.equal(
      why({ "content-encoding": coding }),
      "its Content-Encoding is not read here",
      coding,
    );
  }
  for (const charset of [`${forty}y`, "latin 1", "<b>"]) {
    assert.equal(
      why({ "content-type": `application/json; charset="${charset}"` }),
      "its Content-Type says charset=…, and the body is read as UTF-8",
      charset,
    );
  }
  assert.equal(
    why({ "content-type": `application/json; charset=${forty}` }),
    `its Content-Type says charset=${forty}, and the body is read as UTF-8`,
  );
});
