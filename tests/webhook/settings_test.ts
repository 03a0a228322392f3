import assert from "node:assert/strict";
import { ConfigError, loadConfig } from "../../webhook/config.ts";
import { refusal } from "./_config.ts";
import {
  serviceSettings,
  SETTINGS,
  unknownSettingLines,
  unreadSettingLines,
} from "../../webhook/_settings.ts";

Deno.test("unknownSettingLines() names a misspelt setting and the one it likely meant", () => {
  assert.deepEqual(
    unknownSettingLines(["MAX_DELIVERY", "QSTASH_RETRY", "SENDER_TIMEOUT_MS"]),
    [
      "relayer: MAX_DELIVERY is not a setting of the relayer, so it is ignored: did you mean MAX_DELIVERIES? (the settings: docs/routes.md#deploy-to-deno-deploy-with-qstash)",
      "relayer: QSTASH_RETRY is not a setting of the relayer, so it is ignored: did you mean QSTASH_RETRIES? (the settings: docs/routes.md#deploy-to-deno-deploy-with-qstash)",
      "relayer: SENDER_TIMEOUT_MS is not a setting of the relayer, so it is ignored: did you mean SENDER_TIMEOUT? (the settings: docs/routes.md#deploy-to-deno-deploy-with-qstash)",
    ],
  );
  // Far from every setting: named, with no guess.
  assert.deepEqual(unknownSettingLines(["KV_SOMETHING_ELSE_ENTIRELY"]), [
    "relayer: KV_SOMETHING_ELSE_ENTIRELY is not a setting of the relayer, so it is ignored (the settings: docs/routes.md#deploy-to-deno-deploy-with-qstash)",
  ]);
});

Deno.test("unreadSettingLines() names PUBLIC_URL set where nothing reads it: no QStash route and no QStash publisher", () => {
  const base = {
    SENDER_URL: "http://127.0.0.1:9000",
    WEBHOOK_SECRET: "a-webhook-secret-16",
  };
  const line =
    "relayer: PUBLIC_URL is set, but the service uses it only for QStash (its route, with QSTASH_CURRENT_SIGNING_KEY and QSTASH_NEXT_SIGNING_KEY; its publisher, with QSTASH_TOKEN) and none of those is set, so it is read only to refuse, at a URL off this machine, the docs' local-run secrets and RELAYER_INSECURE_DEV";
  const alone = { ...base, PUBLIC_URL: "https://relayer.example.com" };
  // The service starts, and said so; PUBLIC_URL is still read to refuse the
  // docs' local-run secrets and RELAYER_INSECURE_DEV at a URL off this
  // machine.
  assert.equal(loadConfig(alone).qstash, undefined);
  assert.throws(
    () => loadConfig({ ...alone, WEBHOOK_SECRET: "local-secret-0123456789" }),
    /this service is reached at PUBLIC_URL, off this machine/,
  );
  assert.throws(
    () => loadConfig({ ...alone, RELAYER_INSECURE_DEV: "1" }),
    /this service is reached at PUBLIC_URL, off this machine/,
  );
  assert.equal(
    loadConfig({
      ...base,
      WEBHOOK_SECRET: "local-secret-0123456789",
    }).qstash,
    undefined,
  );
  assert.deepEqual(unreadSettingLines(alone), [line]);
  assert.deepEqual(
    unreadSettingLines({
      ...alone,
      PUBSUB_AUDIENCE: "https://relayer.example.com/v1/pubsub",
    }),
    [line],
  );
  // Read: by QStash's route, or by its publisher.
  const keys = {
    QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
    QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789ab",
  };
  assert.equal(
    loadConfig({ ...alone, ...keys }).qstash?.url,
    "https://relayer.example.com/v1/qstash",
  );
  assert.deepEqual(unreadSettingLines({ ...alone, ...keys }), []);
  assert.deepEqual(
    unreadSettingLines({
      ...alone,
      QSTASH_TOKEN: "a-qstash-token",
      RELAYER_INSECURE_DEV: "1",
    }),
    [],
  );
  // Unset, or empty (as unset to loadConfig): nothing to say.
  assert.deepEqual(unreadSettingLines(base), []);
  assert.deepEqual(unreadSettingLines({ ...base, PUBLIC_URL: "" }), []);
});

