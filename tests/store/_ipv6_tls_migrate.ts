/**
 * Run as a process of its own, allowed to connect to `[::1]` (the test
 * process's `--allow-net` names IPv4 hosts only):
 * `deno run tests/store/_ipv6_tls_migrate.ts <url> <ca file>`, `url` a
 * `verify-full` URL at `[::1]`. Prints, a line of JSON each, what
 * `migrate()` answers on a client made as the docs' short examples make
 * theirs (no `clientTls`), and on one given `clientTls`, with the address
 * the server was reached at.
 *
 * @module
 */

// deno-lint-ignore-file no-console

import postgres from "postgres";
import { clientTls, PostgresStore } from "../../store/postgres.ts";

const [url, caFile] = Deno.args as [string, string];
const ca = await Deno.readTextFile(caFile);
const port = Number(new URL(url).port);
// postgres.js 3.4.9 reads a URL's "[::1]" as the host "[" and a host
// string "::1" as "" (localhost): the address goes in as lists, which its
// types do not name.
const at = { host: ["::1"], port: [port], max: 1, onnotice: () => {} };
const checked = clientTls({ url, ssl: "verify-full" });
for (const ssl of [{ ca }, { ca, ...(checked as object) }]) {
  const sql = postgres(
    url,
    { ...at, ssl } as unknown as postgres.Options<never>,
  );
  const store = new PostgresStore(sql);
  try {
    await store.migrate();
    const [row] = await sql<
      { at: string }[]
    >`select inet_server_addr()::text as at`;
    console.log(JSON.stringify({ migrated: row!.at }));
  } catch (error) {
    console.log(JSON.stringify({ message: (error as Error).message }));
  } finally {
    store.close();
    await sql.end({ timeout: 0 });
  }
}
