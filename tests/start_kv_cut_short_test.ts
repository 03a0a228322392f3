/**
 * `main.ts` started on a Deno KV file cut to 0 bytes with its `-wal` file
 * beside it, as a crash leaves it (a restore of the file alone that failed,
 * a truncation). The records since the last checkpoint, perhaps all of
 * them, live in the `-wal`; SQLite reads an empty file as a new database
 * and drops that WAL, and the service started with no payment records (a
 * payment it had sent could be sent again). The start refuses in one line
 * and leaves both files as they were. So it does with the file gone and
 * its `-wal` left (the file moved or removed alone): SQLite dropped that
 * WAL too, reading no file as a new database.
 */
import assert from "node:assert/strict";
import { assertOneLine, startOnKv } from "./_main_process.ts";
import { timeout } from "./_timeout.ts";

/** How the file is lost, and the start's refusal for `path` and its -wal's `bytes`. */
const CASES: {
  name: string;
  lose: (path: string) => Promise<void>;
  refusal: (path: string, bytes: number) => string;
}[] = [
  {
    name: "a Deno KV file cut to 0 bytes",
    lose: (path) => Deno.truncate(path, 0),
    refusal: (path, bytes) =>
      `^relayer: cannot start: KV_PATH: ${path} is empty \\(0 bytes\\) and its -wal file holds ${bytes} bytes: the file was cut short, and its records may be in the -wal\\. Keep both files as they are \\(they may hold every payment's record\\), restore the store from a backup, then start again\\.$`,
  },
  {
    name: "a Deno KV file removed",
    lose: (path) => Deno.remove(path),
    refusal: (path, bytes) =>
      `^relayer: cannot start: KV_PATH: ${path} is missing and its -wal file holds ${bytes} bytes: the file was moved or removed without it, and its records may be in the -wal\\. Keep the -wal as it is \\(it may hold every payment's record\\), put the file back beside it or restore the store from a backup, then start again\\.$`,
  },
];

for (const { name, lose, refusal } of CASES) {
  Deno.test(
    `main.ts refuses in one line ${name} whose -wal holds records, and leaves the -wal as it was`,
    timeout(30_000, async (_t, signal) => {
      const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
      const path = `${dir}/relayer.kv`;
      const writer = await Deno.openKv(`${dir}/live.kv`);
      try {
        for (let i = 0; i < 20; i++) {
          await writer.set(["relayer", "intent", `pi_${i}`], { sent: true });
        }
        // The files as a crash leaves them, the WAL not yet checkpointed.
        for (const suffix of ["", "-wal", "-shm"]) {
          await Deno.copyFile(`${dir}/live.kv${suffix}`, `${path}${suffix}`);
        }
      } finally {
        writer.close();
      }
      await lose(path);
      const wal = await Deno.readFile(`${path}-wal`);
      assert.ok(wal.length > 0);
      try {
        const { served, code, stderr } = await startOnKv(path, dir, signal);
        assert.equal(
          served,
          false,
          `main.ts served on an empty store\n${stderr}`,
        );
        assert.equal(code, 1, stderr);
        assertOneLine(stderr, new RegExp(refusal(path, wal.length)));
        assert.deepEqual(await Deno.readFile(`${path}-wal`), wal);
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    }),
  );
}

Deno.test(
  "main.ts starts on an empty file beside an empty -wal: a -wal with no bytes holds no records, and is no file cut short",
  timeout(30_000, async (_t, signal) => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
    const path = `${dir}/relayer.kv`;
    await Deno.writeFile(path, new Uint8Array());
    await Deno.writeFile(`${path}-wal`, new Uint8Array());
    try {
      const { served, stderr } = await startOnKv(path, dir, signal);
      assert.ok(served, stderr);
      assert.doesNotMatch(stderr, /cut short|may be in the -wal/);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }),
);

Deno.test(
  "main.ts starts on a Deno KV file another instance has open, its -wal holding the records since the last checkpoint, and is no file cut short",
  timeout(30_000, async (_t, signal) => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
    const path = `${dir}/relayer.kv`;
    // Another instance on the file (deno serve --parallel's workers, a
    // rolling deploy): its handle open, the -wal not checkpointed.
    const other = await Deno.openKv(path);
    try {
      for (let i = 0; i < 20; i++) {
        await other.set(["relayer", "intent", `pi_${i}`], { sent: true });
      }
      assert.ok((await Deno.stat(path)).size > 0);
      assert.ok((await Deno.stat(`${path}-wal`)).size > 0);
      const { served, stderr } = await startOnKv(path, dir, signal);
      assert.ok(served, stderr);
      assert.doesNotMatch(stderr, /cut short|may be in the -wal/);
      const kept = await Array.fromAsync(
        other.list({ prefix: ["relayer", "intent"] }),
      );
      assert.equal(kept.length, 20);
    } finally {
      other.close();
      await Deno.remove(dir, { recursive: true });
    }
  }),
);
