/**
 * `main.ts` started on a new Deno KV file while another instance makes it
 * (two instances started at once on a new store, `deno serve --parallel`'s
 * workers). The other instance's open makes the file (0 bytes), writes
 * its first page, then makes the `-wal` and writes to it. A start that
 * read the file's size (0 bytes) before that first page and the `-wal`'s
 * after those writes took the new store for a file cut short beside its
 * `-wal` and refused to start. The start reads the `-wal` first: a `-wal`
 * that holds something beside a file still 0 bytes after it is one cut
 * short.
 *
 * The moment is made with `strace`, which holds the start's look at the
 * `-wal` for a while (and writes that look's start to its log at once);
 * the store is made while it is held.
 */
import assert from "node:assert/strict";
import { startMain } from "./_main_process.ts";
import { runs } from "./_runs.ts";
import { timeout } from "./_timeout.ts";

/** How long `strace` holds each look (statx) at the `-wal`, in µs. */
const HELD_US = 3_000_000;

const available = await runs("strace", ["-qq", "-o", "/dev/null", "true"]);

Deno.test({
  name:
    "main.ts starts on a new Deno KV file another instance makes while it looks, rather than refuse it as a file cut short beside its -wal",
  ignore: !available || Deno.build.os !== "linux",
  fn: timeout(60_000, async (_t, signal) => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
    const path = `${dir}/relayer.kv`;
    const trace = `${dir}/strace.log`;
    // The file as the other instance's open has just made it.
    await Deno.writeFile(path, new Uint8Array(0));
    const service = startMain({
      SENDER_URL: "http://127.0.0.1:9/",
      WEBHOOK_SECRET: "start-secret-0123456789abcdef",
      KV_PATH: path,
    }, {
      writeDir: dir,
      via: [
        "strace",
        "-f",
        "-qq",
        "-o",
        trace,
        "-P",
        `${path}-wal`,
        "-e",
        "trace=statx",
        "-e",
        `inject=statx:delay_enter=${HELD_US}`,
      ],
    });
    signal.addEventListener("abort", service.kill);
    let other: Deno.Kv | undefined;
    let pid: number | undefined;
    /** Ends `main.ts` itself: it outlives `strace`, and holds the pipes. */
    const end = () => {
      if (pid === undefined) return;
      try {
        Deno.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    };
    try {
      // strace logs each look at the -wal as it begins (and holds it),
      // after the thread's id: a SIGKILL to it ends main.ts.
      for (;;) {
        const log = await Deno.readTextFile(trace).catch(() => "");
        const look = /^(\d+) +statx\(/m.exec(log);
        if (look !== null) {
          pid = Number(look[1]);
          break;
        }
        if (signal.aborted) throw new Error("the start never looked");
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      // The other instance makes the store while the start looks.
      other = await Deno.openKv(path);
      await other.set(["relayer", "made"], 1);
      assert.ok((await Deno.stat(`${path}-wal`)).size > 0);
      const base = await service.base();
      end();
      service.kill();
      const { stderr } = await service.ended();
      assert.notEqual(base, null, stderr);
      assert.doesNotMatch(stderr, /cannot start/);
    } finally {
      end();
      service.kill();
      other?.close();
      await Deno.remove(dir, { recursive: true });
    }
  }),
});
