/**
 * `main.ts` as `deno task start` runs it, at the edges of its life: the
 * line that says where it listens, a start refused in one line (a port
 * already taken, a `KV_PATH` it may not write), and the drain line naming
 * the store it closed.
 */
import assert from "node:assert/strict";
import {
  assertOneLine,
  freePort,
  healthy,
  type MainProcess,
  startMain,
  type StartOptions,
} from "./_main_process.ts";
import { freshDatabase, postgresAvailable } from "./_postgres.ts";
import { runs } from "./_runs.ts";
import { timeout } from "./_timeout.ts";
import {
  emptyKv,
  readRefusingKv,
  refusingMetadata,
  silentKv,
  silentMetadata,
} from "./_echoing_kv.ts";

const SETTINGS = {
  SENDER_URL: "http://127.0.0.1:9/",
  WEBHOOK_SECRET: "start-secret-0123456789abcdef",
};

/**
 * `stderr` without the lines Deno itself writes when a KV Connect call
 * fails and it fetches the metadata again (`KV Connect failed to call
 * '…' (status=403 Forbidden): …; refreshing metadata and retrying`).
 */
function withoutKvConnectRetries(stderr: string): string {
  return stderr.split("\n").filter((line) =>
    !line.startsWith("KV Connect failed to call ")
  ).join("\n");
}

/**
 * Where `service`, started on port 0, says it listens: a port the system
 * picked, not 0; fails with what it wrote on stderr if it ended first.
 */
async function listening(service: MainProcess): Promise<string> {
  const base = await service.base();
  if (base === null) {
    assert.fail(`main.ts did not start: ${(await service.ended()).stderr}`);
  }
  assert.notEqual(new URL(base).port, "0", base);
  return base;
}

/** `main.ts` with the settings every test here shares, and `env`. */
function start(
  env: Record<string, string>,
  options: StartOptions,
): MainProcess {
  return startMain({ ...SETTINGS, ...env }, options);
}

Deno.test(
  "main.ts refuses a port already taken in one line, without a stack",
  timeout(30_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
    // A port this test holds open for the whole run, so the child must be
    // refused it: held, it cannot be another process's in between.
    const taken = freePort(true);
    const service = start({ KV_PATH: `${dir}/relayer.kv` }, {
      port: taken.port,
      writeDir: dir,
    });
    try {
      const { code, stderr } = await service.ended();
      assert.equal(code, 1);
      assertOneLine(
        stderr,
        /^relayer: cannot start: the address to listen on is in use \(.*\): .*Stop it, or serve on another port: deno serve --host 127.0.0.1 --port 8001 .* main\.ts \(deno task start always takes 8000\)\.$/,
      );
    } finally {
      service.kill();
      taken.listener!.close();
      await Deno.remove(dir, { recursive: true });
    }
  }),
);

Deno.test(
  "main.ts refuses a KV_PATH it may not write in one line that names KV_PATH and the flag to change",
  timeout(30_000, async () => {
    const writable = await Deno.makeTempDir({ prefix: "relayer_start_" });
    const elsewhere = await Deno.makeTempDir({ prefix: "relayer_start_" });
    const service = start({ KV_PATH: `${elsewhere}/relayer.kv` }, {
      writeDir: writable,
    });
    try {
      const { code, stderr } = await service.ended();
      assert.equal(code, 1);
      assertOneLine(
        stderr,
        new RegExp(
          `^relayer: cannot start: KV_PATH: cannot write ${elsewhere}/relayer\\.kv: .*--allow-write=${elsewhere}/ `,
        ),
      );
    } finally {
      service.kill();
      await Deno.remove(writable, { recursive: true });
      await Deno.remove(elsewhere, { recursive: true });
    }
  }),
);

