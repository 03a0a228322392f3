import { postgresAvailable, postgresBackend } from "../_postgres.ts";
import { storeContract } from "./_contract.ts";

if (postgresAvailable) {
  storeContract("PostgresStore", postgresBackend.open, { test: Deno.test });
}
