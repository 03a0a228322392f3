/**
 * `main.ts` started with a `KV_PATH` that is no store's file: a link to a
 * file that is not there (a volume not mounted at the link's end, a store
 * moved), a link that loops, a FIFO. Deno KV followed a dangling link and
 * made a new, empty store at its end, and the service started with none
 * of its payments' records (a payment it had sent could be sent again);
 * the others were refused in words that did not say what was wrong. Each
 * start refuses in one line that says what `KV_PATH` is and what to do.
 */
import assert from "node:assert/strict";
import { assertOneLine, startOnKv } from "./_main_process.ts";
import { timeout } from "./_timeout.ts";

const CASES: [
  string,
  (dir: string, path: string) => Promise<void>,
  (dir: string, path: string) => RegExp,
][] = [
  [
    "a link to a file that is not there",
    (dir, path) => Deno.symlink(`${dir}/volume/relayer.kv`, path),
    (dir, path) =>
      new RegExp(
        `^relayer: cannot start: KV_PATH: ${path} is a link to ${dir}/volume/relayer\\.kv, which does not exist: the store it points to is missing \\(a volume not mounted, a file moved\\)\\. Mount or restore the store there, then start again; only on the first start of a new service, point KV_PATH at ${dir}/volume/relayer\\.kv itself\\.$`,
      ),
  ],
  [
    "a link to a missing folder",
    (dir, path) => Deno.symlink(`${dir}/gone/relayer.kv`, path),
    (dir, path) =>
      new RegExp(
        `^relayer: cannot start: KV_PATH: ${path} is a link to ${dir}/gone/relayer\\.kv, which does not exist: `,
      ),
  ],
  [
    "a link that loops",
    (dir, path) =>
      Deno.symlink(`${dir}/b`, path).then(() => Deno.symlink(path, `${dir}/b`)),
    (_dir, path) =>
      new RegExp(
        `^relayer: cannot start: KV_PATH: ${path} is a link that leads back to itself \\(.*os error 40.*\\): point it, or KV_PATH, at this service's store, then start again\\.$`,
      ),
  ],
  [
    "a FIFO",
    async (_dir, path) => {
      const made = await new Deno.Command("mkfifo", { args: [path] }).output();
      assert.ok(made.success, "mkfifo");
    },
    (_dir, path) =>
      new RegExp(
        `^relayer: cannot start: KV_PATH: ${path} is a FIFO, not a file: Deno KV keeps its store in a file\\. Check that KV_PATH names this service's store, then start again\\.$`,
      ),
  ],
];

for (const [name, make, refusal] of CASES) {
  Deno.test(
    `main.ts refuses in one line a KV_PATH that is ${name}, and makes no store`,
    timeout(30_000, async () => {
      const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
      await Deno.mkdir(`${dir}/volume`); // a mount point, its volume not there
      const path = `${dir}/relayer.kv`;
      try {
        await make(dir, path);
        const { served, code, stderr } = await startOnKv(path, dir);
        assert.equal(served, false, `main.ts served: ${stderr}`);
        assert.equal(code, 1, stderr);
        assertOneLine(stderr, refusal(dir, path));
        assert.deepEqual(
          [...Deno.readDirSync(`${dir}/volume`)],
          [],
          "a store was made at the link's end",
        );
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    }),
  );
}