Deno.test("unreadSettingLines() names QSTASH_RETRIES with no QStash, and Pub/Sub's backoffs and retention with no PUBSUB_AUDIENCE: each started unchecked with nothing said", () => {
  const base = {
    SENDER_URL: "http://127.0.0.1:9000",
    WEBHOOK_SECRET: "a-webhook-secret-16",
  };
  const qstash =
    "relayer: QSTASH_RETRIES is set, but only QStash reads it (its route's check, with QSTASH_CURRENT_SIGNING_KEY and QSTASH_NEXT_SIGNING_KEY; its publisher, with QSTASH_TOKEN) and none of those is set, so it is ignored";
  const retries = { ...base, QSTASH_RETRIES: "4" };
  assert.equal(loadConfig(retries).qstash, undefined); // started, unchecked
  assert.deepEqual(unreadSettingLines(retries), [qstash]);
  const keys = {
    QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
    QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789ab",
  };
  assert.deepEqual(unreadSettingLines({ ...retries, ...keys }), []);
  assert.deepEqual(
    unreadSettingLines({ ...retries, QSTASH_TOKEN: "a-qstash-token" }),
    [],
  );
  const pubsub = (name: string) =>
    `relayer: ${name} is set, but only the Pub/Sub check reads it, with PUBSUB_AUDIENCE, which is not set, so it is ignored`;
  const backoffs = {
    ...base,
    PUBSUB_MIN_BACKOFF: "1s",
    PUBSUB_MAX_BACKOFF: "10m",
    PUBSUB_MESSAGE_RETENTION: "10m",
  };
  assert.equal(loadConfig(backoffs).pubsub, undefined); // started, unchecked
  assert.deepEqual(unreadSettingLines(backoffs), [
    pubsub("PUBSUB_MIN_BACKOFF"),
    pubsub("PUBSUB_MAX_BACKOFF"),
    pubsub("PUBSUB_MESSAGE_RETENTION"),
  ]);
  assert.deepEqual(
    unreadSettingLines({
      ...backoffs,
      PUBSUB_AUDIENCE: "https://relayer.example.com/v1/pubsub",
    }),
    [],
  );
  assert.deepEqual(
    unreadSettingLines({ ...base, QSTASH_RETRIES: "", PUBSUB_MIN_BACKOFF: "" }),
    [],
  );
});

Deno.test("unreadSettingLines() names PUBSUB_MAX_DELIVERY_ATTEMPTS with no PUBSUB_AUDIENCE: started unchecked, a dead-letter policy too short for MAX_DELIVERIES with nothing said", () => {
  const base = {
    SENDER_URL: "http://127.0.0.1:9000",
    WEBHOOK_SECRET: "a-webhook-secret-16",
  };
  // 5 attempts under MAX_DELIVERIES 10: refused where Pub/Sub is checked.
  const attempts = { ...base, PUBSUB_MAX_DELIVERY_ATTEMPTS: "5" };
  assert.equal(loadConfig(attempts).pubsub, undefined); // started, unchecked
  assert.deepEqual(unreadSettingLines(attempts), [
    "relayer: PUBSUB_MAX_DELIVERY_ATTEMPTS is set, but only the Pub/Sub check reads it, with PUBSUB_AUDIENCE, which is not set, so it is ignored",
  ]);
  assert.throws(
    () =>
      loadConfig({
        ...attempts,
        PUBSUB_AUDIENCE: "https://relayer.example.com/v1/pubsub",
        PUBSUB_SERVICE_ACCOUNT: "pusher@project.iam.gserviceaccount.com",
      }),
    /PUBSUB_/,
  );
  assert.deepEqual(
    unreadSettingLines({
      ...attempts,
      PUBSUB_AUDIENCE: "https://relayer.example.com/v1/pubsub",
    }),
    [],
  );
});

