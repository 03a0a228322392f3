/**
 * The checks docs/api.md's Node and Bun services share: each is bundled
 * with `deno bundle --platform node`, run by its runtime, and must stop a
 * start it cannot make with one line that says what was wrong (a setting
 * `loadConfig` refuses, a database nothing answers on, a port another
 * process holds), with no stack trace and the password of `DATABASE_URL`
 * nowhere; it must say what it serves and where in two lines, as
 * `deno task start` does, listen on 127.0.0.1 only and exit 0 on SIGTERM; it
 * must check a server named by IP address against that address under
 * `?sslmode=verify-full`; and its pool must serve again after a network
 * partition.
 * Each runtime's test file gives its service block and how to run it:
 *
 * ```ts ignore
 * docsServiceTests({
 *   runtime: "Node",
 *   ignore: NODE_VERSION === null,
 *   service: nodeService,
 *   command: (dir, env) => new Deno.Command("node", { args: ["service.mjs"], cwd: dir, env }),
 *   inUse: /EADDRINUSE/,
 * });
 * ```
 *
 * @module
 */

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { startPostgres } from "../support/postgres_server.ts";
import { testCertificates } from "../support/test_tls.ts";
import { blackHole } from "./_black_hole.ts";
import { freshDatabase, postgresAvailable } from "./_postgres.ts";
import { signedDelivery } from "./_main_process.ts";
import { slowSigner } from "./_slow_signer.ts";
import { timeout } from "./_timeout.ts";
import { ipv6LoopbackAvailable, tlsSuitesAvailable } from "./_tls_postgres.ts";

/** The repository's root, with a trailing slash. */
const ROOT = fileURLToPath(new URL("..", import.meta.url));

const PASSWORD = "pw-that-must-not-show-0123";

/** Whether the TLS test runs: `false` only where PostgreSQL or `openssl` is missing, outside CI. */
const tlsAvailable = await tlsSuitesAvailable("the docs services' TLS test");

/** Whether this machine listens on the IPv6 loopback, for the IPv6 test. */
const ipv6Loopback = await ipv6LoopbackAvailable();

/** A free port on 127.0.0.1. */
export function freePort(): number {
  const free = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = free.addr;
  free.close();
  return port;
}

