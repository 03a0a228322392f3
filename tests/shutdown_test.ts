/**
 * The service stops cleanly: SIGTERM to the real process (`deno serve
 * main.ts` with the local KV queue) stops it taking work, lets the
 * delivery in flight finish, closes KV and exits 0 within 10 s; and
 * `deno task start` listens on loopback only.
 */
import assert from "node:assert/strict";
import { openService } from "../main.ts";
import { KvStore } from "../store/kv.ts";
import { loadConfig } from "../webhook/config.ts";
import postgres from "postgres";
import { freshDatabase, postgresAvailable } from "./_postgres.ts";
import { slowSigner } from "./_slow_signer.ts";
import { memoryKvConnect } from "./_memory_kv_connect.ts";
import { timeout } from "./_timeout.ts";
import { startArgs } from "../support/start_args.ts";
import { hmacSignature } from "../webhook/_auth.ts";
import {
  baseEnv,
  healthy,
  listeningOn,
  type MainProcess,
  signedDelivery,
  startMain,
} from "./_main_process.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const OPS_TOKEN = "shutdown-ops-0123456789";

const SECRET = "shutdown-secret-0123456789";

/**
 * `main.ts` on KV in a temp dir (or on the database `env` attaches), with a signer whose sends take `holdMs` (1.5 s) and
 * an authorized intent `intentId`, healthy; `body` runs against it, and
 * everything is stopped and removed after, whatever happens. With
 * `releaseOn`, the signer ends its sends as soon as `main.ts` writes a
 * line that matches it (a drain begun), `holdMs` at the latest.
 */
