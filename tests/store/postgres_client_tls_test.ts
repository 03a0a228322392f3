/**
 * `clientTls()` hands postgres.js the URL's `sslmode` as it is, but for
 * `verify-full` at an IP address, whose certificate must name that address
 * among its subject alternative names, as Node writes them. The runtimes
 * against a real server: `tests/_docs_service.ts` (Node, Bun) and
 * `tests/webhook/database_tls_test.ts` (Deno).
 *
 * @module
 */
import assert from "node:assert/strict";
import { type AddressCheckedTls, clientTls } from "../../store/postgres.ts";

const AT_ADDRESS = "postgres://relayer:pw@10.0.0.5:5432/payments";

/** The check `clientTls` gives a verify-full URL at 10.0.0.5. */
function check(): AddressCheckedTls {
  const ssl = clientTls({ url: AT_ADDRESS, ssl: "verify-full" });
  assert.equal(typeof ssl, "object");
  return ssl as AddressCheckedTls;
}

Deno.test("clientTls() gives the sslmode as it is by name, and for every mode but verify-full at an address", () => {
  const named = "postgres://relayer:pw@db.example.com:5432/payments";
  for (const ssl of [false, "prefer", "require", "verify-full"] as const) {
    assert.equal(clientTls({ url: named, ssl }), ssl);
  }
  for (const ssl of [false, "prefer", "require"] as const) {
    assert.equal(clientTls({ url: AT_ADDRESS, ssl }), ssl);
  }
  // Not an address as Node's net.isIP reads one: postgres.js names it.
  for (
    const host of ["10.0.0.05", "10.00.0.5", "010.0.0.5", "10.0.0", "1.2.3.256"]
  ) {
    const url = `postgres://relayer@${host}/payments`;
    assert.equal(clientTls({ url, ssl: "verify-full" }), "verify-full", host);
  }
});

Deno.test("clientTls() takes a certificate at an address only where an IP entry names that address", () => {
  const { checkServerIdentity } = check();
  for (
    const names of [
      "IP Address:10.0.0.5",
      "DNS:db.example.com, IP Address:10.0.0.5",
      'DNS:"a,b", IP Address:10.0.0.5',
    ]
  ) {
    assert.equal(
      checkServerIdentity("localhost", { subjectaltname: names }),
      undefined,
      names,
    );
  }
  for (
    const names of [
      undefined,
      "",
      "DNS:localhost",
      "DNS:10.0.0.5",
      "IP Address:10.0.0.50",
      "IP Address:10.0.0.6, DNS:localhost",
      // A DNS name holding the address's words, quoted as Node writes it.
      'DNS:"x, IP Address:10.0.0.5, y"',
      'DNS:"x, IP Address:10.0.0.5"',
    ]
  ) {
    const refusal = checkServerIdentity("localhost", {
      ...(names === undefined ? {} : { subjectaltname: names }),
    });
    assert.ok(refusal instanceof Error, String(names));
    assert.equal(
      (refusal as Error & { code?: string }).code,
      "ERR_TLS_CERT_ALTNAME_INVALID",
    );
    assert.match(
      refusal.message,
      /^Hostname\/IP does not match certificate's altnames: IP: 10\.0\.0\.5 is not in the cert's list: /,
    );
  }
});

Deno.test("clientTls() checks every IPv4 address by its address, whatever its octets (none falls back to postgres.js's check against localhost), and a name that begins or ends like one by name", () => {
  const octets = [0, 5, 9, 10, 99, 100, 199, 200, 239, 240, 249, 250, 254, 255];
  for (const octet of octets) {
    for (const at of [0, 3]) {
      const parts = ["10", "0", "0", "5"];
      parts[at] = String(octet);
      const host = parts.join(".");
      const ssl = clientTls({
        url: `postgres://relayer@${host}/payments`,
        ssl: "verify-full",
      });
      assert.equal(typeof ssl, "object", host);
      const { checkServerIdentity } = ssl as AddressCheckedTls;
      const names = (subjectaltname: string) => ({ subjectaltname });
      assert.equal(
        checkServerIdentity("localhost", names(`IP Address:${host}`)),
        undefined,
        host,
      );
      assert.ok(
        checkServerIdentity("localhost", names("DNS:localhost")) instanceof
          Error,
        host,
      );
    }
  }
  // A name that ends or begins like an address is a name.
  for (const host of ["db10.0.0.5", "10.0.0.5.db"]) {
    const url = `postgres://relayer@${host}/payments`;
    assert.equal(clientTls({ url, ssl: "verify-full" }), "verify-full", host);
  }
});

