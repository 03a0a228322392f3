/**
 * `main.ts` started on a store it can only read: its folder on a volume
 * mounted read-only (a real read-only bind mount of a tmpfs). Deno KV
 * either cannot open the file at all, or (a WAL beside it, as a crash
 * leaves one) opens it read-only and refuses every write after; either
 * way the service refuses to start in one line that says the folder or
 * the file is read-only and what to do, not that KV_PATH is no store.
 */
import assert from "node:assert/strict";
import { assertOneLine, startMain } from "./_main_process.ts";
import { mountSmallDisk, smallDiskAvailable } from "./_small_disk.ts";
import { timeout } from "./_timeout.ts";

const SETTINGS = {
  SENDER_URL: "http://127.0.0.1:9/",
  WEBHOOK_SECRET: "start-secret-0123456789abcdef",
};

function mount(args: string[]): void {
  const out = new Deno.Command("mount", { args, stderr: "piped" })
    .outputSync();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
}

/** A store on a tmpfs, seen through a read-only bind mount; `wal`: a handle keeps its WAL beside it meanwhile. */
async function onReadOnlyStore(
  wal: boolean,
  test: (readOnly: string) => Promise<void>,
): Promise<void> {
  const disk = mountSmallDisk("4m");
  if (typeof disk === "string") throw new Error(disk);
  const readOnly = Deno.makeTempDirSync({ prefix: "relayer_read_only_" });
  let writer: Deno.Kv | undefined = await Deno.openKv(
    `${disk.dir}/relayer.kv`,
  );
  try {
    await writer.set(["made"], 1);
    if (!wal) {
      writer.close(); // a clean close removes the WAL
      writer = undefined;
    }
    mount(["--bind", disk.dir, readOnly]);
    mount(["-o", "remount,bind,ro", readOnly]);
    await test(readOnly);
  } finally {
    writer?.close();
    new Deno.Command("umount", { args: ["-l", readOnly] }).outputSync();
    Deno.removeSync(readOnly);
    disk.close();
  }
}

for (const wal of [false, true]) {
  Deno.test({
    name: `main.ts refuses in one line a KV_PATH on a read-only volume (${
      wal ? "a WAL beside the file: Deno KV opens it read-only" : "no WAL"
    }), naming it read-only and what to make writable`,
    ignore: !smallDiskAvailable,
    fn: timeout(30_000, (_t, signal) =>
      onReadOnlyStore(wal, async (dir) => {
        const service = startMain(
          { ...SETTINGS, KV_PATH: `${dir}/relayer.kv` },
          { writeDir: dir },
        );
        // A service that started after all is stopped, so the mounts go.
        signal.addEventListener("abort", service.kill);
        try {
          const { code, stderr } = await service.ended();
          assert.equal(code, 1, stderr);
          assertOneLine(
            stderr,
            new RegExp(
              `^relayer: cannot start: KV_PATH: ${dir}/relayer\\.kv can only be read by this process \\(.*\\): .*read-only.* Make .* writable by this process, then start again\\.$`,
            ),
          );
        } finally {
          service.kill();
        }
      })),
  });
}
