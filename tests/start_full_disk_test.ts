/**
 * `main.ts` started on a full disk (a real tmpfs of 4 MiB filled by a
 * ballast file), its store made before. Deno KV either cannot open the
 * file ("disk I/O error", which read as "not a Deno KV store: point
 * KV_PATH at a new file", advice that would leave every payment's record
 * behind), or, a WAL beside the file and a key past its expiry, opens it
 * and panics as it deletes the key ("Deno has panicked. This is a bug in
 * Deno"). Either way the service refuses to start in one line that names
 * the full disk and what to do.
 */
import assert from "node:assert/strict";
import { assertOneLine, startMain } from "./_main_process.ts";
import { mountSmallDisk, smallDiskAvailable } from "./_small_disk.ts";
import { timeout } from "./_timeout.ts";

for (const wal of [false, true]) {
  Deno.test({
    name: `main.ts refuses in one line to start on a full disk (${
      wal
        ? "a WAL beside the file and a key past its expiry"
        : "the store closed cleanly"
    }), naming the disk and what to do`,
    ignore: !smallDiskAvailable,
    fn: timeout(30_000, async (_t, signal) => {
      const disk = mountSmallDisk("4m");
      if (typeof disk === "string") throw new Error(disk);
      const path = `${disk.dir}/relayer.kv`;
      let writer: Deno.Kv | undefined = await Deno.openKv(path);
      try {
        await writer.set(["relayer", "lapsed"], 1, { expireIn: 1 });
        if (!wal) {
          writer.close();
          writer = undefined;
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
        disk.fill();
        const service = startMain({
          SENDER_URL: "http://127.0.0.1:9/",
          WEBHOOK_SECRET: "start-secret-0123456789abcdef",
          KV_PATH: path,
        }, { writeDir: disk.dir });
        signal.addEventListener("abort", service.kill);
        const { code, stderr } = await service.ended();
        assert.equal(code, 1, stderr);
        assert.doesNotMatch(stderr, /panicked/);
        assertOneLine(
          stderr,
          new RegExp(
            `^relayer: cannot start: KV_PATH: the disk that holds ${path} is full \\(No space left on device \\(os error 28\\)\\): Deno KV cannot write its files there\\. Free space on that disk, then start again \\(keep KV_PATH: the store holds every payment's record\\)\\.$`,
          ),
        );
      } finally {
        writer?.close();
        disk.close();
      }
    }),
  });
}