Deno.test("unreadSettingLines() names each CLOUDFLARE_ setting: checked, but only a Cloudflare Worker's queue handler reads it, and the service consumes no Cloudflare queue", () => {
  const base = {
    SENDER_URL: "http://127.0.0.1:9000",
    WEBHOOK_SECRET: "a-webhook-secret-16",
  };
  const cloudflare = {
    CLOUDFLARE_MAX_RETRIES: "9",
    CLOUDFLARE_DLQ_MAX_RETRIES: "100",
    CLOUDFLARE_MESSAGE_RETENTION: "96h",
    CLOUDFLARE_DLQ_MESSAGE_RETENTION: "336h",
    CLOUDFLARE_DELIVERY_DELAY: "0s",
  };
  const env = { ...base, ...cloudflare };
  loadConfig(env); // accepted: each is checked, as a Worker checks it
  const line = (name: string) =>
    `relayer: ${name} is set, but only a Cloudflare Worker reads it (its queue handler, createQueueHandler) and this service consumes no Cloudflare queue, so it is ignored here (its value is checked all the same)`;
  assert.deepEqual(
    unreadSettingLines(env),
    Object.keys(cloudflare).map(line),
  );
  // Whatever else is set: no setting of the service's makes it read.
  assert.deepEqual(
    unreadSettingLines({
      ...base,
      CLOUDFLARE_MESSAGE_RETENTION: "96h",
      QSTASH_TOKEN: "a-qstash-token",
      QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
      QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789ab",
      PUBLIC_URL: "https://relayer.example.com",
      PUBSUB_AUDIENCE: "https://relayer.example.com/v1/pubsub",
      PUBSUB_SERVICE_ACCOUNT: "pusher@project.iam.gserviceaccount.com",
      PUBSUB_MIN_BACKOFF: "40s",
    }),
    [line("CLOUDFLARE_MESSAGE_RETENTION")],
  );
  // Unset, or empty (as unset to loadConfig): nothing to say.
  assert.deepEqual(
    unreadSettingLines({ ...base, CLOUDFLARE_MAX_RETRIES: "" }),
    [],
  );
});

Deno.test("a CLOUDFLARE_ value a Worker refuses is named, with the Worker's refusal, and the service's start does not check it: the service never reads it", () => {
  const base = {
    SENDER_URL: "http://127.0.0.1:9000",
    WEBHOOK_SECRET: "a-webhook-secret-16",
  };
  const refused = (name: string, why: string) =>
    `relayer: ${name} is set, but only a Cloudflare Worker reads it (its queue handler, createQueueHandler) and this service consumes no Cloudflare queue, so it is ignored here; a Worker given this value refuses to start: ${why}`;
  // Each value loadConfig refuses, as a Worker loads it: Cloudflare's
  // default of 3 retries under MAX_DELIVERIES 10, out of bounds, a plain
  // number where Wrangler counts seconds, not whole seconds.
  const cloudflare = {
    CLOUDFLARE_MAX_RETRIES: "3",
    CLOUDFLARE_DLQ_MAX_RETRIES: "101",
    CLOUDFLARE_MESSAGE_RETENTION: "59s",
    CLOUDFLARE_DLQ_MESSAGE_RETENTION: "1209600",
    CLOUDFLARE_DELIVERY_DELAY: "1500ms",
  };
  for (const [name, value] of Object.entries(cloudflare)) {
    const env = { ...base, [name]: value };
    // The Worker's refusal stands, and the line gives it word for word.
    const error = refusal(env);
    assert.equal(error.setting, name);
    assert.deepEqual(unreadSettingLines(env), [refused(name, error.message)]);
    // The service's start checks what it reads: it starts.
    assert.deepEqual(serviceSettings(env), base);
    assert.equal(
      loadConfig(serviceSettings(env)).webhookSecret,
      base.WEBHOOK_SECRET,
    );
  }
  // Each named, in the order of the others' lines, when all are set.
  assert.equal(unreadSettingLines({ ...base, ...cloudflare }).length, 5);
  // A window the Worker's queue cannot give (its delays at most 12h),
  // which the Worker refuses as CAP's: named as CLOUDFLARE_MAX_RETRIES's,
  // the setting that asks for that queue.
  const long = {
    ...base,
    MAX_DELIVERIES: "3",
    BASE: "24h",
    CAP: "24h",
    JITTER: "none",
    STUCK_AFTER: "30h",
  };
  loadConfig(long); // the service's own queues give the window
  const cap = { ...long, CLOUDFLARE_MAX_RETRIES: "9" };
  assert.throws(() => loadConfig(cap), /^ConfigError: On Cloudflare Queues/);
  assert.match(
    unreadSettingLines(cap)[0]!,
    /^relayer: CLOUDFLARE_MAX_RETRIES is set, .* a Worker given this value refuses to start: On Cloudflare Queues, .* Lower CAP to 12h or less/,
  );
  assert.deepEqual(serviceSettings(cap), long);
  // The service refused for a setting of its own: a CLOUDFLARE_ value
  // checked before it is named with the Worker's refusal; one checked
  // after it cannot be judged until the service's own are taken.
  const noSender = { WEBHOOK_SECRET: base.WEBHOOK_SECRET };
  assert.throws(() => loadConfig(noSender), /^ConfigError: SENDER_URL/);
  assert.deepEqual(
    unreadSettingLines({ ...noSender, CLOUDFLARE_DLQ_MAX_RETRIES: "101" }),
    [
      refused(
        "CLOUDFLARE_DLQ_MAX_RETRIES",
        "CLOUDFLARE_DLQ_MAX_RETRIES must be a whole number from 0 to 100: current value is 101",
      ),
    ],
  );
  assert.deepEqual(
    unreadSettingLines({ ...noSender, CLOUDFLARE_MAX_RETRIES: "3" }),
    [
      "relayer: CLOUDFLARE_MAX_RETRIES is set, but only a Cloudflare Worker reads it (its queue handler, createQueueHandler) and this service consumes no Cloudflare queue, so it is ignored here (its value is checked once the service's own settings are taken)",
    ],
  );
  // The service's own settings are kept, set or empty; only the Worker's go.
  assert.deepEqual(
    serviceSettings({
      ...base,
      QSTASH_RETRIES: "",
      CLOUDFLARE_MAX_RETRIES: "",
    }),
    { ...base, QSTASH_RETRIES: "" },
  );
});

