/**
 * `openService().drain()` on a `KV_PATH` file whose deliveries outlive
 * its budget, with no other program holding the file: Deno KV's SQLite
 * thread, busy only with this process's writes, answers the drain's probe
 * within the half second the probe gets at the least, however little of
 * the budget is left. KV
 * is closed and the cut-short deliveries counted, as ever; the file is
 * not left open as one another program holds locked (which would end the
 * process with exit 1 and a line sending the operator after a lock that
 * is not there).
 */
import assert from "node:assert/strict";
import { openService } from "../main.ts";
import { loadConfig } from "../webhook/config.ts";
import { hmacSignature } from "../webhook/_auth.ts";
import { slowSigner } from "./_slow_signer.ts";
import { timeout } from "./_timeout.ts";

const SECRET = "drain-cut-secret-0123456789";
const OPS_TOKEN = "drain-cut-ops-0123456789";

Deno.test(
  "openService().drain() whose delivery outlives its budget closes a KV_PATH file no other program holds, and counts the delivery cut short, not leaving the file open as locked",
  timeout(20_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_drain_cut_" });
    const signer = slowSigner(1_500);
    const service = await openService(
      loadConfig({
        SENDER_URL: signer.url,
        WEBHOOK_SECRET: SECRET,
        OPS_TOKEN,
        KV_PATH: `${dir}/relayer.kv`,
      }),
      { log: () => {}, random: () => 0 },
    );
    let inFlight: Promise<Response> | undefined;
    try {
      await (await service.fetch(
        new Request("http://relayer/v1/intents", {
          method: "POST",
          headers: { authorization: `Bearer ${OPS_TOKEN}` },
          body: JSON.stringify({ id: "pi_1", state: "authorized" }),
        }),
      )).body?.cancel();
      const body = JSON.stringify({
        job: { intentId: "pi_1", kind: "settle" },
      });
      const t = Math.floor(Date.now() / 1000);
      inFlight = service.fetch(
        new Request("http://relayer/v1/deliveries", {
          method: "POST",
          body,
          headers: { "x-signature": hmacSignature(SECRET, body, t) },
        }),
      );
      await signer.firstStarted;
      // Deno KV's thread still busy with the writes of other deliveries
      // as the drain's budget runs out (here: none of it left): the
      // probe waits its turn behind them, tens of milliseconds.
      const busy = Array.from(
        { length: 100 },
        (_, i) => service.kv!.set(["test", "busy", i], "x".repeat(200)),
      );
      assert.equal(await service.drain(0), 1);
      assert.equal(service.lockedKvPath, null);
      await assert.rejects(service.kv!.get(["x"])); // closed
      const settled = await Promise.allSettled(busy);
      assert.deepEqual(settled.filter((r) => r.status === "rejected"), []);
    } finally {
      await inFlight?.then((res) => res.body?.cancel(), () => {});
      await signer.close();
      await Deno.remove(dir, { recursive: true });
    }
  }),
);
