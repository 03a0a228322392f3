/**
 * KvStore at production size: one Deno KV SQLite file loaded with raw
 * `atomic()` batches of the store's own keys and values (taken from records
 * the store wrote) to the size of a payment team's (1M intents, mostly
 * settled or failed, with their holds; 100k dead letters with their index
 * by time; 500k counts, 500k replay records and 500k redrive marks expiring
 * from 1 to 9 days ahead, with `expireIn` as the store sets it; 25k leases)
 * and one left empty.
 * It then times the store's own calls on each, alternated, median of 3
 * rounds (each the mean of its calls), with the keys each call read
 * (`getMany` keys and `list` entries, counted on the handle), then every
 * page of dead letters, newest first.
 *
 * Last, what Deno KV itself does with the data: its SQLite back-end deletes
 * expired keys in one statement (`delete from kv where expiration_ms <= now`)
 * when a handle opens and then whenever the earliest expiry passes (at least
 * once a minute), on the thread that commits; reads do not filter them out
 * until then. So a file reopened after the service was down holds back its
 * first read for the whole backlog. On copies of the file, with the handle
 * closed, this sets the expiry of 11% of the expiring keys, then of all of
 * them (a stop longer than the longest `expireIn`), into the past with
 * `node:sqlite`, and times an open to its first read, then another.
 *
 * `deno run --allow-read --allow-write bench/kv_scale.ts [--intents 1000000]
 * [--dir /tmp/kv_scale]` (1.5 to 3 minutes at that size). docs/stores.md
 * holds a run.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { parseArgs } from "node:util";
import { readArgs, refuseArgs } from "./_measure.ts";
import { DatabaseSync } from "node:sqlite";
import { KvStore } from "../store/kv.ts";
import { countingKv, ms, storeOps, timeOps, timePages } from "./_store_ops.ts";

const { values } = readArgs("bench/kv_scale.ts", () =>
  parseArgs({
    args: Deno.args,
    options: {
      intents: { type: "string", default: "1000000" },
      dir: { type: "string", default: "/tmp/kv_scale" },
    },
  }));
const INTENTS = Number(values.intents);
if (!Number.isSafeInteger(INTENTS) || INTENTS < 10_000) {
  refuseArgs(
    "bench/kv_scale.ts",
    "--intents must be a whole number of at least 10000",
  );
}
/** The rest scale with the intents: 1/10 dead letters, 1/2 counts, replay records and marks, 1/40 leases. */
const LETTERS = INTENTS / 10;
const KEYED = INTENTS / 2;
const LEASES = INTENTS / 40;
const NOW = Date.now();
const DAY = 86_400_000;
const PREFIX = ["relayer"];

const dir = values.dir!;
await Deno.remove(dir, { recursive: true }).catch(() => {});
await Deno.mkdir(dir, { recursive: true });
const paths = { big: `${dir}/big.kv`, empty: `${dir}/empty.kv` };

