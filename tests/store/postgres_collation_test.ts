/**
 * PostgresStore in a database whose default collation is not C (ICU's
 * en-US, which sorts "a" before "B" and skips "_" and "-" at first): the
 * dead-letter list pages in the order the memory store and Deno KV page
 * in (code points), so a cursor from one page neither skips nor repeats a
 * letter, and ids differing in case or normal form stay apart.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { createRelayer, type Store } from "../../mod.ts";
import { PostgresStore } from "../../store/postgres.ts";
import { kvBackend, memoryBackend } from "../_stores.ts";
import {
  freshDatabase,
  postgresAvailable,
  serverUpFirst,
} from "../_postgres.ts";
import { timeout } from "../_timeout.ts";

/** Ids an en-US collation orders otherwise than code points. */
const IDS = [
  "B_1",
  "a_1",
  "_z",
  "a-1",
  "A.1",
  "a:1",
  "Z9",
  "b_1",
  "-a",
  "a1",
  "A1",
];

/** Keeps one unreadable message of each id on `store`, all at the same time. */
async function keepLetters(store: Store): Promise<void> {
  const relayer = createRelayer({
    store,
    sender: {
      send: () => Promise.reject(new Error("unused")),
      receipt: () => Promise.resolve("pending" as const),
    },
    now: () => 5_000,
  });
  for (const id of IDS) {
    await relayer.keepUnreadable({
      queue: "local",
      id,
      raw: "{",
      detail: "not JSON",
      seen: { intentId: id },
    });
  }
  // Ids apart in case only are two intents, as on every store.
  await store.createIntent({ id: "PI_1" });
  await store.createIntent({ id: "pi_1" });
}

/** Every page of `limit` letters, as the job ids of each page. */
async function pages(store: Store, limit: number): Promise<string[][]> {
  const seen: string[][] = [];
  let cursor: string | null = null;
  do {
    const page: Awaited<ReturnType<Store["listDeadLetters"]>> = await store
      .listDeadLetters({ limit, cursor });
    seen.push(page.items.map((letter) => letter.jobId));
    cursor = page.cursor;
  } while (cursor !== null);
  return seen;
}

/** What the three stores show of the letters and intents. */
async function shown(store: Store) {
  await keepLetters(store);
  return {
    byOne: await pages(store, 1),
    byThree: await pages(store, 3),
    all: await pages(store, 50),
    upper: (await store.getIntent("PI_1"))?.id,
    lower: (await store.getIntent("pi_1"))?.id,
  };
}

serverUpFirst();

Deno.test({
  name:
    "PostgresStore in a database of ICU en-US collation pages dead letters in the code-point order of the memory store and Deno KV, and keeps ids apart by case",
  ignore: !postgresAvailable,
  fn: timeout(30_000, async () => {
    const expected: Record<string, Awaited<ReturnType<typeof shown>>> = {};
    for (const backend of [memoryBackend, kvBackend]) {
      const { store, close } = await backend.open();
      try {
        expected[backend.name] = await shown(store);
      } finally {
        await close();
      }
    }
    assert.deepEqual(expected.KvStore, expected.MemoryStore);
    const ordered = [...IDS].map((id) => `local/${id}/unreadable`).sort();
    assert.deepEqual(expected.MemoryStore!.all, [ordered]);
    assert.deepEqual(expected.MemoryStore!.byOne.flat(), ordered);

    const database = await freshDatabase(
      "LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8' TEMPLATE template0",
    );
    const sql = postgres(database.url, {
      max: 2,
      onnotice: () => {},
      max_lifetime: null,
    });
    const store = new PostgresStore(sql);
    try {
      // The database sorts otherwise than code points: a list ordered by it
      // would page otherwise.
      const [{ sorted }] = await sql<[{ sorted: string[] }]>`
        SELECT array_agg(id ORDER BY id) AS sorted
        FROM unnest(${IDS}::text[]) AS id`;
      assert.notDeepEqual(sorted, [...IDS].sort());
      await store.migrate();
      assert.deepEqual(await shown(store), expected.MemoryStore);
    } finally {
      store.close();
      await sql.end({ timeout: 1 });
      await database.drop();
    }
  }),
});
