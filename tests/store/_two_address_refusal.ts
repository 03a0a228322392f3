/**
 * Run as a process of its own (`deno run --allow-net=127.0.0.1,[::1]
 * tests/store/_two_address_refusal.ts <port>`): a PostgresStore whose
 * client's host name resolves to `::1` and `127.0.0.1`, as `localhost`
 * does where the hosts file lists both, with nothing listening at `port`
 * on either. It writes and reads once, and prints each error as a line of
 * JSON: `{ message, code, cause, notWritten }`. A process of its own, as
 * the suite's flags let a test connect to `127.0.0.1` alone, and `node:net`
 * tries an address once (two copies of `127.0.0.1` are one).
 *
 * With a second argument, `mixed`, the name resolves to `127.0.0.1` and
 * then `fe80::1`, a link-local address with no interface named, whose
 * connect fails at once another way (`EINVAL` on Linux): one address
 * refused, the other did not say that nothing listens
 * (`--allow-net=127.0.0.1,[fe80::1]`).
 *
 * @module
 */

// deno-lint-ignore-file no-console

import net from "node:net";
import postgres from "postgres";
import { isNotWritten } from "../../store/_not_written.ts";
import { PostgresStore } from "../../store/postgres.ts";

/**
 * postgres.js's `socket` option: a plain `node:net` connect to the
 * client's host and port, its name resolved to both loopback addresses,
 * IPv6 first, as a resolver with `::1 localhost` in its hosts file does
 * (this machine's gives `localhost` one address).
 */
function twoAddressSocket(options: { host: string[]; port: number[] }) {
  const addresses = Deno.args[1] === "mixed"
    ? [
      { address: "127.0.0.1", family: 4 },
      { address: "fe80::1", family: 6 },
    ]
    : [
      { address: "::1", family: 6 },
      { address: "127.0.0.1", family: 4 },
    ];
  return net.connect({
    host: options.host[0]!,
    port: options.port[0]!,
    autoSelectFamily: true,
    lookup: ((
      _host: string,
      _options: unknown,
      done: (
        error: null,
        addresses: { address: string; family: number }[],
      ) => void,
    ) => done(null, addresses)) as unknown as net.LookupFunction,
  });
}

const port = Number(Deno.args[0]);
const sql = postgres(`postgres://relayer@db.test:${port}/payments`, {
  max: 1,
  onnotice: () => {},
  socket: twoAddressSocket,
} as postgres.Options<Record<string, never>>);
const store = new PostgresStore(sql);
for (
  const call of [
    () => store.createIntent({ id: "pi_0001", state: "authorized" }),
    () => store.getIntent("pi_0001"),
  ]
) {
  try {
    await call();
    console.log(JSON.stringify({ answered: true }));
  } catch (error) {
    const { message, code, cause } = error as Error & { code?: unknown };
    console.log(JSON.stringify({
      message,
      code,
      cause: (cause as Error | undefined)?.name,
      notWritten: isNotWritten(error),
    }));
  }
}
await sql.end({ timeout: 0 });
// postgres.js's reconnect timer, set as the refused connect closed,
// outlives sql.end().
Deno.exit(0);
