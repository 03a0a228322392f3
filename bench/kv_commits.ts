/**
 * What a commit costs on a Deno KV SQLite file, by how much it holds and
 * how many are in flight: the measurement behind `KvStore`'s group commit.
 * Then what a read costs by how many keys it asks for: the price of each
 * key of a delivery's look (intent, hold, lease).
 *
 * Each row runs for 2 s, `--runs` times (default 3), on a fresh file in
 * the system's temporary folder (or `--kv-dir DIR`). A write is one
 * `check` (the key must be absent) and one `set` of a small record, the
 * shape of a replay record; `k` writes per commit go in one `atomic()`.
 * A read is one `getMany` of `k` keys that exist, 50 in flight, over
 * 2,000 records of each kind (a small file that stays in the page cache;
 * the three rows run in the same order on it every run). Printed: writes/s
 * and commits/s, reads/s, median (min–max).
 *
 * `deno task kv-commits [--runs 3] [--kv-dir DIR]`
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { parseArgs } from "node:util";
import { perSecond, readArgs, spread, wholeFlag } from "./_measure.ts";

const { runs, kvDir } = readArgs("kv-commits", () => {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      runs: { type: "string", default: "3" },
      "kv-dir": { type: "string" },
    },
  });
  return { runs: wholeFlag("runs", values.runs), kvDir: values["kv-dir"] };
}, "[--runs 3] [--kv-dir DIR]");

/** [writes per commit, commits in flight] */
const SHAPES: readonly [number, number][] = [
  [1, 1],
  [1, 50],
  [10, 5],
  [25, 2],
  [64, 1],
];

function writesPerSecond(
  kv: Deno.Kv,
  perCommit: number,
  inFlight: number,
): Promise<number> {
  let next = 0;
  return perSecond(inFlight, async () => {
    const atomic = kv.atomic();
    for (let i = 0; i < perCommit; i++) {
      const key = ["claim", next++];
      atomic.check({ key, versionstamp: null }).set(key, {
        expiresAt: 1_700_000_000_000 + next,
      }, { expireIn: 60_000 });
    }
    return (await atomic.commit()).ok ? perCommit : 0;
  });
}

/** Keys per read, {@linkcode READS_IN_FLIGHT} reads in flight. */
const READS: readonly number[] = [1, 2, 3];
const READS_IN_FLIGHT = 50;
const KINDS = ["intent", "hold", "lease"] as const;
const RECORDS = 2000;

async function seed(kv: Deno.Kv): Promise<void> {
  for (let i = 0; i < RECORDS; i += 100) {
    const atomic = kv.atomic();
    for (let j = i; j < i + 100; j++) {
      for (const kind of KINDS) {
        atomic.set([kind, j], { id: `pi_${j}`, kind, at: 1_700_000_000_000 });
      }
    }
    await atomic.commit();
  }
}

function readsPerSecond(kv: Deno.Kv, keys: number): Promise<number> {
  let next = 0;
  return perSecond(READS_IN_FLIGHT, async () => {
    const id = next++ % RECORDS;
    await kv.getMany(KINDS.slice(0, keys).map((kind) => [kind, id]));
    return 1;
  });
}

const int = (v: number) => Math.round(v).toLocaleString("en-US");

if (import.meta.main) {
  const measured = SHAPES.map(() => [] as number[]);
  const read = READS.map(() => [] as number[]);
  for (let run = 0; run < runs; run++) {
    for (const [i, [perCommit, inFlight]] of SHAPES.entries()) {
      const dir = await Deno.makeTempDir({
        prefix: "relayer_kv_commits_",
        ...(kvDir === undefined ? {} : { dir: kvDir }),
      });
      const kv = await Deno.openKv(`${dir}/commits.kv`);
      try {
        measured[i]!.push(await writesPerSecond(kv, perCommit, inFlight));
      } finally {
        kv.close();
        await Deno.remove(dir, { recursive: true });
      }
    }
    const dir = await Deno.makeTempDir({
      prefix: "relayer_kv_reads_",
      ...(kvDir === undefined ? {} : { dir: kvDir }),
    });
    const kv = await Deno.openKv(`${dir}/reads.kv`);
    try {
      await seed(kv);
      for (const [i, keys] of READS.entries()) {
        read[i]!.push(await readsPerSecond(kv, keys));
      }
    } finally {
      kv.close();
      await Deno.remove(dir, { recursive: true });
    }
  }
  console.log(
    `Deno KV on a SQLite file, ${runs} runs of 2 s, Deno ${Deno.version.deno}; median (min–max)\n`,
  );
  console.log("| writes per commit | in flight | writes/s | commits/s |");
  console.log("| ---: | ---: | ---: | ---: |");
  for (const [i, [perCommit, inFlight]] of SHAPES.entries()) {
    const writes = measured[i]!;
    console.log(
      `| ${perCommit} | ${inFlight} | ${spread(writes, int)} | ${
        spread(writes.map((w) => w / perCommit), int)
      } |`,
    );
  }
  console.log("\n| keys per read | in flight | reads/s |");
  console.log("| ---: | ---: | ---: |");
  for (const [i, keys] of READS.entries()) {
    console.log(`| ${keys} | ${READS_IN_FLIGHT} | ${spread(read[i]!, int)} |`);
  }
}
