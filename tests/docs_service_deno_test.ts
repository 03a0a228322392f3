/**
 * The service on Deno KV that docs/api.md ("On Deno") gives a Deno user,
 * run as its `localRun` line says from a project that links this
 * repository (the section's `deno.json`): on SIGTERM mid-send it lets the
 * delivery in flight send its answer, its send's hash in it, says its
 * drain in `deno task start`'s words and exits 0; a port in use, or
 * `KV_QUEUE` (it runs no queue), is one `relayer: cannot start: …` line,
 * no stack; a KV file another program holds locked at the stop ends it
 * within 10 s in one line, as `main.ts` does.
 *
 * @module
 */

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { fileURLToPath } from "node:url";
import {
  apiBlocks,
  deliveryOf,
  drainAnswered,
  freePort,
  killed,
  outputOf,
  readyWithin,
  secondSignalExits,
  sentMidway,
} from "./_docs_service.ts";
import { assertOneLine } from "./_main_process.ts";
import { memoryKvConnect } from "./_memory_kv_connect.ts";
import { slowSigner } from "./_slow_signer.ts";
import { timeout } from "./_timeout.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

const SETTINGS = {
  OPS_TOKEN: "local-ops-token-0123456789",
  WEBHOOK_SECRET: "local-secret-0123456789",
};

/** The one `ts` block of "On Deno", and the arguments its `localRun` gives `deno`. */
async function service(): Promise<{ code: string; args: string[] }> {
  const blocks = await apiBlocks("On Deno", "From Node");
  assert.equal(blocks.length, 1, "On Deno has one ts block");
  const line = /const localRun =\s*"deno ([^"]+)";/.exec(blocks[0]!);
  assert.ok(line, "the service names how it is run (localRun)");
  return { code: blocks[0]!, args: line[1]!.split(" ") };
}

/**
 * The service written in a new project linked to this repository, on
 * `port`, and the command that runs it with `env` (and only what Deno
 * needs of this process's environment to find its cache); its store is a
 * KV_PATH file in `dir`, unless `env` names its own (`KV_PATH`; undefined
 * leaves it unset) or attaches a database as Deploy does
 * (`DENO_KV_DEFAULT_PATH`, where KV_PATH is refused).
 */
async function project(
  dir: string,
  port: number,
  env: Record<string, string | undefined>,
): Promise<Deno.Command> {
  const { code, args } = await service();
  assert.ok(code.includes("port: 8000,"), "the service listens on 8000");
  const { version } = JSON.parse(
    await Deno.readTextFile(`${ROOT}deno.json`),
  ) as { version: string };
  await Deno.writeTextFile(
    `${dir}/deno.json`,
    JSON.stringify({
      imports: { "@relayer/poison": `jsr:@relayer/poison@^${version}` },
      links: [ROOT],
      unstable: ["kv"],
    }),
  );
  await Deno.writeTextFile(
    `${dir}/service.ts`,
    code.replace("port: 8000,", `port: ${port},`),
  );
  const own: Record<string, string> = {};
  for (const name of ["PATH", "HOME", "DENO_DIR", "XDG_CACHE_HOME"]) {
    const value = Deno.env.get(name);
    if (value !== undefined) own[name] = value;
  }
  const given: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (value !== undefined) given[name] = value;
  }
  return new Deno.Command(Deno.execPath(), {
    args: [args[0]!, "--quiet", ...args.slice(1)],
    cwd: dir,
    env: {
      ...own,
      ...("KV_PATH" in env || "DENO_KV_DEFAULT_PATH" in env
        ? {}
        : { KV_PATH: `${dir}/relayer.kv` }),
      ...given,
      NO_COLOR: "1",
    },
    clearEnv: true,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  });
}

/**
 * Runs `body` in a new project folder (see {@link project}), removed after.
 */
