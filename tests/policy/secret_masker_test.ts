/**
 * secretMasker finds a secret in each form an echo of it may take, and
 * leaves text that does not read as the secret as it was.
 */
import assert from "node:assert/strict";
import { secretMasker } from "../../policy/_walk.ts";
import { unicodeEscaped } from "../_echo_forms.ts";

const unicode = (text: string, upper = false) =>
  unicodeEscaped(text, /[^A-Za-z0-9]/gu, upper);

Deno.test("secretMasker() masks a secret as it is, JSON-escaped, \\u-escaped in either case, %-encoded in either case, and in base64", () => {
  const secret = 'tok/1+2 x%é😀"\\';
  const mask = secretMasker([[secret, "<T$&>"]]);
  const forms = [
    secret,
    JSON.stringify(secret).slice(1, -1),
    JSON.stringify(secret).slice(1, -1).replaceAll("/", "\\/"),
    unicode(secret),
    unicode(secret, true),
    encodeURIComponent(secret),
    encodeURIComponent(secret).toLowerCase(),
    new URLSearchParams({ s: secret }).toString().slice(2),
    // A %-escape written in JSON by a writer that escapes every other
    // character: its '%' as \u0025.
    unicode(encodeURIComponent(secret)),
    // Escaped one character one way, the next another.
    'tok%2F1\\u002b2+x%25\\u00e9%F0%9F%98%80\\"%5c',
  ];
  for (const form of forms) {
    // The mask as given: `$&` is not a replacement pattern here.
    assert.equal(mask(`a ${form} b`), "a <T$&> b", form);
  }
  const bytes = new TextEncoder().encode(`Bearer ${secret}`);
  const b64 = btoa(String.fromCharCode(...bytes));
  assert.ok(!mask(b64).includes(b64.slice(12, 30)), mask(b64));
});

Deno.test("secretMasker() leaves text that does not read as the secret, and an empty secret, as it was", () => {
  const mask = secretMasker([["ab/cd+ef", "<S>"], ["", "<E>"]]);
  for (
    const text of [
      "ab/cd+eF",
      "ab%2gcd+ef",
      "ab\\u002cd+ef",
      "AB%2Fcd+ef",
      "ab/cd ef",
      "next=%2fhome, \\u002B1",
    ]
  ) {
    assert.equal(mask(text), text);
  }
  assert.equal(mask("x ab%2fcd%2Bef y"), "x <S> y");
});

Deno.test("secretMasker() replaces the longest secret first: a header's value before the token it holds", () => {
  const mask = secretMasker([
    ["tok_0123456789", "<token>"],
    ["Bearer tok_0123456789", "<authorization>"],
  ]);
  assert.equal(
    mask("sent Bearer%20tok_0123456789, then tok_0123456789"),
    "sent <authorization>, then <token>",
  );
});

