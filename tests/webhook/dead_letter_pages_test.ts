/**
 * An operator pages through `GET /v1/dead-letters` while letters are
 * redriven or discarded between the pages, on every store: a letter there
 * from the first page to the last is listed exactly once, whatever was
 * removed before or behind the cursor, letters of the same time included.
 *
 * @module
 */

import assert from "node:assert/strict";
import { type Job, ScriptedSender } from "../../mod.ts";
import { createApp } from "../../webhook/app.ts";
import { BACKENDS } from "../_stores.ts";

const OPS = "ops-token-for-dead-letter-pages";
const ops = { authorization: `Bearer ${OPS}` };

for (const backend of BACKENDS) {
  Deno.test(`GET /v1/dead-letters paged while letters are redriven and discarded between pages lists each letter left exactly once [${backend.name}]`, async () => {
    const { store, close } = await backend.open();
    try {
      const n = 30;
      const id = (i: number) => `pi_${String(i).padStart(2, "0")}`;
      for (let i = 0; i < n; i++) {
        // Every third a settled payment, whose letter is discarded; the
        // others authorized, whose letters are redriven.
        await store.createIntent({
          id: id(i),
          state: i % 3 === 0 ? "settled" : "authorized",
          hold: i % 3 === 0 ? "captured" : "pending",
        });
        await store.putDeadLetter({
          jobId: `${id(i)}/settle`,
          intentId: id(i),
          deliveries: 3,
          cause: "exhausted",
          reason: "no luck after 3 deliveries",
          resolution: "job dropped, intent still authorized",
          lastError: "not authorized yet",
          // Three letters at each time: the job id orders them.
          poisonedAt: Math.floor(i / 3),
        });
      }
      const app = createApp({
        store,
        sender: new ScriptedSender({}),
        opsToken: OPS,
        redriveTo: { publish: (_job: Job) => Promise.resolve() },
      });
      const remove = async (intentId: string) => {
        const settled = Number(intentId.slice(3)) % 3 === 0;
        const res = await app.request(
          `/v1/dead-letters/${intentId}/settle${settled ? "" : "/redrive"}`,
          { method: settled ? "DELETE" : "POST", headers: ops },
        );
        assert.equal(res.status, settled ? 200 : 202, await res.text());
      };
      const listed: string[] = [];
      const removed = new Set<string>();
      let cursor: string | null = null;
      let ahead = 0;
      do {
        const res = await app.request(
          `/v1/dead-letters?limit=4${
            cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`
          }`,
          { headers: ops },
        );
        assert.equal(res.status, 200);
        const page = await res.json();
        listed.push(...page.items.map((l: { intentId: string }) => l.intentId));
        cursor = page.cursor;
        // The page's last letter (the cursor's own), and the oldest letter
        // not yet listed nor removed, far behind the cursor.
        const last = page.items.at(-1)?.intentId;
        if (last !== undefined) {
          await remove(last);
          removed.add(last);
        }
        while (
          ahead < n && (listed.includes(id(ahead)) || removed.has(id(ahead)))
        ) ahead++;
        if (cursor !== null && ahead < n) {
          await remove(id(ahead));
          removed.add(id(ahead));
        }
      } while (cursor !== null);
      assert.deepEqual(
        listed.filter((x, i) => listed.indexOf(x) !== i),
        [],
        "a letter listed twice",
      );
      const stayed = Array.from({ length: n }, (_, i) => id(i))
        .filter((x) => !removed.has(x) || listed.includes(x));
      assert.deepEqual(
        stayed.filter((x) => !listed.includes(x)),
        [],
        "a letter never listed",
      );
    } finally {
      await close();
    }
  });
}
