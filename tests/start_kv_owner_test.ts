/**
 * `main.ts` started on a Deno KV store whose file, `-wal` or `-shm` file
 * another user owns (a restore or a `sqlite3` session run as root, the
 * service as its own user). Deno KV opened such a store and then panicked
 * with no line of ours ("KV collect expired failed: attempt to write a
 * readonly database", "Deno has panicked") when it could read but not
 * write the `-wal` or `-shm`. The start refuses in one line that says
 * what is wrong and what to do, and keeps `KV_PATH` (as it does a file it
 * cannot read at all: "unable to open database file").
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

/** The start's refusal of `path` whose file of `label` another user owns. */
type Refusal = (path: string, label: string) => RegExp;

const READ_ONLY: Refusal = (path) =>
  new RegExp(
    `^relayer: cannot start: KV_PATH: ${path} can only be read by this process \\(SQLite cannot write its -wal or -shm file: "attempt to write a readonly database"\\): a volume mounted read-only, or files another user owns\\. Make the file, its -wal and -shm files and their folder writable by this process, then start again\\.$`,
  );
const UNREADABLE: Refusal = (path) =>
  new RegExp(
    `^relayer: cannot start: KV_PATH: cannot open ${path} as a Deno KV store \\(Error: unable to open database file.*\\): check that KV_PATH names this service's store, a file this process can open, and keep that file as it is \\(it may hold every payment's record\\)\\.$`,
  );

const CASES: [string, number, Refusal][] = [
  ["-shm", 0o644, READ_ONLY],
  ["-wal", 0o644, READ_ONLY],
  ["-wal", 0o600, UNREADABLE],
  ["", 0o600, UNREADABLE],
];

for (const [suffix, mode, refusal] of CASES) {
  Deno.test({
    name: `main.ts refuses in one line a Deno KV store whose ${
      suffix === "" ? "file" : `${suffix} file`
    } another user owns (mode ${
      mode.toString(8)
    }), saying what to do, with no panic`,
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
        assertOneLine(stderr, refusal(path, suffix));
        assert.doesNotMatch(stderr, /new file/);
      } finally {
        kv.close();
        await Deno.remove(dir, { recursive: true });
      }
    }),
  });
}