Deno.test("secretMasker() masks a secret JSON-escaped twice, as a gateway writes an upstream's JSON answer in a string of its own", () => {
  const secret = 'tok/1+2"x\\y<z';
  const mask = secretMasker([[secret, "<T>"]]);
  const once = JSON.stringify({ error: `you sent ${secret}` });
  const dotnet = (text: string) =>
    text.replace(/[+<>&']/g, (c) => `\\u00${c.charCodeAt(0).toString(16)}`);
  for (
    const text of [
      JSON.stringify({ upstream: once }),
      JSON.stringify({ upstream: once.replaceAll("/", "\\/") }),
      JSON.stringify({ upstream: dotnet(once) }),
      dotnet(JSON.stringify({ upstream: dotnet(once) })),
    ]
  ) {
    const masked = mask(text);
    assert.ok(masked.includes("you sent <T>"), `${text} -> ${masked}`);
    assert.ok(!masked.includes("tok"), masked);
  }
});

Deno.test("secretMasker() masks a secret JSON-escaped three times, its escapes as JSON writes them, as \\u-escapes and %-escapes alike", () => {
  const secret = 'tok/1+2"x\\y<z %é';
  const mask = secretMasker([[secret, "<T>"]]);
  // A writer that escapes every character not an ASCII letter or digit.
  const every = (text: string) => unicodeEscaped(text, /[^A-Za-z0-9]/g);
  const thrice = (inner: string) =>
    JSON.stringify({
      gateway: JSON.stringify({ upstream: `{"error":"${inner}"}` }),
    });
  for (
    const text of [
      // Each '"' of the secret behind seven backslashes, each '\' eight.
      thrice(`you sent ${JSON.stringify(secret).slice(1, -1)}`),
      // Each '\u' behind four backslashes.
      thrice(`you sent ${every(secret)}`),
      // A %-escape's '%' itself as \u0025, behind four backslashes.
      thrice(`you sent ${every(encodeURIComponent(secret))}`),
    ]
  ) {
    const masked = mask(text);
    assert.ok(masked.includes("you sent <T>"), `${text} -> ${masked}`);
    assert.ok(!masked.includes("tok"), masked);
  }
});

Deno.test("secretMasker() masks a secret holding a control character JSON writes with a short escape", () => {
  const secret = "tok\n1\t2\r3\b4\f5";
  const mask = secretMasker([[secret, "<T>"]]);
  const quoted = JSON.stringify(secret).slice(1, -1);
  assert.equal(quoted, "tok\\n1\\t2\\r3\\b4\\f5");
  assert.equal(mask(`a ${quoted} b`), "a <T> b");
  // %-encoded, each byte in two hex digits: `%0A`, `%09`.
  assert.equal(mask(`a ${encodeURIComponent(secret)} b`), "a <T> b");
});

Deno.test("secretMasker() masks a secret in base64url, where its base64 holds a '+' or '/'", () => {
  const secret = "tok?>~é0123456789";
  const mask = secretMasker([[secret, "<T>"]]);
  const bytes = new TextEncoder().encode(`Bearer ${secret}`);
  const b64 = btoa(String.fromCharCode(...bytes)).replace(/=+$/, "");
  const url = b64.replaceAll("+", "-").replaceAll("/", "_");
  // The two differ within the secret's bytes, or this case tests nothing.
  assert.notEqual(url.slice(10), b64.slice(10));
  assert.ok(!mask(url).includes(url.slice(12, 30)), mask(url));
  assert.ok(!mask(b64).includes(b64.slice(12, 30)), mask(b64));
});

Deno.test("secretMasker() takes a character of the secret that a pattern reads as another as itself alone", () => {
  const mask = secretMasker([["ab.cd*ef$g", "<S>"]]);
  for (const text of ["abXcd*ef$g", "ab.cdddef$g", "ab.cd*ef"]) {
    assert.equal(mask(text), text);
  }
  assert.equal(mask("x ab.cd*ef$g y"), "x <S> y");
});

Deno.test("secretMasker() masks a 6-character secret's base64 where it starts on a 3-byte boundary, and leaves base64 shorter than 8 characters, which common text holds by chance", () => {
  // HttpSender masks header values of 6 characters or more: the shortest
  // one's base64 is 8 characters, where it starts after a multiple of 3
  // bytes (a dump of the header's value alone, or of `X-Key: ` before it).
  const mask = secretMasker([["k3y-42", "<S>"]]);
  for (const before of ["", "abc", "X-Key:"]) {
    const b64 = btoa(`${before}k3y-42`);
    assert.equal(mask(b64), `${btoa(before)}<S>`, before);
  }
  // A 4-character secret's base64 is 5 characters wherever it starts: as
  // likely in unrelated base64 (a body, a hash) as the secret's echo.
  const short = secretMasker([["pass", "<S>"]]);
  const b64 = btoa("pass");
  assert.equal(short(`a ${b64} b`), `a ${b64} b`);
});
