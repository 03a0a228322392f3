/**
 * End to end over real sockets: the real service (`openService` from
 * main.ts: KvStore on a SQLite file, HttpSender) served with `Deno.serve`
 * on port 0, a signer stub on loopback, and the seed's three payments
 * delivered as signed QStash requests that honour every `Retry-After` on a
 * virtual clock. The final intents and holds equal the golden example's.
 * Then the service restarts on the same file and nothing is lost.
 */
import assert from "node:assert/strict";
import { openService, type Service } from "../main.ts";
import { loadConfig } from "../webhook/config.ts";
import { QSTASH, signQStash } from "./webhook/_signing.ts";
import { timeout } from "./_timeout.ts";

const PUBLIC_URL = "https://relayer.example.test";
const OPS_TOKEN = "e2e-ops-token-0123456789";

const golden = (await Deno.readTextFile(
  new URL("../testdata/poison_job.golden.txt", import.meta.url),
))
  .trimEnd().split("\n").slice(-3);

/** The signer: pi_0001 declares poison + not sent, pi_0002 only fails to connect. */
function signer(request: Request): Response | Promise<Response> {
  return request.json().then(({ intentId }: { intentId: string }) =>
    intentId === "pi_0001"
      ? Response.json({
        error: "chain id mismatch",
        notSent: true,
        poison: true,
      }, { status: 400 })
      : Response.json({ error: "rpc: connection refused" }, { status: 502 })
  );
}

interface Running {
  service: Service;
  server: Deno.HttpServer<Deno.NetAddr>;
  base: string;
}

async function start(
  file: string,
  signerPort: number,
  clock: { ms: number },
): Promise<Running> {
  const config = loadConfig({
    QSTASH_CURRENT_SIGNING_KEY: QSTASH.currentSigningKey,
    QSTASH_NEXT_SIGNING_KEY: QSTASH.nextSigningKey,
    PUBLIC_URL,
    OPS_TOKEN,
    SENDER_URL: `http://127.0.0.1:${signerPort}`,
    KV_PATH: file,
    MAX_DELIVERIES: "3",
    JITTER: "none",
    STUCK_AFTER: "15s", // 3 deliveries guarantee 5 s + 10 s
    CLOCK_SKEW: "0", // one process, one clock: nothing to add to the window
  });
  const service = await openService(config, {
    now: () => clock.ms,
    random: () => 0,
    log: () => {},
  });
  const server = Deno.serve(
    { port: 0, hostname: "127.0.0.1", onListen() {} },
    service.app.fetch,
  );
  return { service, server, base: `http://127.0.0.1:${server.addr.port}` };
}

async function stop({ service, server }: Running): Promise<void> {
  await server.shutdown();
  service.close();
}

/** What the golden example's last lines say, read over the ops API. */
async function finalLines(base: string): Promise<string[]> {
  const lines: string[] = [];
  for (const id of ["pi_0001", "pi_0002", "pi_0003"]) {
    const res = await fetch(`${base}/v1/intents/${id}`, {
      headers: { authorization: `Bearer ${OPS_TOKEN}` },
    });
    assert.equal(res.status, 200);
    const { intent } = await res.json();
    lines.push(`${id} ${intent.state.padEnd(13)}hold ${intent.hold ?? "-"}`);
  }
  return lines;
}

Deno.test(
  "the service settles the seed's three payments over real sockets, and keeps them across a restart",
  timeout(60_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_e2e_" });
    const stub = Deno.serve(
      { port: 0, hostname: "127.0.0.1", onListen() {} },
      signer,
    );
    const clock = { ms: 0 };
    let running = await start(`${dir}/relayer.kv`, stub.addr.port, clock);
    try {
      const { store } = running.service;
      await store.createIntent({
        id: "pi_0001",
        state: "authorized",
        hold: "pending",
      });
      await store.createIntent({
        id: "pi_0002",
        state: "authorized",
        hold: "pending",
      });
      await store.createIntent({ id: "pi_0003", state: "created" });

      const answers: string[] = [];
      for (const intentId of ["pi_0001", "pi_0002", "pi_0003"]) {
        const body = JSON.stringify({ intentId, kind: "settle" });
        for (let retried = 0;; retried++) {
          const res = await fetch(`${running.base}/v1/qstash`, {
            method: "POST",
            body,
            headers: {
              "content-type": "application/json",
              "upstash-signature": await signQStash(body, {
                url: `${PUBLIC_URL}/v1/qstash`,
              }),
              "upstash-retried": String(retried),
            },
          });
          const answer = await res.json();
          answers.push(
            `${answer.job} #${answer.delivery} ${answer.outcome} ${res.status}`,
          );
          if (res.status !== 503) break;
          // QStash waits Retry-After seconds, then delivers again.
          clock.ms += Number(res.headers.get("retry-after")) * 1000;
        }
      }
      assert.deepEqual(answers, [
        "pi_0001/settle #1 poison 200",
        "pi_0002/settle #1 retry 503",
        "pi_0002/settle #2 retry 503",
        "pi_0002/settle #3 poison 200",
        "pi_0003/settle #1 retry 503",
        "pi_0003/settle #2 retry 503",
        "pi_0003/settle #3 poison 200",
      ]);
      assert.deepEqual(await finalLines(running.base), golden);

      // Restart on the same file: the intents, holds and dead letters are all there.
      await stop(running);
      running = await start(`${dir}/relayer.kv`, stub.addr.port, clock);
      assert.deepEqual(await finalLines(running.base), golden);
      const letters = await (await fetch(`${running.base}/v1/dead-letters`, {
        headers: { authorization: `Bearer ${OPS_TOKEN}` },
      })).json();
      assert.deepEqual(
        letters.items.map((d: { jobId: string }) => d.jobId).sort(),
        [
          "pi_0001/settle",
          "pi_0002/settle",
          "pi_0003/settle",
        ],
      );
    } finally {
      await stop(running);
      await stub.shutdown();
      await Deno.remove(dir, { recursive: true });
    }
  }),
);