Deno.test("QStash's and Pub/Sub's settings are the service's own: malformed, each refuses its start though its route is off, as it would the start that turns the route on, and the Worker too", () => {
  const base = {
    SENDER_URL: "http://127.0.0.1:9000",
    WEBHOOK_SECRET: "a-webhook-secret-16",
  };
  for (
    const [name, value] of [
      ["QSTASH_RETRIES", "101"],
      ["PUBLIC_URL", "relayer.example.com"],
      ["PUBSUB_MIN_BACKOFF", "11m"],
      ["PUBSUB_MAX_DELIVERY_ATTEMPTS", "4"],
      ["PUBSUB_MESSAGE_RETENTION", "5m"],
    ]
  ) {
    const env = { ...base, [name!]: value! };
    // Kept by serviceSettings: refused by the service's start.
    assert.deepEqual(serviceSettings(env), env);
    assert.throws(() => loadConfig(serviceSettings(env)), (error) => {
      assert.ok(error instanceof ConfigError);
      assert.equal(error.setting, name);
      return true;
    });
    // Named as unread after the refusal, so that unsetting it is offered too.
    assert.equal(unreadSettingLines(env).length, 1, name);
  }
});

Deno.test("unreadSettingLines() names DENO_KV_ACCESS_TOKEN with no KV_URL off Deno Deploy: only a KV Connect database reads it", () => {
  const base = {
    SENDER_URL: "http://127.0.0.1:9000",
    WEBHOOK_SECRET: "a-webhook-secret-16",
  };
  const line =
    "relayer: DENO_KV_ACCESS_TOKEN is set, but only a KV Connect database reads it (KV_URL), which is not set, so it is ignored";
  const token = { DENO_KV_ACCESS_TOKEN: "a-kv-connect-token" };
  for (
    const store of [
      {},
      { KV_PATH: "./data/relayer.kv" },
      { DATABASE_URL: "postgres://u:p@db.test/relayer" },
    ]
  ) {
    const env = { ...base, ...store, ...token };
    assert.equal("url" in loadConfig(env).kv, false); // no KV Connect
    assert.deepEqual(unreadSettingLines(env), [line]);
  }
  assert.deepEqual(
    unreadSettingLines({ ...base, ...token, KV_URL: "https://kv.test/db" }),
    [],
  );
  // On Deno Deploy the runtime may open its own database with it.
  assert.deepEqual(
    unreadSettingLines({ ...base, ...token, DENO_DEPLOYMENT_ID: "abc" }),
    [],
  );
  assert.deepEqual(
    unreadSettingLines({ ...base, DENO_KV_ACCESS_TOKEN: "" }),
    [],
  );
});

