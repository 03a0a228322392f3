/**
 * postgres.js's `ssl` option for a database URL, with the server of a
 * `verify-full` URL that names an IP address checked against that
 * address. Web APIs only: nothing here runs at import, and the check reads
 * the certificate the runtime's TLS hands it (Node's, Deno's and Bun's
 * `subjectaltname`).
 *
 * @module
 */

/**
 * postgres.js's `ssl` option that checks a server named by IP address
 * against that address: its TLS options, handed to the runtime's
 * `tls.connect`.
 *
 * @example The check, on the certificate the runtime reads
 * ```ts
 * import { type AddressCheckedTls, clientTls } from "@relayer/poison/postgres";
 * import assert from "node:assert/strict";
 *
 * const ssl = clientTls({
 *   url: "postgres://relayer@10.0.0.5/payments",
 *   ssl: "verify-full",
 * }) as AddressCheckedTls;
 * const names = (subjectaltname: string) => ({ subjectaltname });
 * assert.equal(ssl.checkServerIdentity("localhost", names("IP Address:10.0.0.5")), undefined);
 * assert.ok(ssl.checkServerIdentity("localhost", names("DNS:localhost")) instanceof Error);
 * ```
 */
export interface AddressCheckedTls {
  /**
   * Whether the certificate `certificate` names the URL's address (an `IP:`
   * subject alternative name): `undefined` if it does, else the error that
   * refuses the connection. `name` is what the runtime would have checked
   * (`localhost`, as postgres.js gives it no server name), and is ignored.
   */
  checkServerIdentity(
    name: string,
    certificate: { subjectaltname?: string },
  ): Error | undefined;
}

// An IPv4 address as Node's net.isIP reads one, which decides whether
// postgres.js 3.4.9 gives TLS a server name.
const IPV4 =
  /^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]\d|\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]\d|\d)$/;

/**
 * `text` as one form of the address it names, if it names one as Node's
 * net.isIP reads it: an IPv4 address as it is, an IPv6 address (bare, or
 * in a URL's brackets) as a URL writes it (`::1`, lower case, zeros
 * folded), as Node writes it in a certificate (`0:0:0:0:0:0:0:1`) and
 * Deno does (`::1`) alike. `undefined` for a name.
 */
function addressIn(text: string): string | undefined {
  if (IPV4.test(text)) return text;
  const bare = text.startsWith("[") && text.endsWith("]")
    ? text.slice(1, -1)
    : text;
  // A zone (fe80::1%eth0) names no address a certificate can hold.
  if (!bare.includes(":") || /[^\da-f:.]/i.test(bare)) return undefined;
  try {
    return new URL(`http://[${bare}]/`).hostname.slice(1, -1);
  } catch {
    return undefined;
  }
}

