/**
 * `?sslmode=verify-full` on Node, as docs/api.md's Node service connects:
 * `loadConfig` reads `DATABASE_URL`, `clientTls` gives postgres.js its
 * `ssl` (a server named by IP address checked against that address). Run
 * as a plain script (`node postgres_tls.mjs`) over the bundle
 * `deno task node-check` builds, against a server whose certificate names
 * 127.0.0.1 alone (`RELAYER_PG_TLS_URL`). With the server's CA trusted
 * (`NODE_EXTRA_CA_CERTS`) a query must answer over TLS; without it
 * (`RELAYER_PG_TLS_EXPECT=refused`) the connection must be refused as
 * unverified. It prints one line, and exits 1 if it did not hold.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import process from "node:process";
import postgres from "postgres";
import { clientTls } from "../../store/postgres.ts";
import { loadConfig } from "../../webhook/app.ts";

const url = process.env.RELAYER_PG_TLS_URL;
if (!url) {
  throw new Error("RELAYER_PG_TLS_URL is not set: run deno task node-check");
}
const refused = process.env.RELAYER_PG_TLS_EXPECT === "refused";
const { database } = loadConfig({
  SENDER_URL: "http://127.0.0.1:9",
  WEBHOOK_SECRET: "node-check-tls-secret-0123",
  DATABASE_URL: url,
});
const sql = postgres(database!.url, {
  ssl: clientTls(database!),
  max: 1,
  connect_timeout: 10,
  onnotice: () => {},
});
let seen: string;
try {
  const [row] = await sql<{ ssl: boolean }[]>`
    SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()`;
  seen = row?.ssl === true ? "answered over TLS" : "answered without TLS";
} catch (error) {
  seen = `refused: ${(error as Error).message}`;
}
await sql.end({ timeout: 1 });
const held = refused
  ? /^refused: .*(unable to verify|self.signed|certificate)/i.test(seen)
  : seen === "answered over TLS";
console.log(
  `${held ? "ok" : "FAIL"} verify-full at 127.0.0.1, ${
    refused ? "its CA not trusted" : "its CA trusted"
  }: ${seen}`,
);
process.exit(held ? 0 : 1);