Deno.test("unreadSettingLines() names PGSSL and PGSSLNEGOTIATION: the service takes TLS from DATABASE_URL alone, so PGSSL=require left it in plain text with nothing said", () => {
  const base = {
    SENDER_URL: "http://127.0.0.1:9000",
    WEBHOOK_SECRET: "a-webhook-secret-16",
  };
  const line = (name: string) =>
    `relayer: ${name} is set, but the service takes TLS from DATABASE_URL alone (its sslmode and sslnegotiation: docs/postgres.md), so it is ignored`;
  const database = { ...base, DATABASE_URL: "postgres://u:p@db.test/relayer" };
  const env = { ...database, PGSSL: "require", PGSSLNEGOTIATION: "direct" };
  // What postgres.js is given: no TLS, as the URL says.
  assert.equal(loadConfig(env).database?.ssl, false);
  assert.equal(loadConfig(env).database?.sslnegotiation, null);
  assert.deepEqual(unreadSettingLines(env), [
    line("PGSSL"),
    line("PGSSLNEGOTIATION"),
  ]);
  // With no DATABASE_URL there is no PostgreSQL client to read them.
  assert.deepEqual(unreadSettingLines({ ...base, PGSSL: "require" }), [
    line("PGSSL"),
  ]);
  assert.deepEqual(unreadSettingLines({ ...database, PGSSL: "" }), []);
});

Deno.test("unknownSettingLines() leaves the settings, and names outside their families, alone", () => {
  const others = [
    "PATH",
    "HOME",
    "DENO_DIR",
    "DENO_REGION",
    "NO_COLOR",
    "TMPDIR",
    "BASH",
    "TMP",
    // Two edits from LEASE and SENDER_URL, and common in deployments: no
    // misspelling.
    "RELEASE",
    "SERVER_URL",
  ];
  assert.deepEqual(unknownSettingLines([...SETTINGS, ...others]), []);
});

Deno.test("unknownSettingLines() names a misspelt DATABASE_URL, LEASE or JITTER too, and a name a letter off a setting's: a DATABASE_URI left the service on Deno KV with nothing said", () => {
  const meant = (name: string) =>
    /did you mean ([A-Z_]+)\?/.exec(unknownSettingLines([name])[0] ?? "")?.[1];
  assert.equal(meant("DATABASE_URI"), "DATABASE_URL");
  assert.equal(meant("DATABSE_URL"), "DATABASE_URL");
  assert.equal(meant("LEASE_MS"), "LEASE");
  assert.equal(meant("LEASES"), "LEASE");
  assert.equal(meant("JITER"), "JITTER");
  assert.equal(meant("BASES"), "BASE"); // five letters: named
  assert.deepEqual(unknownSettingLines(["BASH", "CAPS"]), []); // four: not
  assert.equal(meant("JITTER_MODE"), undefined);
  assert.equal(unknownSettingLines(["JITTER_MODE"]).length, 1);
  assert.equal(meant("CLOCKSKEW"), "CLOCK_SKEW");
  assert.equal(meant("PUBLICURL"), "PUBLIC_URL");
  assert.equal(meant("DENO_KV_ACCES_TOKEN"), "DENO_KV_ACCESS_TOKEN");
  // A service of the namespace named database or lease is no misspelling.
  assert.deepEqual(
    unknownSettingLines(["DATABASE_SERVICE_HOST", "LEASE_PORT_80_TCP"]),
    [],
  );
});

Deno.test("unknownSettingLines() leaves the database variables a platform or a compose file sets beside DATABASE_URL alone: DATABASE_USER is no misspelt DATABASE_URL", () => {
  assert.deepEqual(
    unknownSettingLines([
      "DATABASE_HOST",
      "DATABASE_NAME",
      "DATABASE_PASSWORD",
      "DATABASE_PORT",
      "DATABASE_PRIVATE_URL",
      "DATABASE_PUBLIC_URL",
      "DATABASE_USER",
    ]),
    [],
  );
});

Deno.test("unknownSettingLines() leaves the variables Wrangler reads alone: a CI job's CLOUDFLARE_API_TOKEN is no misspelt CLOUDFLARE_ setting", () => {
  const wrangler = [
    "CLOUDFLARE_ACCOUNT_ID",
    "CLOUDFLARE_API_BASE_URL",
    "CLOUDFLARE_API_KEY",
    "CLOUDFLARE_API_TOKEN",
    "CLOUDFLARE_EMAIL",
    "CLOUDFLARE_ENV",
  ];
  assert.deepEqual(unknownSettingLines(wrangler), []);
  // A misspelt setting of the family beside them is still named.
  assert.deepEqual(
    unknownSettingLines([...wrangler, "CLOUDFLARE_MAX_RETRY"]),
    [
      "relayer: CLOUDFLARE_MAX_RETRY is not a setting of the relayer, so it is ignored: did you mean CLOUDFLARE_MAX_RETRIES? (the settings: docs/routes.md#deploy-to-deno-deploy-with-qstash)",
    ],
  );
});