Deno.test(
  "main.ts refuses in one line, without a stack: no --allow-env, an address not on this machine, no --allow-read for KV_PATH, a KV_PATH that is a folder or not a store",
  timeout(60_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
    await Deno.writeTextFile(`${dir}/not.kv`, "plain text, not SQLite");
    const cases: [
      string,
      Record<string, string>,
      { flags?: string[]; drop?: string[] },
      RegExp,
    ][] = [
      [
        "no --allow-env",
        { KV_PATH: `${dir}/relayer.kv` },
        { drop: ["--allow-env"] },
        /^relayer: cannot start: it may not read its environment, where every setting is: serve with --allow-env/,
      ],
      [
        "an address not on this machine",
        { KV_PATH: `${dir}/relayer.kv` },
        { drop: ["--host", "127.0.0.1"], flags: ["--host", "192.0.2.1"] },
        /^relayer: cannot start: the address to listen on is not one of this machine's \(.*\): serve with --host/,
      ],
      [
        "no --allow-read",
        { KV_PATH: `${dir}/relayer.kv` },
        { drop: ["--allow-read"] },
        /^relayer: cannot start: KV_PATH: cannot open .*: this process may not read there\. Serve with --allow-read/,
      ],
      [
        // Deno KV writes <path>-shm and <path>-wal beside it, outside the
        // folder it may write: "may not write there, serve with
        // --allow-write=<its parent>" sent the operator on a detour.
        "a folder",
        { KV_PATH: dir },
        {},
        new RegExp(
          `^relayer: cannot start: KV_PATH: ${dir} is a folder: Deno KV keeps its store in a file, so name one in it, such as KV_PATH=${dir}/relayer\\.kv\\.$`,
        ),
      ],
      [
        "a file that is not a store",
        { KV_PATH: `${dir}/not.kv` },
        {},
        /^relayer: cannot start: KV_PATH: .*not\.kv is damaged, or is not a SQLite file \(.*\): keep it as it is \(it may hold every payment's record\)\. Check that KV_PATH names this service's store/,
      ],
    ];
    try {
      for (const [name, env, flags, pattern] of cases) {
        const service = start(env, { writeDir: dir, ...flags });
        try {
          const { code, stderr } = await service.ended();
          assert.equal(code, 1, name);
          assertOneLine(stderr, pattern);
        } finally {
          service.kill();
        }
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }),
);

/**
 * How to run `deno` so that the system refuses it port 80: as root,
 * through `setpriv` without CAP_NET_BIND_SERVICE; as another user, as it
 * is where ports below 1024 are privileged. `null` where neither holds.
 */
async function withoutLowPorts(): Promise<string[] | null> {
  const uid = await new Deno.Command("id", { args: ["-u"] }).output()
    .then(({ stdout }) => new TextDecoder().decode(stdout).trim())
    .catch(() => "");
  if (uid === "0") {
    const drop = [
      "setpriv",
      "--bounding-set=-net_bind_service",
      "--inh-caps=-net_bind_service",
    ];
    return await runs(drop[0]!, [...drop.slice(1), "true"]) ? drop : null;
  }
  const first = await Deno.readTextFile(
    "/proc/sys/net/ipv4/ip_unprivileged_port_start",
  ).catch(() => "");
  return uid !== "" && Number(first) > 80 ? [] : null;
}

const LOW_PORTS_REFUSED = await withoutLowPorts();

Deno.test(
  "main.ts refuses a listen its permissions refuse (--deny-net for its address) in one line that says which flag to change, without a stack",
  timeout(30_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
    // deno serve lets its own --host and --port through its --allow-net
    // (even --allow-net=127.0.0.1:1): only a --deny-net refuses them.
    // A port probed free, not 0: the refusal names the address, and port 0
    // would have it advise --allow-net=127.0.0.1:0. The child never binds
    // it (the permission check comes first), so another process taking it
    // meanwhile changes nothing.
    const service = start({ KV_PATH: `${dir}/relayer.kv` }, {
      ...freePort(),
      writeDir: dir,
      flags: ["--deny-net=127.0.0.1"],
    });
    try {
      const { code, stderr } = await service.ended();
      assert.equal(code, 1, stderr);
      assertOneLine(
        stderr,
        /^relayer: cannot start: this process may not listen on 127\.0\.0\.1:\d+: .*--deny-net.*--allow-net=127\.0\.0\.1:\d+/,
      );
    } finally {
      service.kill();
      await Deno.remove(dir, { recursive: true });
    }
  }),
);

Deno.test({
  name:
    "main.ts refuses a port the system keeps for privileged processes (80, without CAP_NET_BIND_SERVICE) in one line that says what to do, without a stack",
  ignore: LOW_PORTS_REFUSED === null,
  fn: timeout(30_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
    const service = start({ KV_PATH: `${dir}/relayer.kv` }, {
      port: 80,
      writeDir: dir,
      via: LOW_PORTS_REFUSED!,
    });
    try {
      const { code, stderr } = await service.ended();
      assert.equal(code, 1, stderr);
      assertOneLine(
        stderr,
        /^relayer: cannot start: the system refuses to let this process listen on its port \(.*os error 13.*\): .*below 1024.*CAP_NET_BIND_SERVICE.*--port 8000/,
      );
    } finally {
      service.kill();
      await Deno.remove(dir, { recursive: true });
    }
  }),
});