// Templates: what the store writes under each key, from a store of its own.
const scratch = await Deno.openKv(":memory:");
{
  const store = new KvStore(scratch);
  const sent = {
    outcome: "sent" as const,
    txHash: "0x" + "ab".repeat(32),
    at: NOW,
  };
  await store.createIntent({
    id: "settled",
    state: "settled",
    hold: "captured",
    settlingSince: NOW,
    mayHaveSent: true,
    lastBroadcast: sent,
    txHashes: [sent.txHash],
  });
  await store.createIntent({
    id: "failed",
    state: "failed",
    hold: "voided",
    settlingSince: NOW,
  });
  await store.createIntent({
    id: "settling",
    state: "settling",
    hold: "pending",
    settlingSince: NOW,
    mayHaveSent: true,
    lastBroadcast: sent,
    txHashes: [sent.txHash],
  });
  await store.createIntent({
    id: "authorized",
    state: "authorized",
    hold: "pending",
  });
  await store.createIntent({
    id: "needs_review",
    state: "needs_review",
    hold: "pending",
    settlingSince: NOW,
    mayHaveSent: true,
    lastBroadcast: sent,
    txHashes: [sent.txHash],
  });
  await store.createIntent({ id: "created", state: "created" });
  await store.admit({
    count: "job",
    claim: { key: "qstash:claim", now: NOW, expiresAt: NOW + 600_000 },
    now: NOW,
  });
  const held = await store.createIntent({
    id: "leased",
    state: "settling",
    hold: "pending",
    settlingSince: NOW,
  });
  await store.beginBroadcast("leased", held.version, NOW, {
    lease: { owner: "owner-1", ttlMs: 30_000, now: NOW, keep: true },
  });
  await store.putDeadLetter({
    jobId: "dl",
    intentId: "failed",
    deliveries: 10,
    cause: "exhausted",
    reason: "gave up after 10 deliveries",
    resolution: "intent failed, hold voided",
    lastError: "signer answered 500: upstream timeout",
    poisonedAt: NOW,
    queue: { queue: "qstash", messageId: "msg_0123456789abcdef" },
  });
  const letter = (await store.getDeadLetter("dl"))!;
  await store.putDeadLetter({ ...letter, jobId: "dl2" });
  await store.redrive("dl2", (await store.getDeadLetter("dl2"))!.version);
}
const template = new Map<string, unknown>();
for await (const entry of scratch.list({ prefix: PREFIX })) {
  template.set(entry.key.slice(1).join("/"), entry.value);
}
scratch.close();
const t = (key: string) => {
  if (!template.has(key)) throw new Error(`no template for ${key}`);
  return template.get(key) as Record<string, unknown>;
};
const STATES = [
  "settled",
  "failed",
  "settling",
  "authorized",
  "needs_review",
  "created",
] as const;
/** 60% settled, 30% failed, 4% settling, 3% authorized, 2% in review, 1% created. */
function stateOf(i: number): (typeof STATES)[number] {
  const r = ((i * 2654435761) % 1000) / 1000;
  return r < 0.60
    ? "settled"
    : r < 0.90
    ? "failed"
    : r < 0.94
    ? "settling"
    : r < 0.97
    ? "authorized"
    : r < 0.99
    ? "needs_review"
    : "created";
}
const pad = (i: number, n: number) => String(i).padStart(n, "0");
/** From a day to 9 days ahead (11% are set into the past at the end). */
const expiryOf = (i: number) =>
  DAY + Math.floor(((i * 7919) % KEYED) * (8 * DAY / KEYED));

type Set = [Deno.KvKey, unknown, number | undefined];
async function load(kv: Deno.Kv, count: number, make: (i: number) => Set[]) {
  let batch: Set[] = [];
  let bytes = 0;
  const inFlight: Promise<unknown>[] = [];
  const flush = async () => {
    const atomic = kv.atomic();
    for (const [key, value, expireIn] of batch) {
      if (expireIn === undefined) atomic.set(key, value);
      else atomic.set(key, value, { expireIn });
    }
    batch = [];
    bytes = 0;
    inFlight.push(atomic.commit());
    if (inFlight.length >= 4) await inFlight.shift();
  };
  for (let i = 1; i <= count; i++) {
    for (const set of make(i)) {
      batch.push(set);
      bytes += 600;
      if (batch.length >= 900 || bytes > 500_000) await flush();
    }
  }
  if (batch.length > 0) await flush();
  await Promise.all(inFlight);
}