Deno.test("unknownSettingLines() leaves the rest of what Wrangler reads alone: wrangler dev's Hyperdrive connection string, its .env switches, its fetch of cf.json, its region, its Access token", () => {
  // wrangler dev with a Hyperdrive binding named HYPERDRIVE reads its
  // database from CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_HYPERDRIVE
  // (docs/queues.md), and CLOUDFLARE_INCLUDE_PROCESS_ENV hands the process's
  // environment to the Worker's env: none of them a setting misspelt.
  assert.deepEqual(
    unknownSettingLines([
      "CLOUDFLARE_ACCESS_CLIENT_ID",
      "CLOUDFLARE_ACCESS_CLIENT_SECRET",
      "CLOUDFLARE_CF_FETCH_ENABLED",
      "CLOUDFLARE_CF_FETCH_PATH",
      "CLOUDFLARE_COMPLIANCE_REGION",
      "CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_HYPERDRIVE",
      "CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_REPORTS_DB",
      "CLOUDFLARE_INCLUDE_PROCESS_ENV",
      "CLOUDFLARE_LOAD_DEV_VARS_FROM_DOT_ENV",
    ]),
    [],
  );
  // The prefix alone names no binding: still a name of the family.
  assert.equal(
    unknownSettingLines(["CLOUDFLARE_HYPERDRIVE_LOCAL_CONNECTION_STRING_"])
      .length,
    1,
  );
});

Deno.test("unknownSettingLines() leaves the variables Kubernetes sets for a service named relayer or sender alone", () => {
  // A pod gets these for each service of its namespace (enableServiceLinks,
  // on by default); Docker's links set the same shapes.
  const links = ["RELAYER", "SENDER", "KV", "QSTASH_PROXY"].flatMap((svc) => [
    `${svc}_SERVICE_HOST`,
    `${svc}_SERVICE_PORT`,
    `${svc}_SERVICE_PORT_HTTP`,
    `${svc}_PORT`,
    `${svc}_PORT_8000_TCP`,
    `${svc}_PORT_8000_TCP_PROTO`,
    `${svc}_PORT_8000_TCP_PORT`,
    `${svc}_PORT_8000_TCP_ADDR`,
    `${svc}_PORT_53_UDP_ADDR`,
  ]);
  assert.deepEqual(unknownSettingLines(links), []);
  // A misspelt setting beside them is still named.
  assert.equal(
    unknownSettingLines([...links, "SENDER_TIMOUT"]).length,
    1,
  );
});

Deno.test("SETTINGS holds every variable loadConfig reads, on each queue and store", () => {
  const read = new Set<string>();
  const recorded = (env: Record<string, string>) =>
    new Proxy(env, {
      get(target, name) {
        if (typeof name === "string") read.add(name);
        return Reflect.get(target, name);
      },
      has(target, name) {
        if (typeof name === "string") read.add(name);
        return Reflect.has(target, name);
      },
    });
  const base = {
    SENDER_URL: "http://127.0.0.1:9000",
    OPS_TOKEN: "an-ops-token-0123456789",
  };
  const envs: Record<string, string>[] = [
    { ...base, WEBHOOK_SECRET: "a-webhook-secret-0123", KV_QUEUE: "1" },
    {
      ...base,
      QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
      QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789abc",
      PUBLIC_URL: "https://relayer.example.test",
      QSTASH_TOKEN: "qstash-token",
      QSTASH_URL: "http://127.0.0.1:1",
      DENO_DEPLOYMENT_ID: "abc",
      DENO_KV_DEFAULT_PATH: "https://kv.test/databases/0123/connect",
    },
    {
      ...base,
      PUBSUB_AUDIENCE: "https://relayer.example.test/v1/pubsub",
      PUBSUB_SERVICE_ACCOUNT: "pusher@project.iam.gserviceaccount.com",
      PUBSUB_DEAD_LETTER_AUDIENCE: "https://relayer.example.test/dl",
      PUBSUB_MAX_DELIVERY_ATTEMPTS: "20",
      PUBSUB_MIN_BACKOFF: "40s",
      DATABASE_URL: "postgres://u:p@db.test/relayer",
    },
    {
      ...base,
      WEBHOOK_SECRET: "a-webhook-secret-0123",
      CLOUDFLARE_MAX_RETRIES: "9",
      CLOUDFLARE_DLQ_MAX_RETRIES: "100",
      KV_URL: "https://kv.test/db",
    },
  ];
  for (const env of envs) loadConfig(recorded(env));
  const names = [...read].filter((name) => /^[A-Z][A-Z0-9_]+$/.test(name));
  assert.ok(names.length > 30, names.join(" "));
  assert.deepEqual(names.filter((name) => !SETTINGS.has(name)), []);
});

