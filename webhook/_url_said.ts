/**
 * How a refusal names a URL it was given, which may carry a secret (a
 * user and password, a key in its query): its scheme, host and path only.
 *
 * @module
 */

/**
 * Whether `text` reads as a URL. `URL.canParse` would say so, but workerd
 * on older compatibility dates has none: a Worker on such a date failed to
 * load with "URL.canParse is not a function".
 */
export function readsAsUrl(text: string): boolean {
  try {
    new URL(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * A URL another token was signed for, as said in an answer and its log
 * line: its scheme, host and path, never a user, a password, a query or a
 * fragment, where a URL of the same QStash account may carry a token.
 */
export function urlSaid(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return "another URL";
  }
  const { protocol, host, pathname, username, password, search, hash } = parsed;
  if (!username && !password && !search && !hash) return url;
  return `${protocol}//${host}${pathname} (its credentials, query and fragment left unsaid)`;
}

/**
 * A setting meant as a URL that cannot be read as one, as said in a
 * refusal: quoted up to its query or fragment, without what comes before
 * an `@` (a user and a password), which may carry a token as a URL's do.
 */
export function textSaid(text: string): string {
  const base = text.replace(/[?#][\s\S]*$/, "");
  const at = base.lastIndexOf("@");
  const cut = at < 0
    ? base
    : `${/^[^/@]*\/\//.exec(base)?.[0] ?? ""}${base.slice(at + 1)}`;
  return cut === text
    ? JSON.stringify(text)
    : `${
      JSON.stringify(cut)
    } (its credentials, query and fragment left unsaid)`;
}

/**
 * A `url` option refused for not being an http(s) URL, as its refusal
 * says it: quoted, as a URL's scheme, host and path, or, if it reads as no
 * URL, as {@linkcode textSaid} cuts it; never a password, a query or a
 * fragment, and at most 300 characters of it.
 */
export function optionUrlSaid(url: string): string {
  let said: string;
  if (readsAsUrl(url)) {
    said = urlSaid(url) === url
      ? JSON.stringify(url)
      : `${
        JSON.stringify(bareUrl(url))
      } (its credentials, query and fragment left unsaid)`;
  } else {
    said = textSaid(url);
  }
  return said.length > 300
    ? `${said.slice(0, 300)}…(${url.length} characters)`
    : said;
}

/**
 * `url` (one that reads as a URL) without its user, password, query and
 * fragment, as the URL parser writes the rest: `mailto:a@b?subject=k` is
 * `mailto:a@b`, where scheme, "//", host and path would add a "//".
 */
export function bareUrl(url: string): string {
  const parsed = new URL(url);
  parsed.username = "";
  parsed.password = "";
  parsed.search = "";
  parsed.hash = "";
  return parsed.href;
}
