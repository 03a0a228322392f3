/**
 * PostgresStore behind a real PgBouncer (Debian's `pgbouncer` package), as
 * payment teams run PostgreSQL: the store contract through a pooler in
 * transaction mode with `prepare: false`.
 *
 * Without `pgbouncer` these tests are skipped with one loud line, except
 * under `CI=true`, where that fails the run (`.ci/run` installs Debian's
 * `pgbouncer` package first).
 *
 * @module
 */

// deno-lint-ignore-file no-console
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import {
  type OwnedPgBouncer,
  pgbouncerBin,
  processPostgres,
  startPgBouncer,
} from "../../support/postgres_server.ts";
import { freshSchema, postgresAvailable, sharedClient } from "../_postgres.ts";
import { storeContract } from "./_contract.ts";

const MISSING =
  "no pgbouncer on the PATH or in /usr/sbin (Debian's pgbouncer package)";

/** Whether these suites run: `false` only where PostgreSQL or PgBouncer is missing, outside CI. */
const available: boolean = postgresAvailable && await (async () => {
  if (await pgbouncerBin() !== null) return true;
  if (Deno.env.get("CI") === "true") {
    throw new Error(
      `CI=true and ${MISSING}: .ci/run installs it; the PgBouncer suites must run in CI`,
    );
  }
  console.error(
    `\n!!! SKIPPING the PgBouncer suites: ${MISSING}. Install it (apt-get install pgbouncer) to run them. !!!\n`,
  );
  return false;
})();

/** This file's poolers in front of the run's server, started on first use. */
const poolers = new Map<string, Promise<OwnedPgBouncer>>();
function pooler(
  mode: "transaction" | "session",
  poolSize = 4,
): Promise<OwnedPgBouncer> {
  const key = `${mode}/${poolSize}`;
  let started = poolers.get(key);
  if (started === undefined) {
    started = (async () => {
      const { server, missing } = await processPostgres();
      if (server === null) throw new Error(missing);
      return await startPgBouncer(server, { mode, poolSize });
    })();
    poolers.set(key, started);
  }
  return started;
}

/** A client through `pooler`, quiet about notices. */
function through(
  pooler: OwnedPgBouncer,
  options: { prepare: boolean; max: number },
): postgres.Sql {
  return postgres(pooler.url, { ...options, onnotice: () => {} });
}

// One client per file, as the other Postgres suites keep (see _postgres.ts).
let pooled: postgres.Sql | undefined;

if (available) {
  storeContract(
    "PostgresStore through PgBouncer in transaction mode (prepare: false)",
    async () => {
      pooled ??= through(await pooler("transaction"), {
        prepare: false,
        max: 8,
      });
      const schema = freshSchema();
      const store = new PostgresStore(pooled, { schema });
      await store.migrate();
      const admin = await sharedClient();
      return {
        store,
        close: async () => {
          await admin.unsafe(`DROP SCHEMA "${schema}" CASCADE`);
        },
      };
    },
  );
}