Deno.test("each CLOUDFLARE_ setting is named with its own refusal, or none: a Worker's refusal of one is not put on another set beside it", () => {
  const base = {
    SENDER_URL: "http://127.0.0.1:9000",
    WEBHOOK_SECRET: "a-webhook-secret-16",
  };
  const said = (name: string) =>
    `relayer: ${name} is set, but only a Cloudflare Worker reads it (its queue handler, createQueueHandler) and this service consumes no Cloudflare queue, so it is ignored here`;
  // Refused (Cloudflare's default of 3 retries under MAX_DELIVERIES 10),
  // beside a value a Worker takes, and beside another it refuses for a
  // reason of its own.
  const env = {
    ...base,
    CLOUDFLARE_MAX_RETRIES: "3",
    CLOUDFLARE_DELIVERY_DELAY: "0s",
    CLOUDFLARE_DLQ_MAX_RETRIES: "101",
  };
  const own = (name: keyof typeof env) =>
    refusal({ ...base, [name]: env[name] }).message;
  assert.notEqual(
    own("CLOUDFLARE_MAX_RETRIES"),
    own("CLOUDFLARE_DLQ_MAX_RETRIES"),
  );
  assert.deepEqual(unreadSettingLines(env), [
    `${
      said("CLOUDFLARE_MAX_RETRIES")
    }; a Worker given this value refuses to start: ${
      own("CLOUDFLARE_MAX_RETRIES")
    }`,
    `${
      said("CLOUDFLARE_DLQ_MAX_RETRIES")
    }; a Worker given this value refuses to start: ${
      own("CLOUDFLARE_DLQ_MAX_RETRIES")
    }`,
    `${said("CLOUDFLARE_DELIVERY_DELAY")} (its value is checked all the same)`,
  ]);
});

Deno.test("a Worker's refusal of a CLOUDFLARE_ retention not set (counted as 24 h) is named on that setting's own line, not on the values set beside it", () => {
  const said = (name: string) =>
    `relayer: ${name} is set, but only a Cloudflare Worker reads it (its queue handler, createQueueHandler) and this service consumes no Cloudflare queue, so it is ignored here (its value is checked all the same)`;
  // Waits of 1h doubling to 12h over 9 retries outlast the jobs queue's
  // retention, not set: counted as 24 h. CLOUDFLARE_DLQ_MAX_RETRIES=100 has
  // no part in it.
  const env = {
    SENDER_URL: "http://127.0.0.1:9000",
    WEBHOOK_SECRET: "a-webhook-secret-16",
    MAX_DELIVERIES: "10",
    BASE: "1h",
    CAP: "12h",
    CLOUDFLARE_MAX_RETRIES: "9",
    CLOUDFLARE_DLQ_MAX_RETRIES: "100",
  };
  const error = refusal(env);
  assert.equal(error.setting, "CLOUDFLARE_MESSAGE_RETENTION");
  assert.match(error.message, /is unset, so it is counted as 24h0m0s/);
  assert.deepEqual(unreadSettingLines(env), [
    said("CLOUDFLARE_MAX_RETRIES"),
    said("CLOUDFLARE_DLQ_MAX_RETRIES"),
    `relayer: CLOUDFLARE_MESSAGE_RETENTION is not set, and a Cloudflare Worker given the CLOUDFLARE_ settings set here refuses to start for it (this service consumes no Cloudflare queue, and starts): ${error.message}`,
  ]);
  // Given, and long enough: nothing is refused.
  assert.deepEqual(
    unreadSettingLines({
      ...env,
      CLOUDFLARE_MESSAGE_RETENTION: "336h",
      CLOUDFLARE_DLQ_MESSAGE_RETENTION: "336h",
    }),
    [
      said("CLOUDFLARE_MAX_RETRIES"),
      said("CLOUDFLARE_DLQ_MAX_RETRIES"),
      said("CLOUDFLARE_MESSAGE_RETENTION"),
      said("CLOUDFLARE_DLQ_MESSAGE_RETENTION"),
    ],
  );
});
