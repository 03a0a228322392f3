/**
 * Two relayer processes on one PostgreSQL database, each delivering every
 * job twice at once (duplicates within a process and across the two):
 * no two sends of one intent overlap, each intent is sent once and
 * settled, and the delivery counts in the store are exactly the deliveries
 * the two processes made.
 */
import assert from "node:assert/strict";
import { workerReports } from "./_worker_reports.ts";
import {
  openPostgresStore,
  postgresAvailable,
  postgresUrl,
} from "../_postgres.ts";

const ROOT = new URL("../../", import.meta.url);
const WORKER = new URL("./_postgres_worker.ts", import.meta.url);

Deno.test({
  name:
    "two relayer processes on one database never overlap sends and count every delivery exactly",
  ignore: !postgresAvailable,
  async fn() {
    const { store, schema, close } = await openPostgresStore();
    const intents = Array.from(
      { length: 24 },
      (_, i) => `pi_${String(i).padStart(4, "0")}`,
    );
    for (const id of intents) {
      await store.createIntent({ id, state: "authorized", hold: "pending" });
    }

    const inFlight = new Map<string, number>();
    const sends = new Map<string, number>();
    const overlaps: string[] = [];
    const signer = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen() {} },
      async (request) => {
        const url = new URL(request.url);
        if (request.method === "POST" && url.pathname === "/send") {
          const { intentId } = await request.json() as { intentId: string };
          const now = (inFlight.get(intentId) ?? 0) + 1;
          inFlight.set(intentId, now);
          if (now > 1) overlaps.push(intentId);
          const n = (sends.get(intentId) ?? 0) + 1;
          sends.set(intentId, n);
          // Long enough for a duplicate to arrive mid-send.
          await new Promise((resolve) => setTimeout(resolve, 20));
          inFlight.set(intentId, inFlight.get(intentId)! - 1);
          return Response.json({ txHash: `0x${intentId}_${n}` });
        }
        if (request.method === "GET" && url.pathname.startsWith("/receipt/")) {
          return Response.json({ status: "confirmed" });
        }
        return new Response(null, { status: 404 });
      },
    );

    try {
      const args = JSON.stringify({
        url: await postgresUrl(),
        schema,
        signer: `http://127.0.0.1:${signer.addr.port}`,
        jobs: intents,
        copies: 2,
      });
      const workers = [1, 2].map(() =>
        new Deno.Command(Deno.execPath(), {
          args: [
            "run",
            "--allow-net=127.0.0.1",
            "--allow-env",
            WORKER.pathname,
            args,
          ],
          cwd: ROOT.pathname,
          stdin: "null",
          stdout: "piped",
          stderr: "piped",
        }).output()
      );
      const reports = workerReports<{
        deliveries: Record<string, number>;
        outcomes: Record<string, number>;
      }>(await Promise.all(workers));

      assert.deepEqual(overlaps, [], "two sends of one intent overlapped");
      let total = 0;
      for (const id of intents) {
        const jobId = `${id}/settle`;
        const made = reports.reduce(
          (n, r) => n + (r.deliveries[jobId] ?? 0),
          0,
        );
        total += made;
        assert.equal(
          await store.deliveries(jobId),
          made,
          `${jobId}: counted vs made`,
        );
        const intent = await store.getIntent(id);
        assert.equal(intent?.state, "settled", id);
        assert.equal(intent?.hold, "captured", id);
        assert.equal(sends.get(id), 1, `${id} was sent ${sends.get(id)} times`);
      }
      // Both processes delivered every job, two copies at a time, so at
      // least four deliveries a job were counted (more where a sent job
      // came back for its receipt; how many more is the machine's timing).
      for (const report of reports) {
        assert.equal(Object.keys(report.deliveries).length, intents.length);
      }
      assert.ok(
        total >= intents.length * 2 * 2,
        `only ${total} deliveries`,
      );
    } finally {
      await signer.shutdown();
      await close();
    }
  },
});
