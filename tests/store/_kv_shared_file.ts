/**
 * `KvStore` on one SQLite file opened by two handles, on any runtime:
 * Deno's own (`tests/store/kv_shared_file_test.ts`) and `@deno/kv` on Node
 * (`tests/node/kv_contract_node.ts`), whose addon refuses a commit on the
 * busy file with its own error, not Deno's `TypeError`. A commit the file
 * refused as locked wrote nothing and is tried again, so every write lands
 * as it would on one handle.
 *
 * @module
 */

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type KvLike, KvStore } from "../../store/kv.ts";
import type { RegisterTest } from "./_contract.ts";

/** A Deno KV handle as `Deno.openKv` and `@deno/kv`'s `openKv` give it. */
type Opened = KvLike & { close(): void };

const NOW = 1_790_000_000_000;

/**
 * Registers the tests for `KvStore` over two handles `open` gives on one
 * file.
 *
 * @param name What the tests' names start with.
 * @param open Opens the SQLite file at `path`.
 * @param test Registers one test (`Deno.test`, or Node's runner).
 * @param rounds How many rounds of deliveries each handle makes: enough
 * for its runtime's back-end to refuse some commits as locked, few enough
 * for a quick test.
 */
export function kvSharedFileTests(
  name: string,
  open: (path: string) => Promise<Opened>,
  test: RegisterTest,
  rounds: number,
): void {
  test({
    name:
      `${name}: two handles on one SQLite file count every delivery of shared jobs, none refused as a locked database`,
    ignore: false,
  }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "relayer_kv_shared_"));
    const kvs: Opened[] = [];
    try {
      for (let i = 0; i < 2; i++) kvs.push(await open(join(dir, "relayer.kv")));
      const stores = kvs.map((kv) => new KvStore(kv));
      const JOBS = 8;
      const COPIES = 4;
      const errors: string[] = [];
      await Promise.all(stores.map(async (store) => {
        for (let round = 0; round < rounds; round++) {
          await Promise.all(
            Array.from({ length: JOBS * COPIES }, async (_, i) => {
              try {
                await store.admit({ count: `pi_${i % JOBS}/settle`, now: NOW });
              } catch (error) {
                errors.push((error as Error).message.split("\n")[0]!);
              }
            }),
          );
        }
      }));
      assert.deepEqual(errors.slice(0, 3), [], `${errors.length} refused`);
      for (let j = 0; j < JOBS; j++) {
        assert.equal(
          await stores[0]!.deliveries(`pi_${j}/settle`),
          2 * rounds * COPIES,
        );
      }
    } finally {
      for (const kv of kvs) kv.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
