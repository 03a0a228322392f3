/**
 * `main.ts` started on a Deno KV store whose file, `-wal` or `-shm` file
 * another user owns (a restore or a `sqlite3` session run as root, the
 * service as its own user). Deno KV opened such a store and then panicked
 * with no line of ours ("KV collect expired failed: attempt to write a
 * readonly database", "Deno has panicked") when it could read but not
 * write the `-wal` or `-shm`, or refused it as "unable to open database
 * file" when it could not read one. The start refuses in one line that
 * names the file, what is wrong and what to do, and keeps `KV_PATH`.
 *
 * Run as root, the service is started without the capabilities that let
 * root pass over file permissions (`setpriv`), and the files are given to
 * `nobody`: it is then one more user that does not own them.
 */
import assert from "node:assert/strict";
import { assertOneLine, startMain } from "./_main_process.ts";
import { runs } from "./_runs.ts";
import { timeout } from "./_timeout.ts";

const SETTINGS = {
  SENDER_URL: "http://127.0.0.1:9/",
  WEBHOOK_SECRET: "start-secret-0123456789abcdef",
};

/** `deno` run by root as one that does not own the files. */
const NOT_OWNER = [
  "setpriv",
  "--inh-caps=-all",
  "--bounding-set=-dac_override,-dac_read_search,-fowner",
];

/** Whether this runs as root (`id -u`: `Deno.uid()` needs --allow-sys). */
const root = await new Deno.Command("id", { args: ["-u"] }).output()
  .then(({ stdout }) => new TextDecoder().decode(stdout).trim() === "0")
  .catch(() => false);

const available = root &&
  await runs(NOT_OWNER[0]!, [...NOT_OWNER.slice(1), "true"]);

/** Gives `file` to `nobody` with `mode`. */
function giveAway(file: string, mode: number): void {
  Deno.chownSync(file, 65534, 65534);
  Deno.chmodSync(file, mode);
}

const CASES: [string, string, number, RegExp][] = [
  ["-shm", "its -shm file", 0o644, /can only be read by this process/],
  ["-wal", "its -wal file", 0o644, /can only be read by this process/],
  ["-wal", "its -wal file", 0o600, /cannot be read by this process/],
  ["", "the file", 0o600, /cannot be read by this process/],
];

for (const [suffix, label, mode, words] of CASES) {
  Deno.test({
    name: `main.ts refuses in one line a Deno KV store whose ${
      suffix === "" ? "file" : `${suffix} file`
    } another user owns (mode ${
      mode.toString(8)
    }), naming it and what to do, with no panic`,
    ignore: !available,
    fn: timeout(30_000, async () => {
      const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
      const path = `${dir}/relayer.kv`;
      // Held open, so its -wal and -shm stay beside it, as after a crash.
      const kv = await Deno.openKv(path);
      try {
        await kv.set(["relayer", "made"], 1);
        giveAway(`${path}${suffix}`, mode);
        const service = startMain({ ...SETTINGS, KV_PATH: path }, {
          writeDir: dir,
          via: NOT_OWNER,
        });
        const { code, stderr } = await service.ended().finally(service.kill);
        assert.equal(code, 1, stderr);
        assert.doesNotMatch(stderr, /panicked/);
        assertOneLine(
          stderr,
          new RegExp(
            `^relayer: cannot start: KV_PATH: ${path} ${words.source} \\(${label}(:| cannot be written:) Permission denied \\(os error 13\\)\\): .*files another user owns.* by this process.*, then start again.*$`,
          ),
        );
        assert.doesNotMatch(stderr, /new file/);
      } finally {
        kv.close();
        await Deno.remove(dir, { recursive: true });
      }
    }),
  });
}