// One entry of a certificate's subjectaltname as Node writes it
// ("DNS:localhost, IP Address:127.0.0.1"): a value with a comma or a quote
// in it is a JSON string, so a DNS name cannot pass for an address.
const ALT_NAME = /([^:,"]+):("(?:[^"\\]|\\.)*"|[^,"]*)(?:, |$)/;

/** The addresses of the `IP Address:` entries of `altNames`, or none where it does not read as Node writes it. */
function addressesOf(altNames: string): string[] {
  const found: string[] = [];
  const entries = new RegExp(ALT_NAME.source, "y");
  while (entries.lastIndex < altNames.length) {
    const start = entries.lastIndex;
    const entry = entries.exec(altNames);
    if (entry === null || entries.lastIndex === start) return [];
    const address = entry[1] === "IP Address"
      ? addressIn(entry[2]!)
      : undefined;
    if (address !== undefined) found.push(address);
  }
  return found;
}

/**
 * postgres.js's `ssl` option for a database: the `sslmode` as it is, but
 * for `verify-full` at an IP address (IPv4, or IPv6 in brackets), which is
 * checked against that address. postgres.js 3.4.9 gives TLS no server name for an address, and
 * the TLS of Node, Deno and Bun then checks the certificate against
 * `localhost`: a certificate that names the address was refused ("Host:
 * localhost. is not cert's CN"), and one that names `localhost` taken.
 * The chain is still checked against the CAs the runtime trusts. Give it
 * to the client as its `ssl` (`main.ts` and `deno task kv-to-postgres` do).
 *
 * @param database The database's URL and its `sslmode` as `loadConfig` reads them (`config.database`).
 * @returns postgres.js's `ssl` option.
 *
 * @example A client for DATABASE_URL, on Node, Deno or Bun
 * ```ts
 * import postgres from "postgres";
 * import { clientTls } from "@relayer/poison/postgres";
 * import { loadConfig } from "@relayer/poison/webhook";
 * import assert from "node:assert/strict";
 *
 * const { database } = loadConfig({
 *   SENDER_URL: "http://127.0.0.1:9000",
 *   WEBHOOK_SECRET: "a-secret-of-16-chars",
 *   DATABASE_URL: "postgres://relayer@10.0.0.5/payments?sslmode=verify-full",
 * });
 * const ssl = clientTls(database!);
 * assert.equal(typeof ssl, "object"); // checks the certificate names 10.0.0.5
 * const sql = postgres(database!.url, { ssl }); // connects on the first query
 * await sql.end();
 * assert.equal(
 *   clientTls({ url: "postgres://relayer@db.example.com/payments", ssl: "verify-full" }),
 *   "verify-full", // by name, as postgres.js checks it
 * );
 * ```
 */
export function clientTls(
  database: {
    readonly url: string;
    readonly ssl: false | "prefer" | "require" | "verify-full";
  },
): false | "prefer" | "require" | "verify-full" | AddressCheckedTls {
  if (database.ssl !== "verify-full") return database.ssl;
  const host = addressIn(new URL(database.url).hostname);
  if (host === undefined) return database.ssl;
  return {
    checkServerIdentity(_name, certificate) {
      const addresses = addressesOf(certificate.subjectaltname ?? "");
      if (addresses.includes(host)) return undefined;
      // Node's words and code for the same refusal.
      return Object.assign(
        new Error(
          `Hostname/IP does not match certificate's altnames: IP: ${host} is not in the cert's list: ${
            addresses.join(", ")
          }`,
        ),
        { code: "ERR_TLS_CERT_ALTNAME_INVALID", host },
      );
    },
  };
}

/**
 * The address a client's TLS refusal `error` should have checked the
 * server against, where the runtime checked it against `localhost`
 * instead (`ERR_TLS_CERT_ALTNAME_INVALID` for the host `localhost`) and
 * the client's hosts `hosts` (postgres.js's `options.host`) name an IPv4
 * or IPv6 address: postgres.js 3.4.9 gave TLS no server name for it. `undefined`
 * for any other error or hosts.
 */
export function checkedAgainstLocalhost(
  error: unknown,
  hosts: unknown,
): string | undefined {
  const { code, host } = (error ?? {}) as { code?: unknown; host?: unknown };
  if (code !== "ERR_TLS_CERT_ALTNAME_INVALID" || host !== "localhost") {
    return undefined;
  }
  const named = Array.isArray(hosts) ? hosts : [hosts];
  for (const name of named) {
    const address = typeof name === "string" ? addressIn(name) : undefined;
    if (address !== undefined) return address;
  }
  return undefined;
}

// What Node's and Deno's TLS (and Bun's) call a certificate whose chain
// ends at no CA the process trusts.
const UNTRUSTED = new Set([
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "CERT_UNTRUSTED",
]);

/**
 * Whether `error` is a TLS refusal of a server certificate that does not
 * chain to a CA the process trusts, by its code.
 */
export function untrustedChain(error: unknown): boolean {
  const { code } = (error ?? {}) as { code?: unknown };
  return typeof code === "string" && UNTRUSTED.has(code);
}

/**
 * The runtime's own TLS refusal under `error`, where `error` is one that
 * `PostgresStore.migrate()` said in its words (its `cause`: a certificate
 * checked against `localhost`, or one that chains to no trusted CA), else
 * `error`: for a caller that says the refusal in words of its own
 * (`main.ts` names `DENO_CERT`, where the store names Node's setting too).
 */
export function tlsRefusalOf(error: unknown): unknown {
  const cause = (error as { cause?: unknown } | null)?.cause;
  const { code } = (cause ?? {}) as { code?: unknown };
  return untrustedChain(cause) || code === "ERR_TLS_CERT_ALTNAME_INVALID"
    ? cause
    : error;
}