async function inProject(body: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "relayer_docs_deno_" });
  try {
    await body(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** A service started by {@link midSend}: its project, port and signer. */
interface Started {
  dir: string;
  port: number;
  base: string;
  child: Deno.ChildProcess;
  signer: ReturnType<typeof slowSigner>;
}

/**
 * Runs `body` against the service started in a new project (see
 * {@link project}) with `env` and the URL of a signer that holds each send
 * `holdMs`, once it answers /readyz; then releases the signer, kills the
 * service if it still runs, closes the signer and removes the project.
 */
async function midSend(
  holdMs: number,
  env: Record<string, string | undefined>,
  body: (started: Started) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "relayer_docs_deno_" });
  const signer = slowSigner(holdMs);
  const port = freePort();
  let child: Deno.ChildProcess | undefined;
  try {
    child = (await project(dir, port, { ...env, SENDER_URL: signer.url }))
      .spawn();
    assert.ok(await readyWithin(port), "the service never answered");
    const base = `http://127.0.0.1:${port}`;
    await body({ dir, port, base, child, signer });
  } finally {
    signer.release();
    await killed(child);
    await signer.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test({
  name:
    "docs/api.md's Deno service on SIGTERM sends the answer of the delivery in flight, its send's hash in it, says its drain, and exits 0",
  // Held until the service takes no new connection: its drain begun.
  fn: timeout(
    60_000,
    () =>
      midSend(30_000, SETTINGS, async ({ port, base, child, signer }) => {
        const { stdout, stderr } = outputOf(child);
        const inFlight = await sentMidway(base, signer, "pi_drain");
        child.kill("SIGTERM");
        // Its drain begun: the listener closed, the send still held.
        let refused = false;
        for (let i = 0; i < 100 && !refused; i++) {
          const conn = await Deno.connect({ hostname: "127.0.0.1", port })
            .catch(() => undefined);
          refused = conn === undefined;
          conn?.close();
          if (!refused) await new Promise((r) => setTimeout(r, 50));
        }
        assert.ok(refused, "the service still took connections after SIGTERM");
        assert.equal(
          signer.counts.finished,
          0,
          "the send ended before the drain",
        );
        await drainAnswered(signer, inFlight, child, { stdout, stderr });
        assert.equal(await stderr, "");
        assert.deepEqual(
          (await stdout).split("\n").filter((line) =>
            line.startsWith("relayer: ")
          ),
          [
            "relayer: at most 10 deliveries; back off 5s doubling, capped at 2m0s, equal jitter; store Deno KV",
            `relayer: listening on http://127.0.0.1:${port}/`,
            "relayer: SIGTERM: draining (at most 8s)",
            "relayer: drained; KV closed",
          ],
        );
      }),
  ),
});

Deno.test({
  name:
    "docs/api.md's Deno service on Deno Deploy (DENO_DEPLOYMENT_ID) drains for 3.5 s on SIGINT, as main.ts does, and exits before Deploy's kill at 5 s",
  fn: timeout(60_000, async () => {
    // As Deploy attaches a Deno KV database: its URL and token.
    const database = memoryKvConnect();
    // Not the docs' local-run secrets, which Deploy refuses.
    const secret = "deploy-secret-0123456789abcdef";
    const ops = "deploy-ops-token-0123456789abcdef";
    const env = {
      OPS_TOKEN: ops,
      WEBHOOK_SECRET: secret,
      DENO_DEPLOYMENT_ID: "test-deployment",
      DENO_KV_DEFAULT_PATH: `http://127.0.0.1:${database.addr.port}/kv`,
      DENO_KV_ACCESS_TOKEN: "deploy-token-0123456789",
    };
    try {
      // Mid-send for longer than Deploy's 5 s.
      await midSend(7_000, env, async ({ base, child, signer }) => {
        const { stdout, stderr } = outputOf(child);
        const inFlight = (await deliveryOf(base, ops, secret, "pi_deploy"))
          .answer.then((r) => r.body?.cancel(), () => {});
        await signer.firstStarted; // mid-send, for longer than the drain
        const sentAt = performance.now();
        child.kill("SIGINT");
        const { code } = await child.status;
        const tookMs = performance.now() - sentAt;
        await inFlight;
        const out = await stdout;
        assert.equal(code, 0, `${out}\n${await stderr}`);
        assert.deepEqual(
          out.split("\n").filter((line) =>
            /^relayer: SIGINT|cut short/.test(line)
          ),
          [
            "relayer: SIGINT: draining (at most 3.5s)",
            "relayer: 1 request(s) still running were cut short (their leases expire and the queue redelivers); KV closed",
          ],
          out,
        );
        assert.ok(tookMs < 5_000, `exited after ${Math.round(tookMs)} ms`);
      });
    } finally {
      await database.shutdown();
    }
  }),
});

Deno.test({
  name:
    "docs/api.md's Deno service run as its localRun says without KV_PATH opens its store where the settings say (./data/relayer.kv), and says in one line, without a stack, a store it cannot open",
  fn: timeout(60_000, () =>
    inProject(async (dir) => {
      const port = freePort();
      let child: Deno.ChildProcess | undefined;
      try {
        // The settings' default, in a new project: no ./data yet.
        child = (await project(dir, port, {
          ...SETTINGS,
          SENDER_URL: "http://127.0.0.1:9",
          KV_PATH: undefined,
        })).spawn();
        const { stdout, stderr } = outputOf(child);
        // It ended at once where it could not open its store: not waited for.
        const ended = child.status.then(() => false);
        const ready = await Promise.race([readyWithin(port), ended]);
        if (ready) child.kill("SIGTERM");
        const { code } = await child.status;
        child = undefined;
        assert.ok(ready, `the service never answered:\n${await stderr}`);
        assert.equal(code, 0, `${await stdout}\n${await stderr}`);
        assert.ok((await Deno.stat(`${dir}/data/relayer.kv`)).isFile);
        // A KV_PATH in a folder that cannot be made (under a file).
        const command = await project(dir, freePort(), {
          ...SETTINGS,
          SENDER_URL: "http://127.0.0.1:9",
          KV_PATH: `${dir}/deno.json/relayer.kv`,
        });
        const out = await command.output();
        const err = new TextDecoder().decode(out.stderr);
        assert.equal(out.code, 1, err);
        assert.equal(err.trimEnd().split("\n").length, 1, err);
        assert.match(
          err,
          /^relayer: cannot start: Deno KV: cannot open .*deno\.json\/relayer\.kv \(.*\): check KV_PATH\n$/,
        );
      } finally {
        await killed(child);
      }
    })),
});

Deno.test({
  name:
    "docs/api.md's Deno service says in one line, without a stack, that its port is in use",
  fn: timeout(60_000, () =>
    inProject(async (dir) => {
      // Another process (a relayer still running) holds the port.
      const held = Deno.listen({ hostname: "127.0.0.1", port: 0 });
      try {
        const command = await project(dir, held.addr.port, {
          ...SETTINGS,
          SENDER_URL: "http://127.0.0.1:9",
        });
        const { code, stderr } = await command.output();
        const err = new TextDecoder().decode(stderr);
        assert.equal(code, 1, `exit code; stderr:\n${err}`);
        assert.deepEqual(err.trimEnd().split("\n").length, 1, err);
        assert.match(
          err,
          /^relayer: cannot start: .*[Aa]ddress already in use.*: free the port or use another\n$/,
        );
      } finally {
        held.close();
      }
    })),
});

Deno.test({
  name:
    "docs/api.md's Deno service refuses KV_QUEUE in one line, as it runs no queue (main.ts does): it started, and each job it took was its publish stub's alone",
  fn: timeout(60_000, () =>
    inProject(async (dir) => {
      const command = await project(dir, freePort(), {
        ...SETTINGS,
        SENDER_URL: "http://127.0.0.1:9",
        KV_QUEUE: "1",
      });
      // Ended by its refusal, or killed where it served anyway.
      const child = command.spawn();
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      const out = await child.output();
      clearTimeout(timer);
      const err = new TextDecoder().decode(out.stderr);
      assert.equal(out.code, 1, err);
      assertOneLine(
        err,
        /^relayer: cannot start: KV_QUEUE is set, but this service runs no queue of Deno KV's \(main\.ts does\): unset it, and publish to your queue$/,
      );
    })),
});

Deno.test({
  name:
    "docs/api.md's Deno service ends within 10 s of SIGTERM, in one line that names the lock, while another program holds a write transaction on its Deno KV file, as main.ts does: closing KV waited for the lock with no end",
  fn: timeout(60_000, () =>
    inProject(async (dir) => {
      const path = `${dir}/relayer.kv`;
      // Keys that expire one a second: Deno KV's deletion of them meets the
      // lock within about 2 s of its taking.
      const seed = await Deno.openKv(path);
      for (let i = 1; i <= 60; i++) {
        await seed.set(["test", "expires", i], i, { expireIn: i * 1_000 });
      }
      seed.close();
      const port = freePort();
      let child: Deno.ChildProcess | undefined;
      let db: DatabaseSync | undefined;
      let timer: ReturnType<typeof setTimeout> | undefined;
      try {
        child = (await project(dir, port, {
          ...SETTINGS,
          SENDER_URL: "http://127.0.0.1:9",
          KV_PATH: path,
        })).spawn();
        const { stdout, stderr } = outputOf(child);
        assert.ok(await readyWithin(port), "the service never answered");
        db = new DatabaseSync(path);
        db.exec("BEGIN IMMEDIATE; UPDATE kv SET v = v");
        await new Promise((resolve) => setTimeout(resolve, 2_500));
        const sentAt = performance.now();
        child.kill("SIGTERM");
        const ended = await Promise.race([
          child.status,
          new Promise<null>((resolve) => {
            timer = setTimeout(() => resolve(null), 16_000);
          }),
        ]);
        const tookMs = Math.round(performance.now() - sentAt);
        assert.ok(ended !== null, "the service still ran 16 s after SIGTERM");
        child = undefined;
        const out = await stdout;
        const err = await stderr;
        assert.ok(tookMs < 10_000, `ended ${tookMs} ms after SIGTERM`);
        assert.equal(ended.code, 1, `${out}\n${err}`);
        assert.match(out, /relayer: SIGTERM: draining \(at most 8s\)/);
        assert.doesNotMatch(out, /KV closed/);
        assertOneLine(
          err,
          /^relayer: KV_PATH: .*relayer\.kv stayed locked by another program through the drain \(a write transaction: sqlite3, a backup tool\), and closing KV would wait for it with no end: exiting without closing it, as a kill would; end that transaction before the next start$/,
        );
      } finally {
        clearTimeout(timer);
        await killed(child);
        if (db?.isOpen) {
          db.exec("ROLLBACK");
          db.close();
        }
      }
    })),
});

Deno.test({
  name:
    "docs/api.md's Deno service exits at once on a second signal, saying what it cut short, as main.ts does; the first heard twice still drains",
  fn: timeout(
    60_000,
    () =>
      midSend(30_000, SETTINGS, async ({ base, child, signer }) => {
        await sentMidway(base, signer, "pi_again");
        await secondSignalExits(child);
      }),
  ),
});
