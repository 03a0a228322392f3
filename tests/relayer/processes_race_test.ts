/**
 * Two relayer processes on one store: on one Deno KV SQLite file, as two
 * `deno serve` processes on `./data/relayer.kv` run (each its own handle
 * and KvStore, so neither sees the other's commits in flight nor its
 * cache), and on one PostgreSQL schema (where a server can run).
 *
 * - Every `deliver` job is delivered twice at once by each process (four
 *   copies, counted in the store): no two sends of one intent overlap,
 *   each intent is sent once and settled, and the counts in the file are
 *   exactly the deliveries the two processes made.
 * - Every `race` job is a QStash message that process 0 delivers while
 *   process 1 gives up on it, then delivers a late copy: nothing is sent
 *   once the give-up answered, and the intent ends as DESIGN §5 and §14
 *   say (settled, failed only when every send was declared not sent, in
 *   review, or still authorized with the give-up's dead letter).
 *
 * No delivery may throw: a store failure here is one process's write
 * refused because of the other's, or on PostgreSQL two writes handed one
 * connection (a write unanswered, or a bare "current transaction is
 * aborted"; see `store/_reserve_turns.ts`).
 */
import assert from "node:assert/strict";
import { workerReports } from "./_worker_reports.ts";
import type { Store } from "../../mod.ts";
import { KvStore } from "../../store/kv.ts";
import {
  openPostgresStore,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";

const ROOT = new URL("../../", import.meta.url);
const WORKER = new URL("./_race_worker.ts", import.meta.url);

/** How the signer answers each race intent's sends and receipts. */
const BEHAVIOURS = ["confirms", "pending", "not_sent", "unknown"] as const;
type Behaviour = typeof BEHAVIOURS[number];

interface Report {
  deliveries: Record<string, number>;
  outcomes: Record<string, number>;
  gaveUp: Record<string, { at: number; action: string; reason: string }>;
  thrown: string[];
}

/** A store both processes open, and what they are told to open. */
interface Shared {
  readonly store: Store;
  readonly worker: { path: string } | { url: string; schema: string };
  readonly dir: string;
  close(): Promise<void>;
}

Deno.test("two relayer processes on one KV file never overlap sends, count every delivery exactly, and send nothing after a give-up the other answered", async () => {
  const dir = await Deno.makeTempDir({ prefix: "relayer_kv_processes_" });
  const path = `${dir}/relayer.kv`;
  const kv = await Deno.openKv(path);
  await race({
    store: new KvStore(kv),
    worker: { path },
    dir,
    async close() {
      kv.close();
      await Deno.remove(dir, { recursive: true });
    },
  });
});

Deno.test({
  name:
    "two relayer processes on one PostgreSQL schema never overlap sends, count every delivery exactly, and send nothing after a give-up the other answered",
  ignore: !postgresAvailable,
  async fn() {
    const { store, schema, close } = await openPostgresStore();
    const dir = await Deno.makeTempDir({ prefix: "relayer_pg_processes_" });
    await race({
      store,
      worker: { url: await postgresUrl(), schema },
      dir,
      async close() {
        await close();
        await Deno.remove(dir, { recursive: true });
      },
    });
  },
});

async function race(shared: Shared): Promise<void> {
  const { store, dir } = shared;
  const pad = (i: number) => String(i).padStart(4, "0");
  const delivered = Array.from({ length: 16 }, (_, i) => `pi_d${pad(i)}`);
  const raced = Array.from({ length: 16 }, (_, i) => `pi_r${pad(i)}`);
  const behaviour = new Map<string, Behaviour>(
    raced.map((id, i) => [id, BEHAVIOURS[i % BEHAVIOURS.length]!]),
  );
  for (const id of [...delivered, ...raced]) {
    await store.createIntent({ id, state: "authorized", hold: "pending" });
  }

  const inFlight = new Map<string, number>();
  const sends = new Map<string, { at: number; outcome: string }[]>();
  const overlaps: string[] = [];
  const signer = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (request) => {
      const url = new URL(request.url);
      if (request.method === "POST" && url.pathname === "/send") {
        const at = Date.now();
        const { intentId } = await request.json() as { intentId: string };
        const now = (inFlight.get(intentId) ?? 0) + 1;
        inFlight.set(intentId, now);
        if (now > 1) overlaps.push(intentId);
        const mine = sends.get(intentId) ?? [];
        sends.set(intentId, mine);
        // Long enough for a copy or the give-up to arrive mid-send.
        await new Promise((resolve) => setTimeout(resolve, 15));
        inFlight.set(intentId, inFlight.get(intentId)! - 1);
        const how = behaviour.get(intentId) ?? "confirms";
        mine.push({ at, outcome: how });
        if (how === "not_sent") {
          return Response.json({ error: "nonce too low", notSent: true }, {
            status: 400,
          });
        }
        if (how === "unknown") {
          return Response.json({ error: "node timed out" }, { status: 502 });
        }
        return Response.json({ txHash: `0x${intentId}_${mine.length}` });
      }
      if (request.method === "GET" && url.pathname.startsWith("/receipt/")) {
        const intentId = url.pathname.slice("/receipt/0x".length)
          .replace(/_\d+$/, "");
        return Response.json({
          status: behaviour.get(intentId) === "pending"
            ? "pending"
            : "confirmed",
        });
      }
      return new Response(null, { status: 404 });
    },
  );

  try {
    const jobs = [
      ...delivered.map((intentId) => ({ intentId, kind: "deliver" })),
      ...raced.map((intentId) => ({ intentId, kind: "race" })),
    ];
    const workers = [0, 1].map((role) =>
      new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "--allow-net=127.0.0.1",
          "--allow-env",
          `--allow-read=${dir}`,
          `--allow-write=${dir}`,
          "--unstable-kv",
          WORKER.pathname,
          JSON.stringify({
            store: shared.worker,
            signer: `http://127.0.0.1:${signer.addr.port}`,
            role,
            copies: 2,
            jobs,
          }),
        ],
        cwd: ROOT.pathname,
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).output()
    );
    const reports = workerReports<Report>(await Promise.all(workers));

    // A PostgreSQL write whose answer did not come within its bound may
    // have landed: the delivery fails, as it would under a slow server,
    // and the queue delivers the job again. Anything else thrown is the
    // store refusing one process's write because of the other's.
    const thrown = reports.flatMap((r) => r.thrown);
    assert.deepEqual(
      thrown.slice(0, 5),
      [],
      `${thrown.length} deliveries or give-ups threw`,
    );
    assert.deepEqual(overlaps, [], "two sends of one intent overlapped");
    for (const id of delivered) {
      const jobId = `${id}/settle`;
      const made = reports.reduce(
        (n, r) => n + (r.deliveries[jobId] ?? 0),
        0,
      );
      assert.ok(made >= 4, `${jobId}: ${made} deliveries`);
      assert.equal(
        await store.deliveries(jobId),
        made,
        `${jobId}: counted, against delivered`,
      );
      const intent = await store.getIntent(id);
      assert.equal(intent?.state, "settled", id);
      assert.equal(intent?.hold, "captured", id);
      assert.equal(sends.get(id)?.length, 1, `${id} sent more than once`);
    }
    for (const id of raced) {
      const jobId = `${id}/settle`;
      const gaveUp = reports[1]!.gaveUp[jobId];
      assert.ok(gaveUp !== undefined, `${jobId}: the give-up never answered`);
      const mine = sends.get(id) ?? [];
      const late = mine.filter((send) => send.at > gaveUp.at);
      assert.deepEqual(late, [], `${id}: sent after the give-up answered`);
      const intent = (await store.getIntent(id))!;
      const how = behaviour.get(id)!;
      const letter = await store.getDeadLetter(jobId);
      const seen =
        `${id} (${how}): ${intent.state}, ${mine.length} sends; give-up: ${gaveUp.action} ${gaveUp.reason}`;
      if (mine.length === 0) {
        // Dropped before any delivery sent: the letter is its record.
        assert.equal(intent.state, "authorized", seen);
        assert.equal(intent.hold, "pending", seen);
        assert.ok(letter !== null, `${seen}: no dead letter`);
        continue;
      }
      assert.equal(
        mine.length,
        how === "not_sent" ? mine.length : 1,
        `${seen}: a send that may have left was sent again`,
      );
      const expected = {
        confirms: ["settled", "captured"],
        pending: ["needs_review", "pending"],
        not_sent: ["failed", "voided"],
        unknown: ["needs_review", "pending"],
      }[how];
      assert.deepEqual([intent.state, intent.hold], expected, seen);
    }
  } finally {
    await signer.shutdown();
    await shared.close();
  }
}
