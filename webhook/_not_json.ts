/**
 * Why a request's body that did not parse as JSON may not be JSON text at
 * all: compressed, or in another charset than UTF-8. Read only once the
 * parse failed, so a body that is JSON is taken whatever its headers say.
 *
 * @module
 */

/** What was wrong with a body's bytes, and what to send instead. */
export interface NotJsonCause {
  /** What was wrong, as a clause: "Content-Encoding gzip is not read here". */
  readonly why: string;
  /** What to send instead, as an imperative: "Send the body uncompressed, …". */
  readonly send: string;
}

const UNCOMPRESSED = "Send the body uncompressed, with no Content-Encoding";
const AS_UTF8 =
  "Send the body as UTF-8, as JSON between systems is (RFC 8259 §8.1)";
/** A header's value shown in a refusal: a token, never anything longer. */
const TOKEN = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,40}$/;
const UTF16 = /^(utf-?16(le|be)?|ucs-?2|unicode)$/i;
const UTF8 = /^(utf-?8|us-ascii|ascii)$/i;

/**
 * The cause of a body that did not parse as JSON, told by `headers` and
 * its first bytes, or `undefined` where nothing shows one (plain bad JSON).
 */
export function notJsonCause(
  headers: Headers,
  bytes: Uint8Array,
): NotJsonCause | undefined {
  const coding = headers.get("content-encoding")?.trim();
  if (coding !== undefined && coding !== "" && !/^identity$/i.test(coding)) {
    return {
      why: `${
        TOKEN.test(coding)
          ? `Content-Encoding ${coding}`
          : "its Content-Encoding"
      } is not read here`,
      send: UNCOMPRESSED,
    };
  }
  if (bytes[0] === 0x1f && bytes[1] === 0x8b) {
    return {
      why: "it is gzip-compressed (it starts with gzip's magic bytes 1f 8b)",
      send: UNCOMPRESSED,
    };
  }
  const charset = charsetOf(headers.get("content-type") ?? "");
  const said = charset === undefined
    ? undefined
    : `its Content-Type says charset=${TOKEN.test(charset) ? charset : "…"}`;
  if (charset !== undefined && UTF16.test(charset)) {
    return { why: said!, send: AS_UTF8 };
  }
  if (
    (bytes[0] === 0xff && bytes[1] === 0xfe) ||
    (bytes[0] === 0xfe && bytes[1] === 0xff)
  ) {
    return { why: "it starts with a UTF-16 byte order mark", send: AS_UTF8 };
  }
  // JSON in UTF-8 holds no NUL byte: a control character in a string is
  // escaped, and none may stand outside one.
  if (bytes.includes(0)) {
    return { why: "it holds NUL bytes, as UTF-16 text does", send: AS_UTF8 };
  }
  if (charset !== undefined && !UTF8.test(charset)) {
    return { why: `${said}, and the body is read as UTF-8`, send: AS_UTF8 };
  }
  return undefined;
}

/** The `charset` parameter of a Content-Type, unquoted; `undefined` if none. */
function charsetOf(contentType: string): string | undefined {
  for (const parameter of contentType.split(";").slice(1)) {
    const match = /^\s*charset\s*=\s*("?)([^"]*)\1\s*$/i.exec(parameter);
    if (match) return match[2]!.trim() || undefined;
  }
  return undefined;
}
