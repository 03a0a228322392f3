/**
 * The forms a server's echo of a secret takes that the masks must find:
 * %-escapes written in lower case (`%2f`), as some servers write them, and
 * JSON's `\uXXXX` escapes, of the characters .NET's writer escapes or of
 * every character that is not an ASCII letter or digit.
 *
 * @module
 */

/** `text` with each %-escape's hex digits in lower case. */
export function lowerPercent(text: string): string {
  return text.replace(/%[0-9A-F]{2}/g, (escape) => escape.toLowerCase());
}

/**
 * `text` with each character `which` matches written `\uXXXX` (each
 * UTF-16 unit of it), the hex digits in upper case if `upper`.
 */
export function unicodeEscaped(
  text: string,
  which: RegExp = /[^A-Za-z0-9]/gu,
  upper = false,
): string {
  return text.replace(
    which,
    (char) =>
      [...Array(char.length).keys()].map((i) => {
        const hex = char.charCodeAt(i).toString(16).padStart(4, "0");
        return `\\u${upper ? hex.toUpperCase() : hex}`;
      }).join(""),
  );
}

/** `text` as .NET's JSON writer escapes it: `+`, `<`, `>`, `&` and `'` as `\u002B` and the like. */
export function dotnetEscaped(text: string): string {
  return unicodeEscaped(text, /[+<>&']/g, true);
}