async function withServedMain(
  env: Record<string, string>,
  intentId: string,
  signal: AbortSignal,
  body: (world: {
    service: MainProcess;
    signer: ReturnType<typeof slowSigner>;
    base: string;
    dir: string;
  }) => Promise<void>,
  { holdMs = 1500, releaseOn }: { holdMs?: number; releaseOn?: RegExp } = {},
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "relayer_shutdown_" });
  const signer = slowSigner(holdMs);
  const service = startMain({
    SENDER_URL: signer.url,
    SENDER_TIMEOUT: "4s",
    LEASE: "8s",
    WEBHOOK_SECRET: SECRET,
    OPS_TOKEN,
    // On Deno Deploy, the database it attached; elsewhere a file.
    ...("DENO_KV_DEFAULT_PATH" in env ? {} : { KV_PATH: `${dir}/relayer.kv` }),
    ...env,
  }, {
    writeDir: dir,
    onLine: (line) => {
      if (releaseOn?.test(line)) signer.release();
    },
  });
  signal.addEventListener("abort", service.kill);
  // Port 0: the child binds a port the system picks, and says which.
  const base = await service.base() ?? "http://127.0.0.1:0";
  try {
    await healthy(base);
    const created = await fetch(`${base}/v1/intents`, {
      method: "POST",
      headers: { authorization: `Bearer ${OPS_TOKEN}` },
      body: JSON.stringify({ id: intentId, state: "authorized" }),
    });
    assert.equal(created.status, 201);
    await created.body?.cancel();
    await body({ service, signer, base, dir });
  } finally {
    signal.removeEventListener("abort", service.kill);
    service.kill();
    await service.ended().catch(() => {});
    await signer.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test(
  "main.ts drains on SIGTERM with KV_QUEUE=1: the delivery in flight finishes, KV closes, the process exits 0 within 10 s",
  timeout(30_000, (_t, signal) =>
    withServedMain(
      { KV_QUEUE: "1" },
      "pi_drain",
      signal,
      async ({ service, signer, base, dir }) => {
        const ops = { authorization: `Bearer ${OPS_TOKEN}` };
        const queued = await fetch(`${base}/v1/jobs`, {
          method: "POST",
          headers: ops,
          body: JSON.stringify({ intentId: "pi_drain", kind: "settle" }),
        });
        assert.equal(queued.status, 202);
        await queued.body?.cancel();

        await signer.firstStarted; // the local queue's delivery is mid-send
        const sentAt = performance.now();
        service.child.kill("SIGTERM");
        await service.child.status;
        const tookMs = performance.now() - sentAt;
        const { code, stdout, stderr } = await service.ended();

        assert.equal(code, 0, `${stdout}\n${stderr}`);
        assert.ok(tookMs < 10_000, `exited after ${Math.round(tookMs)} ms`);
        assert.equal(signer.counts.finished, 1, "the send in flight finished");
        assert.match(stdout, /relayer: SIGTERM: draining/);
        assert.match(stdout, /relayer: drained; KV closed/);
        assert.doesNotMatch(stderr, /\n\s+at /, "no stack");

        // The delivery recorded its send before KV closed.
        const kv = await Deno.openKv(`${dir}/relayer.kv`);
        try {
          const intent = await new KvStore(kv).getIntent("pi_drain");
          assert.equal(intent?.state, "settling");
          assert.deepEqual(
            [intent?.lastBroadcast?.outcome, intent?.lastBroadcast?.txHash],
            ["sent", "0xdrained"],
          );
        } finally {
          kv.close();
        }
      },
      // The send ends once the drain has begun: the drain waited for it.
      { releaseOn: /relayer: SIGTERM: draining/ },
    )),
);

Deno.test(
  "main.ts on Deno Deploy (DENO_DEPLOYMENT_ID) drains for 3.5 s on SIGINT and exits before Deploy's SIGKILL at 5 s",
  timeout(
    30_000,
    async (_t, signal) => {
      // As Deploy attaches a Deno KV database: its URL and token.
      const database = memoryKvConnect();
      try {
        await withServedMain(
          {
            DENO_DEPLOYMENT_ID: "test-deployment",
            DENO_KV_DEFAULT_PATH: `http://127.0.0.1:${database.addr.port}/kv`,
            DENO_KV_ACCESS_TOKEN: "deploy-token-0123456789",
            // A PORT beside it: Deploy serves where it says, and the line
            // a local run gets (a deno serve command) is not said there.
            PORT: "8001",
          },
          "pi_deploy",
          signal,
          async ({ service, signer, base }) => {
            const inFlight = signedDelivery(base, SECRET, "pi_deploy").then(
              (r) => r.body?.cancel(),
              () => {},
            );
            await signer.firstStarted; // mid-send, for longer than the drain
            const sentAt = performance.now();
            service.child.kill("SIGINT");
            const { code, stdout, stderr } = await service.ended();
            const tookMs = performance.now() - sentAt;
            await inFlight;
            assert.equal(code, 0, `${stdout}\n${stderr}`);
            assert.ok(tookMs < 5_000, `exited after ${Math.round(tookMs)} ms`);
            assert.match(stdout, /relayer: SIGINT: draining \(at most 3\.5s\)/);
            assert.match(
              stdout,
              /relayer: 1 delivery still running was cut short .*; KV closed/,
            );
            assert.match(stdout, /relayer: listening on /);
            assert.doesNotMatch(stdout, /PORT is/);
          },
          { holdMs: 6_000 },
        );
      } finally {
        await database.shutdown();
      }
    },
  ),
);

Deno.test(
  "main.ts on SIGTERM sends the answer of the HTTP delivery in flight before it exits",
  timeout(
    30_000,
    (_t, signal) =>
      withServedMain(
        {},
        "pi_answered",
        signal,
        async ({ service, signer, base }) => {
          const inFlight = signedDelivery(base, SECRET, "pi_answered");
          await signer.firstStarted; // the delivery is mid-send
          service.child.kill("SIGTERM");
          const answer = await inFlight;
          assert.equal(answer.status, 503); // a retry: sent, waiting for confirmation
          assert.match((await answer.json()).reason, /^sent 0xdrained/);
          const { code, stdout, stderr } = await service.ended();
          assert.equal(code, 0, `${stdout}\n${stderr}`);
          assert.match(stdout, /relayer: drained; KV closed/);
        },
        { releaseOn: /relayer: SIGTERM: draining/ },
      ),
  ),
);

Deno.test(
  "main.ts on a second SIGTERM exits at once and says how many deliveries it cut short",
  timeout(
    30_000,
    (_t, signal) =>
      withServedMain(
        {},
        "pi_twice",
        signal,
        async ({ service, signer, base }) => {
          const inFlight = signedDelivery(base, SECRET, "pi_twice").then(
            (r) => r.body?.cancel(),
            () => {},
          );
          await signer.firstStarted; // mid-send, for longer than the test
          service.child.kill("SIGTERM");
          // The first signal's drain has begun before the second comes.
          await new Promise((resolve) => setTimeout(resolve, 500));
          service.child.kill("SIGTERM");
          const { code, stdout, stderr } = await service.ended();
          await inFlight;
          assert.equal(code, 1, `${stdout}\n${stderr}`);
          assert.match(stdout, /relayer: SIGTERM: draining/);
          // What the stop left mid-send is said, as a drain that ran out says it.
          assert.match(
            stderr,
            /relayer: SIGTERM again: exiting now; 1 delivery still running was cut short \(their leases expire and the queue redelivers\)/,
          );
        },
        { holdMs: 3_000 },
      ),
  ),
);

Deno.test(
  "main.ts takes two signals at once as one and drains: a shell's kill of `deno task start`'s job reaches it twice",
  timeout(
    30_000,
    (_t, signal) =>
      withServedMain(
        {},
        "pi_group",
        signal,
        async ({ service, signer, base }) => {
          const inFlight = signedDelivery(base, SECRET, "pi_group").then(
            (r) => r.body?.cancel(),
            () => {},
          );
          await signer.firstStarted;
          // `kill %2` (or Ctrl-C) signals the job's process group: `deno
          // task` passes the SIGTERM on, so `deno serve` hears it twice.
          // Before, the second copy read as "SIGTERM again: exiting now"
          // and cut the delivery short with no drain.
          // (Two kills back to back merge into one pending signal: the
          // forwarded copy comes a few milliseconds after.)
          service.child.kill("SIGTERM");
          await new Promise((resolve) => setTimeout(resolve, 30));
          service.child.kill("SIGTERM");
          const { code, stdout, stderr } = await service.ended();
          await inFlight;
          assert.equal(code, 0, `${stdout}\n${stderr}`);
          assert.doesNotMatch(stderr, /again/);
          assert.match(stdout, /relayer: SIGTERM: draining/);
          assert.match(stdout, /relayer: drained; KV closed/);
          assert.equal(signer.counts.finished, 1);
        },
        { holdMs: 1_000 },
      ),
  ),
);

Deno.test(
  "openService() drain() answers new requests 503, waits for the one in flight, then closes KV",
  timeout(30_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_drain_" });
    const signer = slowSigner(300);
    const service = await openService(
      loadConfig({
        SENDER_URL: signer.url,
        WEBHOOK_SECRET: "drain-secret-0123456789",
        OPS_TOKEN,
        KV_PATH: `${dir}/relayer.kv`,
        RELAYER_INSECURE_DEV: "1",
      }),
      { log: () => {}, random: () => 0 },
    );
    // The generic and ops routes have their keys; the others are open.
    assert.match(
      service.description,
      /INSECURE DEV MODE \(unsigned requests accepted on \/v1\/qstash and \/v1\/qstash\/failed, \/v1\/pubsub, \/v1\/pubsub\/dead-letter\)/,
    );
    try {
      const ops = { authorization: `Bearer ${OPS_TOKEN}` };
      await (await service.fetch(
        new Request("http://relayer/v1/intents", {
          method: "POST",
          headers: ops,
          body: JSON.stringify({ id: "pi_1", state: "authorized" }),
        }),
      )).body?.cancel();
      const body = JSON.stringify({
        job: { intentId: "pi_1", kind: "settle" },
      });
      const t = Math.floor(Date.now() / 1000);
      const { hmacSignature } = await import("../webhook/_auth.ts");
      const inFlight = service.fetch(
        new Request("http://relayer/v1/deliveries", {
          method: "POST",
          body,
          headers: {
            "x-signature": hmacSignature("drain-secret-0123456789", body, t),
          },
        }),
      );
      await signer.firstStarted;
      const drained = service.drain(10_000);
      const refused = await service.fetch(
        new Request("http://relayer/healthz"),
      );
      assert.equal(refused.status, 503);
      assert.equal(refused.headers.get("retry-after"), "5");
      // On a line of its own, as the webhook's answers are (curl).
      assert.match(await refused.text(), /:shutting-down".*\}\n$/);
      const answer = await inFlight;
      assert.equal(answer.status, 503); // a retry: sent, waiting for confirmation
      assert.match((await answer.json()).reason, /^sent 0xdrained/);
      assert.equal(await drained, 0);
      await assert.rejects(service.kv!.get(["x"])); // closed
    } finally {
      await signer.close();
      await Deno.remove(dir, { recursive: true });
    }
  }),
);

Deno.test(
  "main.ts under deno serve --parallel keeps serving past its first seconds, then drains every worker on SIGTERM and exits 0, no worker saying that nothing served it (only the first worker's onListen runs)",
  timeout(60_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_shutdown_" });
    const child = new Deno.Command(Deno.execPath(), {
      args: startArgs({ port: 0, writeDir: dir, flags: ["--parallel"] }),
      cwd: ROOT,
      clearEnv: true,
      env: {
        ...baseEnv(),
        DENO_JOBS: "2",
        SENDER_URL: "http://127.0.0.1:9/",
        WEBHOOK_SECRET: SECRET,
        KV_PATH: ":memory:",
      },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const stderr = new Response(child.stderr).text();
    let stdout = "";
    // Both workers said their start line (each runs main.ts), and one
    // where it listens: each hears SIGTERM from there on.
    let ready = (_base: string) => {};
    const listening = new Promise<string>((resolve) => ready = resolve);
    const started = (async () => {
      const decoder = new TextDecoder();
      for await (const chunk of child.stdout) {
        stdout += decoder.decode(chunk, { stream: true });
        const base = stdout.split("\n").map(listeningOn).find((at) => at);
        if (base && stdout.match(/relayer: at most /g)?.length === 2) {
          ready(base);
        }
      }
    })();
    try {
      const base = await listening;
      // Past a wait for `onListen` a worker that never hears it might
      // take: the server still answers.
      await new Promise((resolve) => setTimeout(resolve, 7_000));
      for (let i = 0; i < 8; i++) {
        const res: Response = await fetch(`${base}/healthz`);
        await res.body?.cancel();
        assert.equal(res.status, 200);
      }
      child.kill("SIGTERM");
      const [status] = await Promise.all([child.status, started]);
      const errors = await stderr;
      assert.equal(status.code, 0, `${stdout}\n${errors}`);
      assert.equal(
        stdout.match(/relayer: drained; KV closed/g)?.length,
        2,
        `${stdout}\n${errors}`,
      );
      assert.doesNotMatch(errors, /cannot serve/, errors);
    } finally {
      try {
        child.kill("SIGKILL");
      } catch {
        // already gone
      }
      await Deno.remove(dir, { recursive: true });
    }
  }),
);

Deno.test("deno task start listens on 127.0.0.1 only", async () => {
  const config = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`));
  const start: string = config.tasks.start.command;
  assert.match(start, /^deno serve --host 127\.0\.0\.1 /);
  assert.doesNotMatch(start, /0\.0\.0\.0/);
});

Deno.test({
  name:
    "openService().drain() on PostgreSQL stays within its budget when a delivery's query is stuck: the connections are cut, not waited on",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    const database = await freshDatabase();
    const secret = "drain-webhook-secret-0123";
    const service = await openService(
      loadConfig({
        SENDER_URL: "http://127.0.0.1:9",
        WEBHOOK_SECRET: secret,
        DATABASE_URL: database.url,
      }),
      { log: () => {} },
    );
    const locker = postgres(database.url, { max: 1, onnotice: () => {} });
    const held = await locker.reserve();
    let answer: Promise<unknown> | undefined;
    try {
      await service.store.createIntent({ id: "pi_stuck", state: "created" });
      // Another session locks the table: the delivery's read waits on it.
      await held`BEGIN`;
      await held`LOCK TABLE relayer.intents IN ACCESS EXCLUSIVE MODE`;
      const body = JSON.stringify({
        job: { intentId: "pi_stuck", kind: "settle" },
        delivery: 1,
      });
      answer = service.fetch(
        new Request("http://relayer.test/v1/deliveries", {
          method: "POST",
          body,
          headers: {
            "content-type": "application/json",
            "x-signature": hmacSignature(
              secret,
              body,
              Math.floor(Date.now() / 1000),
            ),
          },
        }),
      ).catch(() => {});
      // The delivery's read waits on the lock before the drain begins: a
      // fixed pause could end, on a loaded machine, before the delivery
      // was signed and read, and the drain then refused it as new.
      const waitingBy = performance.now() + 20_000;
      while (
        (await held`SELECT count(*)::int AS n FROM pg_catalog.pg_locks
          WHERE NOT granted AND relation = 'relayer.intents'::regclass`)[0]!
          .n === 0
      ) {
        assert.ok(
          performance.now() < waitingBy,
          "the delivery never waited on the lock",
        );
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const started = performance.now();
      const left = await service.drain(500);
      const took = performance.now() - started;
      assert.equal(left, 1, "the stuck delivery was still running");
      // Before, ending the client waited up to 5 s more for its query.
      assert.ok(took < 2_500, `the drain took ${Math.round(took)} ms`);
    } finally {
      await held`ROLLBACK`.catch(() => {});
      held.release();
      await locker.end({ timeout: 1 });
      await answer;
      await service.close().catch(() => {});
      await database.drop();
    }
  }),
});
