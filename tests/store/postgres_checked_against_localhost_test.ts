/**
 * `checkedAgainstLocalhost()`: which address a TLS refusal should have
 * checked the server against, where the runtime checked it against
 * `localhost` because postgres.js 3.4.9 gave TLS no server name for a host
 * given as an address. The refusals against real servers are
 * `postgres_tls_address_test.ts` and `postgres_tls_ipv6_test.ts`; here,
 * the hosts of a URL that names several, by their shapes alone.
 *
 * @module
 */
import assert from "node:assert/strict";
import { checkedAgainstLocalhost } from "../../store/_postgres_tls.ts";

/** A runtime's refusal of a certificate that does not name `host`. */
function refusedFor(host: string): Error {
  return Object.assign(
    new Error(
      `Hostname/IP does not match certificate's altnames: Host: ${host}. is not in the cert's altnames: DNS:db.internal`,
    ),
    { code: "ERR_TLS_CERT_ALTNAME_INVALID", host },
  );
}

Deno.test("checkedAgainstLocalhost() names the first address among the hosts only for a refusal checked against localhost, in one form for IPv4 and IPv6", () => {
  const hosts = ["db.example.com", "10.0.0.5"];
  assert.equal(
    checkedAgainstLocalhost(refusedFor("localhost"), hosts),
    "10.0.0.5",
  );
  assert.equal(
    checkedAgainstLocalhost(refusedFor("localhost"), ["[::1]", "10.0.0.5"]),
    "::1",
  );
  assert.equal(
    checkedAgainstLocalhost(refusedFor("localhost"), "0:0:0:0:0:0:0:1"),
    "::1",
  );
  // A refusal for a host given by name was checked against that name: a
  // URL with an address among its other hosts is not the address's case.
  assert.equal(
    checkedAgainstLocalhost(refusedFor("db.example.com"), hosts),
    undefined,
  );
  // Names alone, or another refusal: none.
  assert.equal(
    checkedAgainstLocalhost(refusedFor("localhost"), ["db.example.com"]),
    undefined,
  );
  assert.equal(
    checkedAgainstLocalhost(
      Object.assign(new Error("certificate has expired"), {
        code: "CERT_HAS_EXPIRED",
        host: "localhost",
      }),
      hosts,
    ),
    undefined,
  );
});