Deno.test("clientTls() refuses a certificate naming another address that begins or ends like this one", () => {
  const ssl = clientTls({
    url: "postgres://relayer@10.0.0.50/payments",
    ssl: "verify-full",
  }) as AddressCheckedTls;
  for (
    const names of [
      "IP Address:10.0.0.5",
      "IP Address:0.0.0.50",
      "IP Address:110.0.0.50",
      "IP Address:10.0.0.500",
    ]
  ) {
    assert.ok(
      ssl.checkServerIdentity("localhost", { subjectaltname: names }) instanceof
        Error,
      names,
    );
  }
});

Deno.test("clientTls() refuses alt names that do not read as Node writes them, whatever IP entry they hold", () => {
  const { checkServerIdentity } = check();
  for (
    const names of [
      // A quote Node would have written as a JSON string.
      'DNS:x"y, IP Address:10.0.0.5',
      'DNS:x"y,IP Address:10.0.0.5',
      '"IP Address:10.0.0.5',
      // What follows the address's entry does not read either.
      'IP Address:10.0.0.5, DNS:x"y',
      // A comma in an entry's type, and entries with no ", " between them.
      "a,b:c, IP Address:10.0.0.5",
      'DNS:"x"IP Address:10.0.0.5',
      "DNS:x,IP Address:10.0.0.5",
      // An entry whose type only ends as an address's does.
      "xIP Address:10.0.0.5",
    ]
  ) {
    assert.ok(
      checkServerIdentity("localhost", { subjectaltname: names }) instanceof
        Error,
      names,
    );
  }
});

Deno.test("clientTls() checks a server at an IPv6 address against that address, in Node's form of it and Deno's alike", () => {
  const url = "postgres://relayer:pw@[2001:db8::a:0:1]:5432/payments";
  const ssl = clientTls({ url, ssl: "verify-full" });
  assert.equal(typeof ssl, "object");
  const { checkServerIdentity } = ssl as AddressCheckedTls;
  for (
    const names of [
      "IP Address:2001:DB8:0:0:0:A:0:1", // Node's and Bun's
      "IP Address:2001:db8::a:0:1", // Deno's
      "DNS:db.example.com, IP Address:10.0.0.5, IP Address:2001:DB8:0:0:0:A:0:1",
    ]
  ) {
    assert.equal(
      checkServerIdentity("localhost", { subjectaltname: names }),
      undefined,
      names,
    );
  }
  for (
    const names of [
      "DNS:localhost",
      "IP Address:0:0:0:0:0:0:0:1",
      "IP Address:2001:DB8:0:0:0:A:0:2",
      "DNS:2001:db8::a:0:1",
      'DNS:"x, IP Address:2001:db8::a:0:1"',
    ]
  ) {
    const refusal = checkServerIdentity("localhost", { subjectaltname: names });
    assert.ok(refusal instanceof Error, names);
    assert.match(
      refusal.message,
      /^Hostname\/IP does not match certificate's altnames: IP: 2001:db8::a:0:1 is not in the cert's list: /,
    );
  }
  // The loopback, written as a URL folds it.
  const loopback = clientTls({
    url: "postgres://relayer@[0:0:0:0:0:0:0:1]/payments",
    ssl: "verify-full",
  }) as AddressCheckedTls;
  assert.equal(
    loopback.checkServerIdentity("localhost", {
      subjectaltname: "IP Address:0:0:0:0:0:0:0:1",
    }),
    undefined,
  );
  assert.ok(
    loopback.checkServerIdentity("localhost", {
      subjectaltname: "DNS:localhost",
    }) instanceof Error,
  );
});