/**
 * Starts `main.ts` with `env` (given the URL of the KV Connect stand-in
 * `serve` starts, if any), waits for it to end, and returns its exit code,
 * its `stderr` and how long it ran. With `served`, it also polls `/healthz`
 * and fails with that message should the service answer before it ends.
 */
async function refusedStart(
  serve: (() => Deno.HttpServer<Deno.NetAddr>) | undefined,
  env: (url: string) => Record<string, string>,
  served?: string,
): Promise<{ code: number; stderr: string; took: number }> {
  const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
  const server = serve?.();
  // A service that refused leaves the poll for /healthz to be stopped.
  const stop = new AbortController();
  try {
    const began = performance.now();
    // Port 0: a service that does serve says where, in its listening line.
    const service = start(
      env(`http://127.0.0.1:${server?.addr.port}/kv`),
      { writeDir: dir },
    );
    try {
      const outcome = served === undefined
        ? await service.ended()
        : await Promise.race([
          service.ended(),
          service.base().then(async (base) => {
            if (base === null) return await service.ended();
            await healthy(base, stop.signal);
            return "served" as const;
          }),
        ]);
      const took = performance.now() - began;
      assert.notEqual(outcome, "served", served);
      const { code, stderr } = outcome as { code: number; stderr: string };
      return { code, stderr, took };
    } finally {
      stop.abort();
      service.kill();
      await service.ended().catch(() => {});
    }
  } finally {
    await server?.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test(
  "main.ts refuses a KV_URL it cannot open in one line naming KV_URL, without the access token an answer echoed",
  timeout(60_000, async () => {
    const token = "KVTOK/0123  456789abcdef"; // a slash and a run of spaces
    // A metadata endpoint that refuses, quoting the request's header.
    const { code, stderr } = await refusedStart(refusingMetadata, (url) => ({
      KV_URL: url,
      DENO_KV_ACCESS_TOKEN: token,
    }));
    assert.equal(code, 1);
    assertOneLine(
      stderr,
      /^relayer: cannot start: KV_URL: cannot open the KV Connect database \(.*401.*\): check KV_URL and DENO_KV_ACCESS_TOKEN\.$/,
    );
    assert.ok(!stderr.includes("456789abcdef"), stderr);
  }),
);

Deno.test(
  "main.ts on Deno Deploy refuses in one line to start without a Deno KV database attached to the app, rather than serve on a store of each isolate's own",
  timeout(30_000, async () => {
    // What Deploy sets when no database is assigned: no DENO_KV_DEFAULT_PATH.
    const { code, stderr } = await refusedStart(
      undefined,
      () => ({ DENO_DEPLOYMENT_ID: "test-deployment" }),
      "it served on an isolate's own KV",
    );
    assert.equal(code, 1);
    assertOneLine(
      stderr,
      /^relayer: cannot start: No Deno KV database is attached to this app on Deno Deploy: .*Provision Database \(Deno KV\), then Assign it to this app, and redeploy/,
    );
  }),
);

Deno.test(
  "main.ts on Deno Deploy refuses KV_PATH in one line, beside the attached database, rather than serve on a store of each isolate's own",
  timeout(30_000, async () => {
    // A database attached and answering, as Deploy sets it, and KV_PATH,
    // which Deno.openKv() would open in its place.
    const { code, stderr } = await refusedStart(
      emptyKv,
      (url) => ({
        DENO_DEPLOYMENT_ID: "test-deployment",
        DENO_KV_DEFAULT_PATH: url,
        DENO_KV_ACCESS_TOKEN: "deploy-token-0123456789",
        KV_PATH: ":memory:",
      }),
      "it served on an isolate's own KV",
    );
    assert.equal(code, 1);
    assertOneLine(
      stderr,
      /^relayer: cannot start: KV_PATH is refused on Deno Deploy: .*Remove KV_PATH from the app's environment variables/,
    );
  }),
);

Deno.test(
  "main.ts on Deno Deploy refuses the attached KV database it cannot open in one line, without the access token an answer echoed",
  timeout(60_000, async () => {
    const token = "DEPLOYTOK/0123  456789abcdef";
    // As Deploy attaches a database: its URL and token, set by Deploy.
    const { code, stderr } = await refusedStart(refusingMetadata, (url) => ({
      DENO_DEPLOYMENT_ID: "test-deployment",
      DENO_KV_DEFAULT_PATH: url,
      DENO_KV_ACCESS_TOKEN: token,
    }));
    assert.equal(code, 1);
    assertOneLine(
      stderr,
      /^relayer: cannot start: Deno Deploy KV: cannot open the Deno KV database attached to this app \(.*401.*\): check in the Deno Deploy dashboard, Databases, that it is assigned to this app and Connected/,
    );
    assert.ok(!stderr.includes("456789abcdef"), stderr);
  }),
);

Deno.test(
  "main.ts on Deno Deploy refuses in one line an attached KV database that opens but refuses reads, rather than serve and fail every delivery",
  timeout(60_000, async () => {
    const { code, stderr } = await refusedStart(
      readRefusingKv,
      (url) => ({
        DENO_DEPLOYMENT_ID: "test-deployment",
        DENO_KV_DEFAULT_PATH: url,
        DENO_KV_ACCESS_TOKEN: "deploy-token-0123456789",
      }),
      "it served on a database it cannot read",
    );
    assert.equal(code, 1);
    assertOneLine(
      withoutKvConnectRetries(stderr),
      /^relayer: cannot start: Deno Deploy KV: cannot open the Deno KV database attached to this app \(.*403.*this database is not connected.*\): check in the Deno Deploy dashboard, Databases, that it is assigned to this app and Connected/,
    );
  }),
);

/** The settings of a KV Connect database at `url`. */
function kvConnect(url: string): Record<string, string> {
  return { KV_URL: url, DENO_KV_ACCESS_TOKEN: "kv-connect-token-0123456789" };
}

Deno.test(
  "main.ts refuses in one line naming KV_URL a KV Connect database that opens but refuses reads",
  timeout(60_000, async () => {
    const { code, stderr } = await refusedStart(
      readRefusingKv,
      kvConnect,
      "it served on a database it cannot read",
    );
    assert.equal(code, 1);
    assertOneLine(
      withoutKvConnectRetries(stderr),
      /^relayer: cannot start: KV_URL: cannot open the KV Connect database \(.*403.*\): check KV_URL and DENO_KV_ACCESS_TOKEN\.$/,
    );
  }),
);

// Both starts at once: each waits out its 10 s on a real clock, in a
// process of its own, and waits is all either does meanwhile.
Deno.test(
  "main.ts refuses in one line naming KV_URL a KV Connect database whose reads never answer, once 10 s have passed, rather than hold its start without end; and one whose metadata endpoint never answers, once 10 s have passed, not Deno's own 30 s",
  timeout(60_000, async () => {
    const [reads, metadata] = await Promise.all([
      refusedStart(
        silentKv,
        kvConnect,
        "it served on a database that never answers",
      ),
      refusedStart(silentMetadata, kvConnect),
    ]);
    assert.equal(reads.code, 1);
    assertOneLine(
      withoutKvConnectRetries(reads.stderr),
      /^relayer: cannot start: KV_URL: cannot open the KV Connect database \(no answer to a read within 10s\): check KV_URL and DENO_KV_ACCESS_TOKEN\.$/,
    );
    // The read's 10 s, and a start well under the next 10.
    assert.ok(
      reads.took >= 10_000 && reads.took < 20_000,
      `${reads.took} ms`,
    );
    assert.equal(metadata.code, 1);
    assertOneLine(
      withoutKvConnectRetries(metadata.stderr),
      /^relayer: cannot start: KV_URL: cannot open the KV Connect database \(no answer from its metadata endpoint within 10s\): check KV_URL and DENO_KV_ACCESS_TOKEN\.$/,
    );
    assert.ok(
      metadata.took >= 10_000 && metadata.took < 20_000,
      `${metadata.took} ms`,
    );
  }),
);

const STORES = [
  {
    name: "KvStore",
    ignore: false,
    closed: "KV closed",
    open: (dir: string) =>
      Promise.resolve({
        env: { KV_PATH: `${dir}/relayer.kv` },
        drop: () => Promise.resolve(),
      }),
  },
  {
    name: "PostgresStore",
    ignore: !postgresAvailable,
    closed: "PostgreSQL connections closed",
    async open() {
      const database = await freshDatabase();
      return { env: { DATABASE_URL: database.url }, drop: database.drop };
    },
  },
];

for (const store of STORES) {
  Deno.test({
    name:
      `main.ts says where it listens, and its drain line names the store it closed [${store.name}]`,
    ignore: store.ignore,
    fn: timeout(30_000, async () => {
      const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
      const storage = await store.open(dir);
      // Port 0: the child binds a port the system picks, and says which.
      const service = start(storage.env, { writeDir: dir });
      try {
        const base = await listening(service);
        await healthy(base);
        service.child.kill("SIGTERM");
        const { code, stdout, stderr } = await service.ended();
        assert.equal(code, 0, `${stdout}\n${stderr}`);
        const lines = stdout.trim().split("\n");
        assert.match(lines[0]!, /^relayer: at most 10 deliveries; /);
        // It says which routes answer, the ops routes included.
        assert.match(
          lines[0]!,
          /; routes: deliveries, ops closed \(no OPS_TOKEN\)$/,
        );
        assert.equal(lines[1], `relayer: listening on ${base}/`);
        assert.equal(lines.at(-1), `relayer: drained; ${store.closed}`);
      } finally {
        service.kill();
        await service.ended().catch(() => {});
        await storage.drop();
        await Deno.remove(dir, { recursive: true });
      }
    }),
  });
}

Deno.test(
  "main.ts names a misspelt setting after its start line, and the setting it likely meant, and a setting nothing reads (PUBLIC_URL with no QStash, a Cloudflare Worker's CLOUDFLARE_MESSAGE_RETENTION, and its CLOUDFLARE_MAX_RETRIES=3 the Worker refuses, which the service does not), rather than start on the default with nothing said",
  timeout(30_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
    const service = start(
      {
        KV_PATH: `${dir}/relayer.kv`,
        MAX_DELIVERY: "3",
        PUBLIC_URL: "https://relayer.example.com",
        CLOUDFLARE_MESSAGE_RETENTION: "96h",
        // The Worker refuses Cloudflare's default 3 under MAX_DELIVERIES
        // 10; the service, which never reads it, starts and says so.
        CLOUDFLARE_MAX_RETRIES: "3",
      },
      { writeDir: dir },
    );
    try {
      const base = await listening(service);
      await healthy(base);
      service.child.kill("SIGTERM");
      const { code, stdout, stderr } = await service.ended();
      assert.equal(code, 0, `${stdout}\n${stderr}`);
      const lines = stdout.trim().split("\n");
      assert.match(lines[0]!, /^relayer: at most 10 deliveries; /);
      assert.equal(
        lines[1],
        "relayer: MAX_DELIVERY is not a setting of the relayer, so it is ignored: did you mean MAX_DELIVERIES? (the settings: docs/routes.md#deploy-to-deno-deploy-with-qstash)",
      );
      assert.equal(
        lines[2],
        "relayer: PUBLIC_URL is set, but the service uses it only for QStash (its route, with QSTASH_CURRENT_SIGNING_KEY and QSTASH_NEXT_SIGNING_KEY; its publisher, with QSTASH_TOKEN) and none of those is set, so it is read only to refuse, at a URL off this machine, the docs' local-run secrets and RELAYER_INSECURE_DEV",
      );
      assert.equal(
        lines[3],
        "relayer: CLOUDFLARE_MAX_RETRIES is set, but only a Cloudflare Worker reads it (its queue handler, createQueueHandler) and this service consumes no Cloudflare queue, so it is ignored here; a Worker given this value refuses to start: CLOUDFLARE_MAX_RETRIES is 3, so Cloudflare Queues move a job to the dead-letter queue after 4 deliveries, before MAX_DELIVERIES (10): set the consumer's max_retries and CLOUDFLARE_MAX_RETRIES to at least 9, or lower MAX_DELIVERIES",
      );
      assert.equal(
        lines[4],
        "relayer: CLOUDFLARE_MESSAGE_RETENTION is set, but only a Cloudflare Worker reads it (its queue handler, createQueueHandler) and this service consumes no Cloudflare queue, so it is ignored here (its value is checked all the same)",
      );
      assert.equal(lines[5], `relayer: listening on ${base}/`);
    } finally {
      service.kill();
      await service.ended().catch(() => {});
      await Deno.remove(dir, { recursive: true });
    }
  }),
);

Deno.test(
  "main.ts refused for a setting it lacks names a misspelt one after its refusal, and the setting it likely meant",
  timeout(30_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_start_" });
    const service = startMain({
      SENDER_URL: SETTINGS.SENDER_URL,
      WEBHOOK_SECRETS: SETTINGS.WEBHOOK_SECRET,
      KV_PATH: `${dir}/relayer.kv`,
    }, { writeDir: dir });
    try {
      const { code, stderr } = await service.ended();
      assert.equal(code, 1, stderr);
      const lines = stderr.trim().split("\n").filter((line) =>
        !/^(Task|Download|Warning) /.test(line)
      );
      assert.equal(lines.length, 2, stderr);
      assert.match(
        lines[0]!,
        /^relayer: cannot start: No delivery route is configured: /,
      );
      assert.equal(
        lines[1],
        "relayer: WEBHOOK_SECRETS is not a setting of the relayer, so it is ignored: did you mean WEBHOOK_SECRET? (the settings: docs/routes.md#deploy-to-deno-deploy-with-qstash)",
      );
      // The value it holds, a secret, is not printed.
      assert.doesNotMatch(stderr, new RegExp(SETTINGS.WEBHOOK_SECRET));
    } finally {
      service.kill();
      await Deno.remove(dir, { recursive: true });
    }
  }),
);
