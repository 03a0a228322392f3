/**
 * A Deno KV file's folder and schema, as the start's and the move's suites
 * look at them: what lies beside the file, and the schema version denokv
 * records in its `migration_state`.
 *
 * @module
 */

import { DatabaseSync } from "node:sqlite";

/** The names in the folder `dir`, sorted. */
export async function namesIn(dir: string): Promise<string[]> {
  return (await Array.fromAsync(Deno.readDir(dir), (entry) => entry.name))
    .sort();
}

/** The version in the `migration_state` of the Deno KV file at `path`. */
export function schemaVersion(path: string): number {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    const row = db.prepare("SELECT version FROM migration_state WHERE k = 0")
      .get();
    return Number(row?.version);
  } finally {
    db.close();
  }
}

/**
 * Moves the schema of the Deno KV file at `path` one version on, as a
 * newer Deno KV's migration would, and returns the version it had (this
 * Deno's, for a store this Deno made).
 */
export function moveSchemaOn(path: string): number {
  const known = schemaVersion(path);
  const db = new DatabaseSync(path);
  try {
    db.exec(`UPDATE migration_state SET version = ${known + 1} WHERE k = 0`);
  } finally {
    db.close();
  }
  return known;
}