/** Whether `port` answers /readyz with 200 within 30 s (a cold cache loads the package first). */
export async function readyWithin(port: number): Promise<boolean> {
  for (let i = 0; i < 300; i++) {
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`)
      .then(async (r) => (await r.body?.cancel(), r.ok), () => false);
    if (ready) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

/**
 * The first line `child` (a service on `port`) printed, once it answered
 * /readyz and, stopped with SIGTERM, exited 0. Fails with what it printed
 * where it ended before answering, or exited other than 0; `child` has
 * ended when this settles.
 */
async function firstLineOnceUp(
  child: Deno.ChildProcess,
  port: number,
): Promise<string> {
  const stdout = new Response(child.stdout).text();
  const stderr = new Response(child.stderr).text();
  try {
    const up = await Promise.race([
      readyWithin(port),
      child.status.then(() => false),
    ]);
    if (!up) assert.fail(`it did not start: ${await stderr}`);
    child.kill("SIGTERM");
    assert.equal((await child.status).code, 0, await stderr);
    return (await stdout).split("\n")[0]!;
  } finally {
    try {
      child.kill("SIGKILL");
    } catch {
      // It ended by itself.
    }
    await child.status;
  }
}

const SETTINGS = {
  SENDER_URL: "http://127.0.0.1:9",
  OPS_TOKEN: "local-ops-token-0123456789",
  WEBHOOK_SECRET: "local-secret-0123456789",
};

/** The `ts` blocks of docs/api.md between the headings `from` and `to` (to the end without it). */
export async function apiBlocks(from: string, to?: string): Promise<string[]> {
  const text = await Deno.readTextFile(`${ROOT}docs/api.md`);
  const start = text.indexOf(`\n## ${from}\n`);
  const end = to === undefined ? text.length : text.indexOf(`\n## ${to}\n`);
  assert.ok(start >= 0 && end > start, `no section '${from}' in docs/api.md`);
  return [...text.slice(start, end).matchAll(/^```ts[^\n]*\n([^]*?)^```/gm)]
    .map((m) => m[1]!);
}

/** A docs/api.md service and how its runtime runs it. */
export interface DocsService {
  /** The runtime, as the tests' names say it: "Node", "Bun". */
  runtime: string;
  /** Whether the runtime is missing here. */
  ignore: boolean;
  /** The service's source, from docs/api.md. */
  service: () => Promise<string>;
  /**
   * The runtime running `dir`/service.mjs with `env` and the runtime's own
   * variables alone (`clearEnv`), stdin null, stdout and stderr piped.
   */
  command: (dir: string, env: Record<string, string>) => Deno.Command;
  /** What the one line says of a port in use. */
  inUse: RegExp;
  /** How the docs say the service is run, which a refusal of RELAYER_INSECURE_DEV names. */
  localRun: string;
}

// The port the bundle is made with, written in each copy as the test's:
// one the bundler leaves as it is (8000 it writes 8e3), found once.
const PORT_MARK = "port: 47999";

// Each service's bundle, made once for every test of a run.
const bundles = new Map<string, Promise<string>>();

/** `service` bundled for node with `deno bundle`, its port PORT_MARK's. */
async function bundle(service: string): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "relayer_docs_bundle_" });
  try {
    await Deno.writeTextFile(
      `${dir}/service.ts`,
      service.replace("port: 8000", PORT_MARK),
    );
    const built = await new Deno.Command(Deno.execPath(), {
      args: [
        "bundle",
        "--quiet",
        "--config",
        `${ROOT}deno.json`,
        "--platform",
        "node",
        "-o",
        `${dir}/service.mjs`,
        `${dir}/service.ts`,
      ],
      cwd: ROOT,
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(built.code, 0, new TextDecoder().decode(built.stderr));
    const text = await Deno.readTextFile(`${dir}/service.mjs`);
    assert.equal(text.split(PORT_MARK).length, 2, "the bundle's port, once");
    return text;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

// Where the service listens, as docs/api.md writes it (once).
const HOST = 'hostname = "127.0.0.1"';

/** The service bundled for node into `dir` (its port `port`, its host `host`). */
async function bundled(
  service: string,
  dir: string,
  port = 8000,
  host = "127.0.0.1",
): Promise<string> {
  assert.match(service, /port: 8000/, "the service's port");
  let made = bundles.get(service);
  if (made === undefined) {
    made = bundle(service);
    bundles.set(service, made);
  }
  const text = await made;
  assert.equal(text.split(HOST).length, 2, "the bundle's host, once");
  await Deno.writeTextFile(
    `${dir}/service.mjs`,
    text.replace(PORT_MARK, `port: ${port}`).replace(
      HOST,
      `hostname = ${JSON.stringify(host)}`,
    ),
  );
  return `${dir}/service.mjs`;
}

/**
 * The local addresses of the sockets listening on TCP `port`, as Linux
 * lists them in /proc/net/tcp and tcp6 (`0100007F` is 127.0.0.1;
 * `00000000` and the 32 zeros of tcp6 are every interface), read through
 * `cat`, as Deno asks for every permission to read them itself.
 */
async function listeningOn(port: number): Promise<string[]> {
  const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
  const { stdout } = await new Deno.Command("cat", {
    args: ["/proc/net/tcp", "/proc/net/tcp6"],
    stdout: "piped",
    stderr: "null",
  }).output();
  const found: string[] = [];
  for (const row of new TextDecoder().decode(stdout).split("\n")) {
    const [, local, , state] = row.trim().split(/\s+/);
    if (state === "0A" && local?.endsWith(`:${hexPort}`)) {
      found.push(local.slice(0, local.indexOf(":")));
    }
  }
  return found;
}

/** Kills `child`, if it was started, and waits for it and its pipes to end. */
export async function killed(
  child: Deno.ChildProcess | undefined,
): Promise<void> {
  if (!child) return;
  try {
    child.kill("SIGKILL");
  } catch {
    // It ended by itself.
  }
  await child.status;
  await child.stdout.cancel().catch(() => {});
  await child.stderr.cancel().catch(() => {});
}

/**
 * Creates intent `id` (authorized) on the service at `base` with the ops
 * token, then sends its delivery signed with `secret`: the delivery's
 * answer, once it comes (a failure is said where it is awaited).
 */
export async function deliveryOf(
  base: string,
  opsToken: string,
  secret: string,
  id: string,
): Promise<{ answer: Promise<Response> }> {
  const created = await fetch(`${base}/v1/intents`, {
    method: "POST",
    headers: { authorization: `Bearer ${opsToken}` },
    body: JSON.stringify({ id, state: "authorized" }),
  });
  assert.equal(created.status, 201, await created.text());
  const answer = signedDelivery(base, secret, id);
  answer.catch(() => {});
  return { answer };
}

/**
 * Creates intent `id` on the service at `base` and sends its delivery, with
 * the docs' local-run ops token and secret, then waits until `signer` holds
 * its send: the delivery's answer, once it comes.
 */
export async function sentMidway(
  base: string,
  signer: { firstStarted: Promise<unknown> },
  id: string,
): Promise<{ answer: Promise<Response> }> {
  const inFlight = await deliveryOf(
    base,
    SETTINGS.OPS_TOKEN,
    SETTINGS.WEBHOOK_SECRET,
    id,
  );
  await signer.firstStarted; // the delivery is mid-send
  return inFlight;
}

/** `child`'s stdout and stderr, read to their end. */
export function outputOf(
  child: Deno.ChildProcess,
): { stdout: Promise<string>; stderr: Promise<string> } {
  return {
    stdout: new Response(child.stdout).text(),
    stderr: new Response(child.stderr).text(),
  };
}

/**
 * Releases `signer`'s held send, then checks what a drain must give: the
 * delivery in flight answered 503 with its send's hash (a retry: sent,
 * waiting for confirmation), and `child` exited 0.
 */
export async function drainAnswered(
  signer: { release(): void },
  inFlight: { answer: Promise<Response> },
  child: Deno.ChildProcess,
  output: { stdout: Promise<string>; stderr: Promise<string> },
): Promise<void> {
  signer.release();
  const answer = await inFlight.answer;
  assert.equal(answer.status, 503); // a retry: sent, waiting for confirmation
  assert.match((await answer.json()).reason, /^sent 0xdrained/);
  const { code } = await child.status;
  assert.equal(code, 0, `${await output.stdout}\n${await output.stderr}`);
}

/**
 * With a delivery of `child`'s mid-send (its stdout and stderr not yet
 * read): a SIGTERM, and once its drain is said, the same again at once (a
 * process group's Ctrl-C heard twice, as `deno task` or a wrapper passes
 * it on), which must leave the drain on; then one 400 ms later, which must
 * end the process at once, 1, saying on stderr that it cut the delivery
 * short, as `main.ts` does.
 */
export async function secondSignalExits(
  child: Deno.ChildProcess,
): Promise<void> {
  const stderr = new Response(child.stderr).text();
  let stdout = "";
  const drained = child.stdout.pipeThrough(new TextDecoderStream()).pipeTo(
    new WritableStream({ write: (chunk) => void (stdout += chunk) }),
  );
  let ended = false;
  const status = child.status.finally(() => ended = true);
  child.kill("SIGTERM");
  const deadline = Date.now() + 10_000;
  while (!/: SIGTERM: draining/.test(stdout) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 5));
  }
  assert.match(stdout, /: SIGTERM: draining/, "no drain said");
  child.kill("SIGTERM");
  await new Promise((r) => setTimeout(r, 400));
  assert.equal(ended, false, "the first signal heard twice ended the drain");
  const sent = performance.now();
  child.kill("SIGTERM");
  const { code } = await status;
  const took = performance.now() - sent;
  await drained;
  const said = await stderr;
  assert.equal(code, 1, said);
  assert.ok(took < 2_000, `the second signal's exit took ${took} ms`);
  assert.match(
    said,
    /^relayer: SIGTERM again: exiting now; 1 request\(s\) cut short$/m,
  );
}

/** Registers the three tests of `s`'s service. */
export function docsServiceTests(s: DocsService): void {
  const prefix = `relayer_docs_${s.runtime.toLowerCase()}_`;
  const run = async (dir: string, env: Record<string, string>) => {
    const out = await s.command(dir, env).output();
    return { code: out.code, err: new TextDecoder().decode(out.stderr) };
  };

  /**
   * Runs `body` against the service bundled in a new project on a free
   * port, started with a fresh database and the URL of a signer that holds
   * each send 30 s, once it answers /readyz; then releases the signer,
   * kills the service if it still runs, closes the signer, drops the
   * database and removes the project.
   */
  const midSend = async (
    body: (started: {
      port: number;
      base: string;
      child: Deno.ChildProcess;
      signer: ReturnType<typeof slowSigner>;
    }) => Promise<void>,
  ) => {
    const dir = await Deno.makeTempDir({ prefix });
    const database = await freshDatabase();
    const signer = slowSigner(30_000);
    const port = freePort();
    let child: Deno.ChildProcess | undefined;
    try {
      await bundled(await s.service(), dir, port);
      child = s.command(dir, {
        ...SETTINGS,
        SENDER_URL: signer.url,
        DATABASE_URL: database.url,
      }).spawn();
      assert.ok(await readyWithin(port), "the service never answered");
      const base = `http://127.0.0.1:${port}`;
      await body({ port, base, child, signer });
    } finally {
      signer.release();
      await killed(child);
      await signer.close();
      await database.drop();
      await Deno.remove(dir, { recursive: true });
    }
  };

  Deno.test({
    name:
      `docs/api.md's ${s.runtime} service says in one line, without a stack, why it cannot start`,
    ignore: s.ignore,
    fn: timeout(60_000, async () => {
      const dir = await Deno.makeTempDir({ prefix });
      try {
        await bundled(await s.service(), dir);
        // Nothing listens on port 1 of the loopback.
        const url = `postgres://relayer:${PASSWORD}@127.0.0.1:1/relayer`;
        const base = { ...SETTINGS, DATABASE_URL: url };
        for (
          const [what, env, said] of [
            [
              "a setting refused",
              { ...base, WEBHOOK_SECRET: "short" },
              /WEBHOOK_SECRET/,
            ],
            ["no database", base, /ECONNREFUSED|refused/],
          ] as const
        ) {
          const { code, err } = await run(dir, env);
          assert.equal(code, 1, `${what}: exit code; stderr:\n${err}`);
          const lines = err.trimEnd().split("\n");
          assert.equal(lines.length, 1, `${what}: one line, got:\n${err}`);
          assert.match(lines[0]!, /^relayer: cannot start: /, what);
          assert.match(lines[0]!, said, what);
          assert.ok(!err.includes(PASSWORD), `${what}: the password shows`);
        }
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    }),
  });

  Deno.test({
    name:
      `docs/api.md's ${s.runtime} service set to listen off loopback refuses RELAYER_INSECURE_DEV and the docs' local-run secrets in one line, in main.ts's words, and takes them on loopback`,
    ignore: s.ignore,
    fn: timeout(60_000, async () => {
      const dir = await Deno.makeTempDir({ prefix });
      try {
        // Nothing listens on port 1: a start that got past the refusal
        // stops at the database, in its own words.
        const database = `postgres://relayer:${PASSWORD}@127.0.0.1:1/relayer`;
        const env = {
          ...SETTINGS,
          DATABASE_URL: database,
          RELAYER_INSECURE_DEV: "1",
        };
        // The docs' local-run secrets alone, as their README run sets them.
        const published = { ...SETTINGS, DATABASE_URL: database };
        const own = {
          ...env,
          WEBHOOK_SECRET: "a-webhook-secret-of-the-test",
          OPS_TOKEN: "an-ops-token-of-the-test-0123",
        };
        for (const host of ["0.0.0.0", "::"]) {
          await bundled(await s.service(), dir, 8000, host);
          const off = `this service listens on ${host}, off this machine`;
          for (
            const [what, settings, said] of [
              [
                "the docs' WEBHOOK_SECRET",
                published,
                `WEBHOOK_SECRET is a value the docs give for a local run, which anyone can read, and ${off}: generate a random one, such as with: openssl rand -base64 32`,
              ],
              [
                "RELAYER_INSECURE_DEV",
                own,
                `RELAYER_INSECURE_DEV is for local runs, and ${off}: it would take requests with no signature or token, from anyone who reaches it, on /v1/qstash and /v1/qstash/failed, /v1/pubsub, /v1/pubsub/dead-letter. Unset RELAYER_INSECURE_DEV (each route whose keys are not set then answers 503: set the keys of those you use, and OPS_TOKEN for the ops routes), or run on your own machine: PUBLIC_URL unset or on localhost, 127.0.0.1 or [::1], and served on loopback (${s.localRun})`,
              ],
            ] as const
          ) {
            const { code, err } = await run(dir, settings);
            assert.equal(
              code,
              1,
              `${host}, ${what}: exit code; stderr:\n${err}`,
            );
            assert.equal(err, `relayer: cannot start: ${said}\n`, what);
          }
        }
        for (const host of ["127.0.0.1", "localhost"]) {
          await bundled(await s.service(), dir, 8000, host);
          const { code, err } = await run(dir, env);
          assert.equal(code, 1, `${host}: exit code; stderr:\n${err}`);
          assert.match(
            err,
            /^relayer: cannot start: .*(ECONNREFUSED|refused)/,
            host,
          );
        }
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    }),
  });

  Deno.test({
    name:
      `docs/api.md's ${s.runtime} service listens on the loopback only, as deno task start does, and drains on SIGTERM`,
    ignore: s.ignore || !postgresAvailable || Deno.build.os !== "linux",
    fn: timeout(60_000, async () => {
      const dir = await Deno.makeTempDir({ prefix });
      const database = await freshDatabase();
      const port = freePort();
      let child: Deno.ChildProcess | undefined;
      try {
        await bundled(await s.service(), dir, port);
        child = s.command(dir, { ...SETTINGS, DATABASE_URL: database.url })
          .spawn();
        const stdout = new Response(child.stdout).text();
        const stderr = new Response(child.stderr).text();
        assert.ok(
          await readyWithin(port),
          "the service never answered /readyz on 127.0.0.1",
        );
        // Where deno task start listens: 127.0.0.1 only, not every interface.
        assert.deepEqual(
          await listeningOn(port),
          ["0100007F"],
          "the service's listening sockets (0100007F is 127.0.0.1)",
        );
        child.kill("SIGTERM");
        const { code } = await child.status;
        child = undefined;
        assert.equal(code, 0, `${await stdout}\n${await stderr}`);
        // What it serves and where, and its drain, in deno task start's words.
        const { pathname } = new URL(database.url);
        assert.deepEqual((await stdout).split("\n"), [
          `relayer: at most 10 deliveries; back off 5s doubling, capped at 2m0s, equal jitter; store PostgreSQL 127.0.0.1:${
            new URL(database.url).port
          }${pathname}, no TLS`,
          `relayer: listening on http://127.0.0.1:${port}/`,
          "relayer: SIGTERM: draining (at most 8s)",
          "relayer: drained; PostgreSQL connections closed",
          "",
        ]);
      } finally {
        await killed(child);
        await database.drop();
        await Deno.remove(dir, { recursive: true });
      }
    }),
  });

  Deno.test({
    name:
      `docs/api.md's ${s.runtime} service on SIGTERM sends the answer of the delivery in flight, its send's hash in it, then exits 0`,
    ignore: s.ignore || !postgresAvailable,
    // Held until the service takes no new connection: its drain begun.
    fn: timeout(60_000, () =>
      midSend(async ({ port, base, child, signer }) => {
        const { stdout, stderr } = outputOf(child);
        const inFlight = await sentMidway(base, signer, "pi_drain");
        child.kill("SIGTERM");
        for (let i = 0; i < 100; i++) {
          const conn = await Deno.connect({ hostname: "127.0.0.1", port })
            .catch(() => undefined);
          if (conn === undefined) break;
          conn.close();
          await new Promise((r) => setTimeout(r, 50));
        }
        await drainAnswered(signer, inFlight, child, { stdout, stderr });
        // Its drain said, the delivery's answer out before its end.
        const said = (await stdout).split("\n").filter((line) =>
          /^relayer: (SIGTERM|drained|\d)/.test(line)
        );
        assert.deepEqual(said, [
          "relayer: SIGTERM: draining (at most 8s)",
          "relayer: drained; PostgreSQL connections closed",
        ]);
      })),
  });

  Deno.test({
    name:
      `docs/api.md's ${s.runtime} service checks a server DATABASE_URL names by IP address against that address under ?sslmode=verify-full: it starts where the certificate names the address alone, and refuses one that names another`,
    ignore: s.ignore || !tlsAvailable,
    fn: timeout(60_000, async () => {
      const dir = await Deno.makeTempDir({ prefix });
      // postgres.js gives TLS no server name for an address, and the check
      // fell back to "localhost", which neither certificate names.
      const byAddress = await testCertificates(["127.0.0.1"]);
      // Made while the server starts.
      const anotherMade = testCertificates(["127.0.0.2"]);
      anotherMade.catch(() => {}); // said where it is awaited
      let server: Awaited<ReturnType<typeof startPostgres>> | undefined;
      const port = freePort();
      try {
        server = await startPostgres({ tls: byAddress });
        await bundled(await s.service(), dir, port);
        const env = {
          ...SETTINGS,
          DATABASE_URL: `${server.url}?sslmode=verify-full`,
          NODE_EXTRA_CA_CERTS: byAddress.caFile,
        };
        assert.match(
          await firstLineOnceUp(s.command(dir, env).spawn(), port),
          new RegExp(
            `; store PostgreSQL 127\\.0\\.0\\.1:${server.port}/postgres, TLS, server verified \\(sslmode=verify-full\\)$`,
          ),
        );
        // The same server, its certificate now naming another address
        // (its CA trusted): the start is refused, naming the address.
        const another = await anotherMade;
        await Deno.writeTextFile(`${server.dir}/server.crt`, another.cert);
        await Deno.writeTextFile(`${server.dir}/server.key`, another.key);
        await server.psql("SELECT pg_reload_conf()");
        const refused = await run(dir, {
          ...env,
          NODE_EXTRA_CA_CERTS: another.caFile,
        });
        assert.equal(refused.code, 1, refused.err);
        const lines = refused.err.trimEnd().split("\n");
        assert.equal(lines.length, 1, `one line, got:\n${refused.err}`);
        assert.match(
          lines[0]!,
          /^relayer: cannot start: .*IP: 127\.0\.0\.1 is not in the cert's list/,
        );
        assert.ok(!refused.err.includes(server.password), "the password shows");
      } finally {
        await server?.stop();
        await byAddress.remove();
        await (await anotherMade.catch(() => undefined))?.remove();
        await Deno.remove(dir, { recursive: true });
      }
    }),
  });

  Deno.test({
    name:
      `docs/api.md's ${s.runtime} service connects to a DATABASE_URL at an IPv6 address in brackets ([::1]), which postgres.js cannot read in the URL`,
    ignore: s.ignore || !postgresAvailable || !ipv6Loopback,
    fn: timeout(60_000, async () => {
      const dir = await Deno.makeTempDir({ prefix });
      let server: Awaited<ReturnType<typeof startPostgres>> | undefined;
      const port = freePort();
      try {
        server = await startPostgres({
          settings: { listen_addresses: "127.0.0.1,::1" },
        });
        await bundled(await s.service(), dir, port);
        const child = s.command(dir, {
          ...SETTINGS,
          DATABASE_URL:
            `postgres://postgres:${server.password}@[::1]:${server.port}/postgres`,
        }).spawn();
        assert.match(
          await firstLineOnceUp(child, port),
          new RegExp(
            `; store PostgreSQL \\[::1\\]:${server.port}/postgres, no TLS$`,
          ),
        );
      } finally {
        await server?.stop();
        await Deno.remove(dir, { recursive: true });
      }
    }),
  });

  Deno.test({
    name:
      `docs/api.md's ${s.runtime} service answers /readyz again within its bound after a network partition`,
    ignore: s.ignore || !postgresAvailable,
    fn: timeout(90_000, async () => {
      const dir = await Deno.makeTempDir({ prefix });
      const database = await freshDatabase();
      const relay = await blackHole(database.url);
      const port = freePort();
      const ready = () =>
        fetch(`http://127.0.0.1:${port}/readyz`)
          .then(async (r) => (await r.body?.cancel(), r.ok), () => false);
      let child: Deno.ChildProcess | undefined;
      let stdout: Promise<string> | undefined;
      try {
        await bundled(await s.service(), dir, port);
        child = s.command(dir, { ...SETTINGS, DATABASE_URL: relay.url })
          .spawn();
        // Read to its end: its lines of connections cut go there.
        stdout = new Response(child.stdout).text();
        void child.stderr.cancel();
        let up = false;
        for (let i = 0; i < 200 && !up; i++) {
          up = await ready();
          if (!up) await new Promise((r) => setTimeout(r, 100));
        }
        assert.ok(up, "the service never answered /readyz");
        // The whole pool open (postgres.js's 10 connections): an ops read
        // each, at once. The partition then catches every connection.
        const reads = await Promise.all(
          Array.from(
            { length: 20 },
            (_, i) =>
              fetch(`http://127.0.0.1:${port}/v1/intents/pi_${i}`, {
                headers: { authorization: `Bearer ${SETTINGS.OPS_TOKEN}` },
              }).then(async (r) => (await r.body?.cancel(), r.status)),
          ),
        );
        assert.deepEqual(new Set(reads), new Set([404]), "the ops reads");
        // The packets dropped, not refused: the probe's read is lost on
        // one of the pool's connections, and every connection the relay
        // holds stays silent after it is replaced.
        relay.hole();
        await new Promise((r) => setTimeout(r, 1_100)); // past the last probe's answer
        assert.equal(await ready(), false, "/readyz in the partition");
        relay.replace();
        const healed = performance.now();
        let servedMs: number | null = null;
        while (servedMs === null && performance.now() - healed < 25_000) {
          if (await ready()) servedMs = performance.now() - healed;
          else await new Promise((r) => setTimeout(r, 250));
        }
        // The service's bound is 10 s from the lost read's write.
        assert.ok(
          servedMs !== null && servedMs < 15_000,
          `/readyz answered 200 ${
            servedMs === null
              ? "never within 25 s"
              : `${Math.round(servedMs)} ms`
          } after the partition healed`,
        );
      } finally {
        if (child) {
          child.kill("SIGKILL");
          await child.status;
          await stdout;
        }
        await relay.close();
        await database.drop();
        await Deno.remove(dir, { recursive: true });
      }
    }),
  });

  Deno.test({
    name:
      `docs/api.md's ${s.runtime} service says in one line, without a stack, that its port is in use`,
    ignore: s.ignore || !postgresAvailable,
    fn: timeout(60_000, async () => {
      const dir = await Deno.makeTempDir({ prefix });
      const database = await freshDatabase();
      // Another process (a relayer still running) holds the port.
      const held = Deno.listen({ hostname: "127.0.0.1", port: 0 });
      try {
        await bundled(await s.service(), dir, held.addr.port);
        const { code, err } = await run(dir, {
          ...SETTINGS,
          DATABASE_URL: database.url,
        });
        assert.equal(code, 1, `exit code; stderr:\n${err}`);
        const lines = err.trimEnd().split("\n");
        assert.equal(lines.length, 1, `one line, got:\n${err}`);
        assert.match(lines[0]!, /^relayer: cannot start: /);
        assert.match(lines[0]!, s.inUse);
      } finally {
        held.close();
        await database.drop();
        await Deno.remove(dir, { recursive: true });
      }
    }),
  });
  Deno.test({
    name:
      `docs/api.md's ${s.runtime} service exits at once on a second signal, saying what it cut short, as main.ts does; the first heard twice still drains`,
    ignore: s.ignore || !postgresAvailable,
    fn: timeout(60_000, () =>
      midSend(async ({ base, child, signer }) => {
        await sentMidway(base, signer, "pi_again");
        await secondSignalExits(child);
      })),
  });
}
