/**
 * The service under `deno serve --parallel` (one isolate per `DENO_JOBS`,
 * each importing `main.ts`, all on one port) stops as one process does:
 * SIGTERM reaches every isolate, each drains its own deliveries, and an
 * isolate that drained first, kept alive by a client's connection, does
 * not end the process (`Deno.exit` ends every isolate) while another one's
 * delivery still runs.
 */
import assert from "node:assert/strict";
import {
  freePort,
  healthy,
  type MainProcess,
  signedDelivery,
  startMain,
} from "./_main_process.ts";
import { slowSigner } from "./_slow_signer.ts";
import { timeout } from "./_timeout.ts";

const SECRET = "parallel-secret-0123456789";
const OPS_TOKEN = "parallel-ops-0123456789";
/** How many isolates `deno serve --parallel` runs. */
const ISOLATES = 2;
/** Connections held open, made apart, so that every isolate holds one. */
const HELD = 16;

Deno.test(
  "deno serve --parallel: an isolate that drained, held by an open connection, does not exit the process under another's delivery",
  timeout(30_000, async (_t, signal) => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_parallel_" });
    const signer = slowSigner(3_000);
    const { service, base, port, everyIsolate } = await startParallel(
      {
        SENDER_URL: signer.url,
        SENDER_TIMEOUT: "5s",
        LEASE: "10s",
        WEBHOOK_SECRET: SECRET,
        OPS_TOKEN,
        KV_PATH: `${dir}/relayer.kv`,
        DENO_JOBS: String(ISOLATES),
      },
      dir,
      signal,
    ).catch(async (error: unknown) => {
      await signer.close();
      await Deno.remove(dir, { recursive: true });
      throw error;
    });
    const held: Deno.Conn[] = [];
    try {
      await healthy(base);
      await everyIsolate;
      // Its listener is bound once its module has run.
      await new Promise((resolve) => setTimeout(resolve, 500));
      const created = await fetch(`${base}/v1/intents`, {
        method: "POST",
        headers: { authorization: `Bearer ${OPS_TOKEN}` },
        body: JSON.stringify({ id: "pi_parallel", state: "authorized" }),
      });
      assert.equal(created.status, 201);
      await created.body?.cancel();
      // Requests whose bodies never end, answered 401 (unsigned): their
      // connections stay open, as a client's may through a stop.
      for (let i = 0; i < HELD; i++) {
        const conn = await Deno.connect({ hostname: "127.0.0.1", port });
        held.push(conn);
        await conn.write(
          new TextEncoder().encode(
            "POST /v1/deliveries HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 100\r\n\r\n{",
          ),
        );
        // Apart: connections made in a burst often all reach one isolate
        // (in half the runs without the gap, measured with the fix taken
        // out: the test then passed; 14 of 14 failed with it).
        await new Promise((resolve) => setTimeout(resolve, 30));
      }
      const answer = signedDelivery(base, SECRET, "pi_parallel").then(
        async (res) => `${res.status} ${await res.text()}`,
        (error: unknown) => `no answer: ${(error as Error).message}`,
      );
      const first = await Promise.race([
        signer.firstStarted.then(() => null),
        answer,
      ]);
      assert.equal(first, null, "the delivery was answered before it sent");
      service.child.kill("SIGTERM");
      const answered = await answer;
      for (const conn of held.splice(0)) conn.close();
      const { code, stdout, stderr } = await service.ended();
      assert.equal(
        signer.counts.finished,
        1,
        "the delivery's send was cut short",
      );
      assert.match(answered, /^503 .*"outcome":"retry"/);
      assert.equal(code, 0, stderr);
      assert.equal(
        stdout.split("\n").filter((line) =>
          line === "relayer: drained; KV closed"
        ).length,
        ISOLATES,
        stdout,
      );
    } finally {
      for (const conn of held) conn.close();
      signal.removeEventListener("abort", service.kill);
      service.kill();
      await service.ended().catch(() => {});
      await signer.close();
      await Deno.remove(dir, { recursive: true });
    }
  }),
);

/**
 * `main.ts` under `deno serve --parallel` on a port probed free, with
 * `env`, writing `dir`; killed on `signal`'s abort. A fixed port: on port
 * 0 each isolate would bind a port of its own. A process that takes it
 * between the probe and the bind (the machine is shared) has the service
 * refuse it, and another port is probed; at most three.
 *
 * Each isolate says its start line before it serves: until the last has,
 * the first takes every connection (`everyIsolate` waits for them all).
 */
async function startParallel(
  env: Record<string, string>,
  dir: string,
  signal: AbortSignal,
  probe: () => number = () => freePort().port,
): Promise<
  {
    service: MainProcess;
    base: string;
    port: number;
    everyIsolate: Promise<void>;
  }
> {
  for (let attempt = 1;; attempt++) {
    const port = probe();
    let started = 0;
    let allStarted = () => {};
    const everyIsolate = new Promise<void>((resolve) => allStarted = resolve);
    const service = startMain(env, {
      writeDir: dir,
      port,
      flags: ["--parallel"],
      onLine(line) {
        if (/^relayer: at most \d+ deliveries/.test(line)) {
          if (++started === ISOLATES) allStarted();
        }
      },
    });
    signal.addEventListener("abort", service.kill);
    const base = await service.base();
    if (base !== null) return { service, base, port, everyIsolate };
    signal.removeEventListener("abort", service.kill);
    service.kill();
    const { stderr } = await service.ended();
    if (attempt === 3 || !/the address to listen on is in use/.test(stderr)) {
      assert.fail(`the service did not say it listens: ${stderr}`);
    }
  }
}
