/**
 * Run as a process of its own, where `localhost` resolves to `::1` and
 * `127.0.0.1` (tests/store/postgres_localhost_refused_test.ts gives it a
 * hosts file that says so), with nothing listening at `port` on either:
 * `deno run tests/store/_localhost_refusal.ts <port>`. Prints, a line of
 * JSON each, the error of a PostgresStore's read on postgres.js's own
 * socket, and that of `openService()` with `DATABASE_URL` at that port.
 *
 * @module
 */

// deno-lint-ignore-file no-console

import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import { openService } from "../../main.ts";
import { loadConfig } from "../../webhook/config.ts";

const port = Number(Deno.args[0]);
const sql = postgres(`postgres://relayer@localhost:${port}/payments`, {
  max: 1,
  onnotice: () => {},
});
try {
  await new PostgresStore(sql).getIntent("pi_0001");
  console.log(JSON.stringify({ answered: true }));
} catch (error) {
  console.log(JSON.stringify({ message: (error as Error).message }));
}
await sql.end({ timeout: 0 });
try {
  await openService(loadConfig({
    SENDER_URL: "http://127.0.0.1:9000",
    WEBHOOK_SECRET: "a-secret-of-16-chars",
    DATABASE_URL: `postgres://relayer:s3cret-pw@localhost:${port}/payments`,
  }));
  console.log(JSON.stringify({ answered: true }));
} catch (error) {
  console.log(JSON.stringify({ message: (error as Error).message }));
}
// postgres.js's reconnect timer, set as the refused connect closed,
// outlives sql.end().
Deno.exit(0);