const started = performance.now();
const big = await Deno.openKv(paths.big);
await load(big, INTENTS, (i) => {
  const id = `pi_${pad(i, 8)}`;
  const state = stateOf(i);
  const sets: Set[] = [[[...PREFIX, "intent", id], {
    ...t(`intent/${state}`),
    id,
  }, undefined]];
  if (state !== "created") {
    sets.push([[...PREFIX, "hold", id], t(`hold/${state}`), undefined]);
  }
  return sets;
});
await load(big, LETTERS, (i) => {
  const jobId = `dl_${pad(i, 8)}`;
  const poisonedAt = NOW -
    Math.floor(((i * 104729) % LETTERS) * (90 * DAY / LETTERS));
  return [
    [[...PREFIX, "dead", jobId], {
      ...t("dead/dl"),
      jobId,
      intentId: `pi_${pad(i * 9, 8)}`,
      poisonedAt,
    }, undefined],
    [
      [...PREFIX, "dead_by_time", Number.MAX_SAFE_INTEGER - poisonedAt, jobId],
      jobId,
      undefined,
    ],
  ];
});
await load(big, KEYED, (i) => {
  const ms = expiryOf(i);
  return [
    [[...PREFIX, "deliveries", `job_${pad(i, 9)}`], {
      ...t("deliveries/job"),
      n: 1 + i % 5,
      expiresAt: NOW + ms,
    }, ms],
    [[...PREFIX, "claim", `qstash:${pad(i, 12)}`], {
      ...t("claim/qstash:claim"),
      expiresAt: NOW + ms,
    }, ms],
    [[...PREFIX, "redriven", `job_${pad(i, 9)}`], t("redriven/dl2"), ms],
  ];
});
await load(big, LEASES, (i) => [[
  [...PREFIX, "lease", `pi_${pad(i * 37, 8)}`],
  { ...t("lease/leased"), owner: `owner-${i % 16}`, expiresAt: NOW + 30_000 },
  3_600_000,
]]);
big.close();
const mb = (path: string) => (Deno.statSync(path).size / 1e6).toFixed(0);
console.log(
  `loaded in ${
    ((performance.now() - started) / 1000).toFixed(0)
  } s: ${INTENTS} intents (and holds), ${LETTERS} dead letters, ${KEYED} counts, replay records and redrive marks, ${LEASES} leases: ${
    mb(paths.big)
  } MB`,
);
// What each kind of key takes: its keys and values as stored, and the
// file's bytes for each byte of them (SQLite's pages and the index on
// expiry). A key is `0x02 "relayer" 0x00 0x02 kind 0x00 …` encoded.
{
  const db = new DatabaseSync(paths.big, { readOnly: true });
  const kinds = db.prepare(
    `SELECT substr(k, 11, instr(substr(k, 11), x'00') - 1) AS kind,
      count(*) AS n, sum(length(k) + length(v)) AS bytes
    FROM kv GROUP BY kind ORDER BY kind`,
  ).all() as { kind: Uint8Array; n: number; bytes: number }[];
  db.close();
  const total = kinds.reduce((sum, { bytes }) => sum + Number(bytes), 0);
  const text = new TextDecoder();
  console.log(
    `stored, key and value bytes a record: ${
      kinds.map(({ kind, n, bytes }) =>
        `${text.decode(kind)} ${n} × ${Math.round(Number(bytes) / Number(n))}`
      ).join(", ")
    }; the file is ${
      (Deno.statSync(paths.big).size / total).toFixed(2)
    } × their sum`,
  );
}

const handles = {
  big: await Deno.openKv(paths.big),
  empty: await Deno.openKv(paths.empty),
};
const counted = {
  big: countingKv(handles.big),
  empty: countingKv(handles.empty),
};
const stores = {
  big: new KvStore(counted.big.handle),
  empty: new KvStore(counted.empty.handle),
};
await timeOps(
  storeOps(NOW, { name: "admit({ count, claim })", calls: 200 }),
  stores,
  () => counted.big.read.keys,
);
// Every dead letter, newest first, in pages of 1,000.
await timePages(stores.big, () => counted.big.read.keys);
handles.big.close();
handles.empty.close();

// The service down a while: 11% of the expiring keys have expired when
// the file is opened again. Deno KV deletes them before its first answer.
async function openToFirstRead(path: string): Promise<number> {
  const started = performance.now();
  const kv = await Deno.openKv(path);
  await kv.get([...PREFIX, "intent", "readyz"]);
  const took = performance.now() - started;
  kv.close();
  return took;
}
const size = Deno.statSync(paths.big).size;
/** Sets the expiry of every `share`th expiring key into the past, on a copy. */
function expiredCopy(share: number): { path: string; expired: number } {
  const path = `${dir}/backlog_${share}.kv`;
  Deno.copyFileSync(paths.big, path);
  const db = new DatabaseSync(path);
  const expired = db.prepare(
    "UPDATE kv SET expiration_ms = ? WHERE expiration_ms >= 0 AND expiration_ms % ? = 0",
  ).run(Date.now() - 60_000, share).changes;
  db.close();
  return { path, expired: Number(expired) };
}
for (const share of [9, 1]) {
  const copy = expiredCopy(share);
  const backlog = await openToFirstRead(copy.path);
  const none = await openToFirstRead(copy.path);
  console.log(
    `\nopen to first read, ${copy.expired} keys expired while closed: ${
      ms(backlog)
    } ms (${
      (backlog * 1000 / copy.expired).toFixed(1)
    } µs a key), then reopened ${ms(none)} ms; ${mb(copy.path)} MB after`,
  );
  await Deno.remove(copy.path);
}
console.log(
  `\nopen to first read, the empty file: ${
    ms(await openToFirstRead(paths.empty))
  } ms; files: ${(size / 1e6).toFixed(0)} MB at size, ${
    mb(paths.empty)
  } MB empty`,
);
