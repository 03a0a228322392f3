// The Node side of `deno task worker-check`: runs the bundled Worker
// (examples/cloudflare/worker.ts) on workerd through Miniflare, with and
// without nodejs_compat (without it, on wrangler.toml's [vars] written
// unquoted: numbers and booleans as JSON bindings; and refused at start on
// RELAYER_INSECURE_DEV = true, on a WEBHOOK_SECRET past 2^53 and on a
// message retention the queue handler refuses), and
// drives it as Cloudflare and the queues would:
// signed QStash and generic deliveries over HTTP (and forgeries only the
// signature check refuses: a wrong MAC at the current time, QStash's claims
// signed with another key, Google's claims and kid signed by another RSA
// key), QStash's failure callback,
// a Pub/Sub push and a push from Pub/Sub's dead-letter topic (Google's
// RS256 tokens, checked against keys the Worker fetches from Google's URL,
// which Miniflare's outbound service answers here), the seed's three payments
// through a real Cloudflare Queues producer and consumer (max_retries and a
// dead-letter queue), one message sent to the dead-letter queue, and a job
// after a byte order mark sent as "text" and as "bytes". Then a
// store outage on tools/_outage_worker.ts: the jobs queue runs out of its
// max_retries, Cloudflare moves the message to the dead-letter queue, and
// the give-up there outlasts the outage; the message kept its id into the
// dead-letter queue, and a late copy of it on the jobs queue sends nothing.
// Then what the queues do with a batch the handler never settles (a
// consumer that throws comes back after its retryDelay, into the
// dead-letter queue and then nowhere; an explicit delaySeconds wins over
// retryDelay), which wrangler.toml's retry_delay rests on. Then
// the docs' local-run secrets, served on a loopback host and refused, each
// request, once one came to a public host. Then
// qstashPublisher (tools/_publish_worker.ts, PUBLISH_SCRIPT): a publish
// taken, a 429's wait, a late answer failed near the bound, nothing
// written to the Worker's output.
// With POSTGRES_SCRIPT set, it runs PostgresStore on workerd instead
// (tools/_postgres_worker.ts, nodejs_compat, on the real server at
// DATABASE_URL, which the example reaches through Miniflare's local
// Hyperdrive): what the app keeps across requests (the /readyz probe's
// cache, counted in PostgreSQL sessions; the limit on fetching Google's
// keys for an unknown kid), migrate(), the ops routes, a signed delivery
// and its replay, the store's writes and refusals called directly, the
// seed's three payments on real Queues and a give-up on the dead-letter
// queue, and the end states read back by a new workerd.
// It prints one line per step and exits 1 on the first wrong answer. The
// steps run four at once, each on a Miniflare of its own (they wait on
// queues and timers far more than they compute); each step's lines come
// out together, in the order the steps are listed at the end.
//
// Environment: WORKER_SCRIPT, OUTAGE_SCRIPT and PUBLISH_SCRIPT, or POSTGRES_SCRIPT and
// DATABASE_URL (the bundles are in the working directory), COMPAT_DATE,
// GOLDEN (testdata/poison_job.golden.txt), MINIFLARE_CACHE (the cache
// folder miniflare was installed into, named when it looks broken).
// A setup failure (miniflare does not load, workerd cannot run, the Worker
// does not start) or an unexpected error prints one line, never a stack
// trace, and exits 1; a Worker that does not start prints workerd's own
// output first (tools/_workerd_start.mjs).

// deno-lint-ignore-file no-console
import {
  createHash,
  createHmac,
  generateKeyPairSync,
  sign as signWith,
} from "node:crypto";
import { AsyncLocalStorage } from "node:async_hooks";
import { readFileSync } from "node:fs";
import { startFailure, workerdProblem } from "./_workerd_start.mjs";
const CACHE = process.env.MINIFLARE_CACHE ??
  "the miniflare folder of the npm cache";

/** The first line of an error's message that says something. */
function firstLine(error) {
  const text = String(error instanceof Error ? error.message : error);
  return text.split("\n").map((line) => line.trim()).find(Boolean) ??
    "no message";
}

/** Prints `worker-check: <what failed> (<why>): <what to do>` and exits 1. */
function setupFailed(what, error, todo) {
  console.error(`worker-check: ${what} (${firstLine(error)}): ${todo}`);
  process.exit(1);
}

// Resolved from the node_modules the check links beside this file (a
// specifier Deno's type check leaves alone).
const MINIFLARE = "miniflare";
let Miniflare;
let Log;
try {
  ({ Miniflare, Log } = await import(MINIFLARE));
} catch (error) {
  setupFailed(
    "could not load miniflare",
    error,
    `delete ${CACHE} and run again`,
  );
}

// The binary Miniflare spawns: one that cannot run at all is the cache's
// fault, told apart here from a Worker that fails to load.
const WORKERD = "workerd";
let workerdPath;
try {
  // A CommonJS module whose `default` export is the path, as Miniflare reads it.
  const workerd = await import(WORKERD);
  workerdPath = process.env.MINIFLARE_WORKERD_PATH ??
    workerd.default?.default ?? workerd.default;
} catch (error) {
  setupFailed("could not find workerd", error, `delete ${CACHE} and run again`);
}
const cannotRun = workerdProblem(workerdPath);
if (cannotRun !== null) {
  console.error(
    `worker-check: workerd cannot run (${cannotRun}): delete ${CACHE} and run again`,
  );
  process.exit(1);
}

/**
 * Prints workerd's output and why the Worker did not start
 * (`startFailure`), and exits 1.
 */
function workerFailed(label, error, lines) {
  printHeld();
  for (
    const line of startFailure(label, error, lines, process.env.COMPAT_DATE)
  ) {
    console.error(line);
  }
  process.exit(1);
}

const SECRET = "worker-check-secret-0123456789";
const OPS = "worker-check-ops-0123456789";
// The PostgreSQL Worker's second ops token: a rotation under way.
const OPS_NEXT = "worker-check-ops-next-0123456789";
const QSTASH_KEY = "sig_current_0123456789abcdef";
const PUBLIC_URL = "https://relayer.example.test";
const ops = { authorization: `Bearer ${OPS}` };
const PUSH_AUDIENCE = `${PUBLIC_URL}/v1/pubsub`;
const DEAD_LETTER_AUDIENCE = `${PUBLIC_URL}/v1/pubsub/dead-letter`;
const SERVICE_ACCOUNT = "pusher@worker-check.iam.gserviceaccount.com";
const GOOGLE_CERTS_URL = "https://www.googleapis.com/oauth2/v3/certs";

// A stand-in for Google's OIDC issuer: a key pair whose public half the
// outbound service serves at Google's URL.
const GOOGLE_KID = "worker-check-key-1";
const google = generateKeyPairSync("rsa", { modulusLength: 2048 });
const GOOGLE_JWK = {
  ...google.publicKey.export({ format: "jwk" }),
  kid: GOOGLE_KID,
  alg: "RS256",
  use: "sig",
};
// Another key pair: a token it signs under GOOGLE_KID differs from
// Google's only in its signature.
const forger = generateKeyPairSync("rsa", { modulusLength: 2048 });

/**
 * The steps run side by side (`inSteps`), each in its own Miniflare, and
 * print in the order they are listed: the first unfinished step's lines go
 * out as they come, a later step's are held until the steps before it end.
 */
const steps = [];
/** The index of the step whose lines go out as they come. */
let printing = 0;
/** Which step the running code belongs to (none: print at once). */
const currentStep = new AsyncLocalStorage();
const print = console.log.bind(console);
console.log = (...args) => {
  const step = currentStep.getStore();
  if (step === undefined || step.index === printing) print(...args);
  else step.held.push(args);
};

/** Prints the held lines of every step, in order (before a failure's line). */
function printHeld() {
  for (const step of steps) {
    for (const args of step.held.splice(0)) print(...args);
  }
}

/**
 * Runs each function of `list`, at most `width` at once, their output in
 * the list's order; resolves when all have ended.
 */
async function inSteps(list, width) {
  const queue = list.map((run) => {
    const step = { index: steps.length, held: [], done: false, run };
    steps.push(step);
    return step;
  });
  const next = async () => {
    for (let step = queue.shift(); step; step = queue.shift()) {
      await currentStep.run(step, step.run);
      step.done = true;
      while (printing < steps.length) {
        const first = steps[printing];
        for (const args of first.held.splice(0)) print(...args);
        if (!first.done) break;
        printing += 1;
      }
    }
  };
  await Promise.all(Array.from({ length: width }, next));
}

/** Prints a failed step and exits 1. */
function fail(message) {
  printHeld();
  console.error(`worker-check: FAIL ${message}`);
  process.exit(1);
}

/** Fails the step `what` unless `actual` and `expected` are the same JSON. */
function assertEqual(actual, expected, what) {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  if (a !== e) fail(`${what}: expected ${e}, got ${a}`);
}

/** The 401 problem the Worker answers a refused delivery with. */
function unauthorized(detail) {
  return {
    type: "urn:relayer:problem:unauthorized",
    title: "Unauthorized",
    status: 401,
    detail,
  };
}
const QSTASH_REFUSED = unauthorized(
  "The Upstash-Signature header is missing or does not verify against this URL and body.",
);
const HMAC_REFUSED = unauthorized(
  `The X-Signature does not verify against this body and timestamp: send 'X-Signature: t=<unix seconds>,v1=<hex HMAC-SHA-256 of "<t>.<raw body>" with WEBHOOK_SECRET>'.`,
);
const PUBSUB_REFUSED = unauthorized(
  "Send Google's OIDC token for this audience as 'Authorization: Bearer <token>'.",
);

/**
 * QStash's Upstash-Signature: HS256 JWT over the body hash, `sub` the URL,
 * signed with `key` (another than the Worker's, to forge one).
 */
function signQStash(body, url, key = QSTASH_KEY) {
  const now = Math.floor(Date.now() / 1000);
  const b64url = (x) => Buffer.from(x).toString("base64url");
  const claims = {
    iss: "Upstash",
    sub: url,
    iat: now,
    nbf: now,
    exp: now + 300,
    jti: `jwt_${now}_${Math.random().toString(36).slice(2)}`,
    body: createHash("sha256").update(body).digest("base64")
      .replaceAll("+", "-").replaceAll("/", "_"),
  };
  const input = `${b64url(JSON.stringify({ alg: "HS256", typ: "JWT" }))}.${
    b64url(JSON.stringify(claims))
  }`;
  return `${input}.${
    createHmac("sha256", key).update(input).digest("base64url")
  }`;
}

/**
 * A Pub/Sub push whose token has Google's claims and kid, signed by
 * another RSA key, must be refused with the exact 401 problem.
 */
async function refusesForgedPush(call, push, label) {
  const forged = await call("/v1/pubsub", {
    method: "POST",
    headers: {
      authorization: `Bearer ${
        googleToken(PUSH_AUDIENCE, GOOGLE_KID, forger.privateKey)
      }`,
    },
    body: push,
  });
  assertEqual(
    [forged.status, forged.body],
    [401, PUBSUB_REFUSED],
    `${label}POST /v1/pubsub, Google's claims and kid signed by another key`,
  );
}

/**
 * Google's OIDC token for `audience`, as a Pub/Sub push carries it (RS256),
 * naming the key `kid` (one Google never had, to make one up), signed with
 * `privateKey` (another than Google's, to forge one).
 */
function googleToken(
  audience,
  kid = GOOGLE_KID,
  privateKey = google.privateKey,
) {
  const now = Math.floor(Date.now() / 1000);
  const b64url = (x) => Buffer.from(x).toString("base64url");
  const input = `${b64url(JSON.stringify({ alg: "RS256", typ: "JWT", kid }))}.${
    b64url(JSON.stringify({
      iss: "https://accounts.google.com",
      aud: audience,
      email: SERVICE_ACCOUNT,
      email_verified: true,
      sub: "113774264463038321964",
      iat: now - 10,
      exp: now + 3600,
    }))
  }`;
  return `${input}.${
    signWith("sha256", Buffer.from(input), privateKey).toString(
      "base64url",
    )
  }`;
}

/** A Pub/Sub push envelope around `job`, with `message` fields added. */
function pushEnvelope(job, message = {}, fields = {}) {
  return JSON.stringify({
    message: {
      data: Buffer.from(JSON.stringify(job)).toString("base64"),
      messageId: "2070443601311540",
      publishTime: "2026-11-30T12:00:00.000Z",
      ...message,
    },
    subscription: "projects/p/subscriptions/relayer",
    ...fields,
  });
}

/**
 * The generic route's signature: `t=<unix s>,v1=<hex HMAC-SHA-256 of
 * "<t>.<body>">`, now, with `secret` (another than the Worker's, to forge one).
 */
function signGeneric(body, secret = SECRET) {
  const t = Math.floor(Date.now() / 1000);
  const v1 = createHmac("sha256", secret).update(`${t}.${body}`).digest("hex");
  return `t=${t},v1=${v1}`;
}

/** How many times the signer was asked to send each intent. */
const sends = {};

/** The policy's delay between deliveries: BASE, CAP. */
const DELAY_MS = 3000;

/** How many times Google's keys were fetched. */
let keyFetches = 0;

/**
 * What the Worker calls out to: the signer service its HttpSender calls
 * (the seed's script), and Google's keys.
 */
async function signer(request) {
  const url = new URL(request.url);
  if (request.method === "GET" && url.href === GOOGLE_CERTS_URL) {
    keyFetches += 1;
    return Response.json({ keys: [GOOGLE_JWK] }, {
      headers: { "cache-control": "public, max-age=3600" },
    });
  }
  if (request.method === "POST" && url.pathname === "/send") {
    const { intentId } = await request.json();
    sends[intentId] = (sends[intentId] ?? 0) + 1;
    if (intentId === "pi_0001") {
      return Response.json({
        error: "signer: chain id mismatch",
        notSent: true,
        poison: true,
      }, { status: 400 });
    }
    if (intentId === "pi_0002") {
      return Response.json({ error: "rpc: connection refused" }, {
        status: 502,
      });
    }
    return Response.json({ txHash: `0x${intentId.replace(/\W/g, "")}` });
  }
  if (url.pathname.startsWith("/receipt/")) {
    return Response.json({ status: "pending" });
  }
  return Response.json({ error: "not found" }, { status: 404 });
}

/**
 * A `handleRuntimeStdio` that pushes workerd's output to `lines`, line by
 * line, and when each arrived (`Date.now()`) to `times`, at the same index.
 */
function collectLines(lines, times = []) {
  return (stdout, stderr) => {
    for (const stream of [stdout, stderr]) {
      let rest = "";
      stream.on("data", (chunk) => {
        const text = rest + chunk.toString();
        const parts = text.split("\n");
        rest = parts.pop() ?? "";
        lines.push(...parts);
        times.push(...parts.map(() => Date.now()));
      });
    }
  };
}

/**
 * A Miniflare `log` that prints nothing and pushes to `releases` when each
 * of the jobs queue's retried messages was let go (`Date.now()`): the
 * broker says "Retrying message …" once the batch's handler has returned,
 * and awaits this process's receipt of it before it arms the message's
 * `delaySeconds` timer. So a retried message's next delivery comes at
 * least its delay and the consumer's `maxBatchTimeout` after that line,
 * whatever the load, and the batch's own time (the other messages' sends)
 * is not counted in the gap.
 */
function releaseLog(releases) {
  return new class extends Log {
    log(message) {
      if (/Retrying message "[^"]*" on queue "relayer-jobs"/.test(message)) {
        releases.push(Date.now());
      }
    }
  }(4 /* LogLevel.DEBUG */);
}

/** The consumers' `maxBatchTimeout` in `check()`: 1 s. */
const BATCH_TIMEOUT_MS = 1000;

/**
 * The seed's policy as the Workers read it from their bindings, with 3 s
 * delays so real queues finish quickly: longer than the consumers'
 * maxBatchTimeout (1 s), which is when a retry without a delay comes back,
 * so the gap between deliveries shows the delay was ours. STUCK_AFTER is
 * the rescue window (two gaps), as it was at 1 s delays. The jobs queues'
 * `max_retries` is 2.
 */
const SEED_POLICY = {
  MAX_DELIVERIES: "3",
  BASE: "3s",
  CAP: "3s",
  JITTER: "none",
  STUCK_AFTER: "6s",
  // One workerd, one clock: the window need not outlast a skew as well.
  CLOCK_SKEW: "0",
  CLOUDFLARE_MAX_RETRIES: "2",
  // The dead-letter queues' max_retries, as wrangler.toml sets it: fewer
  // would fail the Worker at start (the handler checks it).
  CLOUDFLARE_DLQ_MAX_RETRIES: "100",
};

/**
 * The seed's policy as wrangler.toml's `[vars]` would hold it written
 * unquoted (`MAX_DELIVERIES = 3`, `SENDER_TIMEOUT = 5000`,
 * `RELAYER_INSECURE_DEV = false`): a TOML number or boolean is a JSON
 * binding, which is what wrangler uploads for a `[vars]` value that is not
 * text and what Miniflare makes of a binding that is not a string, so the
 * Worker's `env` holds the number or boolean itself. The run without
 * compatibility flags takes these; the one with `nodejs_compat` the quoted
 * ones. The policy's numbers are what the run shows (3 deliveries, 2 and
 * 100 retries, or the Worker does not start).
 */
const UNQUOTED_VARS = {
  MAX_DELIVERIES: 3,
  CLOUDFLARE_MAX_RETRIES: 2,
  CLOUDFLARE_DLQ_MAX_RETRIES: 100,
  SENDER_TIMEOUT: 5000,
  RELAYER_INSECURE_DEV: false,
};

/**
 * The lease the Workers of `check()` hold an intent for, shorter than the
 * default 30 s so the wait a busy job shows (the redriven one, behind the
 * give-up's lease) is short too: `LEASE` must be at least twice
 * `SENDER_TIMEOUT`, which these runs set to 5 s (the signer answers at
 * once). It must still outlast the give-up's line, the wait after it
 * (`DELAY_MS` + 1.5 s) and the redrive's first delivery, or that delivery
 * is not busy: the check fails then, naming it.
 */
const CHECK_LEASE = "15s";

/**
 * A Miniflare running the bundled Worker with the compatibility flags
 * `flags`, once it is ready; workerd's output goes to `lines`. `vars`
 * replace or add bindings (a value other than a string is a JSON binding).
 * `compatibilityDate` is the check's unless given. When the jobs queue let
 * a retried message go goes to `releases` ({@linkcode releaseLog}).
 */
async function startMiniflare(
  flags,
  lines,
  times,
  vars = {},
  compatibilityDate = process.env.COMPAT_DATE,
  releases = [],
) {
  const mf = new Miniflare({
    modules: true,
    scriptPath: process.env.WORKER_SCRIPT,
    compatibilityDate,
    compatibilityFlags: flags,
    bindings: {
      SENDER_URL: "http://signer.test",
      WEBHOOK_SECRET: SECRET,
      OPS_TOKEN: OPS,
      QSTASH_CURRENT_SIGNING_KEY: QSTASH_KEY,
      QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789abcdef",
      PUBLIC_URL,
      PUBSUB_AUDIENCE: PUSH_AUDIENCE,
      PUBSUB_DEAD_LETTER_AUDIENCE: DEAD_LETTER_AUDIENCE,
      // The dead-letter policy's attempts, which the route needs declared.
      PUBSUB_MAX_DELIVERY_ATTEMPTS: "5",
      PUBSUB_SERVICE_ACCOUNT: SERVICE_ACCOUNT,
      ...SEED_POLICY,
      ...vars,
    },
    queueProducers: { JOBS: "relayer-jobs", DEAD: "relayer-jobs-dlq" },
    queueConsumers: {
      "relayer-jobs": {
        maxBatchTimeout: BATCH_TIMEOUT_MS / 1000,
        maxRetries: 2,
        deadLetterQueue: "relayer-jobs-dlq",
      },
      "relayer-jobs-dlq": { maxBatchTimeout: 1, maxRetries: 100 },
    },
    outboundService: signer,
    handleRuntimeStdio: collectLines(lines, times),
    log: releaseLog(releases),
  });
  try {
    await mf.ready;
  } catch (error) {
    await mf.dispose().catch(() => {});
    throw error;
  }
  return mf;
}

/**
 * A Miniflare running a module Worker with `options` (on the check's
 * compatibility date), once it is ready, and workerd's output as it came,
 * chunk by chunk (`output`). A Worker that does not start ends the check
 * with workerd's lines, under `label`.
 */
async function readyWorker(options, label) {
  const output = [];
  let mf;
  try {
    mf = new Miniflare({
      modules: true,
      compatibilityDate: process.env.COMPAT_DATE,
      ...options,
      handleRuntimeStdio(stdout, stderr) {
        for (const stream of [stdout, stderr]) {
          stream.on("data", (chunk) => output.push(chunk.toString()));
        }
      },
    });
    await mf.ready;
  } catch (error) {
    await mf?.dispose().catch(() => {});
    workerFailed(label, error, output.join("").split("\n"));
  }
  return { mf, output };
}

/**
 * A request to the Worker on `mf`: its status, headers and body (parsed
 * when it is JSON).
 */
function caller(mf) {
  return async (path, init = {}) => {
    const res = await mf.dispatchFetch(`${PUBLIC_URL}${path}`, init);
    const text = await res.text();
    let body = text;
    try {
      body = JSON.parse(text);
    } catch { /* not JSON */ }
    return { status: res.status, headers: res.headers, body };
  };
}

/** Runs every step on workerd with the compatibility flags `flags`. */
async function check(flags) {
  const lines = [];
  const times = [];
  const releases = [];
  const label = flags.length ? flags.join(",") : "no compatibility flags";
  let mf;
  try {
    mf = await startMiniflare(
      flags,
      lines,
      times,
      {
        ...(flags.length ? { SENDER_TIMEOUT: "5s" } : UNQUOTED_VARS),
        LEASE: CHECK_LEASE,
      },
      undefined,
      releases,
    );
  } catch (error) {
    workerFailed(`examples/cloudflare/worker.ts, ${label}`, error, lines);
  }
  try {
    const call = caller(mf);
    if (!flags.length) {
      console.log(
        `  [${label}] started on [vars] written unquoted, as JSON bindings: ${
          Object.entries(UNQUOTED_VARS).map(([name, value]) =>
            `${name} = ${value}`
          ).join(", ")
        }`,
      );
    }

    assertEqual((await call("/healthz")).status, 200, "GET /healthz");
    // The readiness probe reads the store and races a timer, in a request.
    assertEqual((await call("/readyz")).status, 200, "GET /readyz");
    for (
      const [id, state] of [
        ["pi_0001", "authorized"],
        ["pi_0002", "authorized"],
        ["pi_0003", "created"],
        ["pi_0004", "authorized"],
        ["pi_0005", "created"],
        ["pi_0006", "created"],
        ["pi_0007", "authorized"],
        ["pi_0008", "created"],
        ["pi_0009", "authorized"],
      ]
    ) {
      const res = await call("/v1/intents", {
        method: "POST",
        headers: ops,
        body: JSON.stringify({ id, state }),
      });
      assertEqual(res.status, 201, `POST /v1/intents ${id}`);
    }
    // One bundle graph: a ConflictError thrown by the store is the one the
    // app catches, so a duplicate is a 409, never a 500.
    const dup = await call("/v1/intents", {
      method: "POST",
      headers: ops,
      body: JSON.stringify({ id: "pi_0001", state: "created" }),
    });
    assertEqual(dup.status, 409, "POST /v1/intents for an existing intent");

    // QStash: signed, then unsigned.
    const qbody = JSON.stringify({ intentId: "pi_0005", kind: "settle" });
    const q = await call("/v1/qstash", {
      method: "POST",
      headers: {
        "upstash-signature": signQStash(qbody, `${PUBLIC_URL}/v1/qstash`),
        "content-type": "application/json",
      },
      body: qbody,
    });
    assertEqual(
      [q.status, q.headers.get("retry-after"), q.body.outcome, q.body.reason],
      [503, String(DELAY_MS / 1000), "retry", "not authorized yet"],
      "POST /v1/qstash, signed",
    );
    const qBad = await call("/v1/qstash", { method: "POST", body: qbody });
    assertEqual(qBad.status, 401, "POST /v1/qstash, unsigned");
    // QStash's claims for this URL and body, signed with another key: only
    // the signature tells it apart.
    const qForged = await call("/v1/qstash", {
      method: "POST",
      headers: {
        "upstash-signature": signQStash(
          qbody,
          `${PUBLIC_URL}/v1/qstash`,
          "sig_someone_else_0123456789",
        ),
        "content-type": "application/json",
      },
      body: qbody,
    });
    assertEqual(
      [qForged.status, qForged.body],
      [401, QSTASH_REFUSED],
      "POST /v1/qstash, the right claims signed with another key",
    );
    console.log(
      `  [${label}] QStash delivery, signed: 503 retry; unsigned, or signed with another key: 401`,
    );

    // The generic route: signed with a timestamp, then with a wrong key.
    const gbody = JSON.stringify({
      job: { intentId: "pi_0006", kind: "settle" },
      delivery: 1,
    });
    const g = await call("/v1/deliveries", {
      method: "POST",
      headers: { "x-signature": signGeneric(gbody) },
      body: gbody,
    });
    assertEqual(
      [g.status, g.body.outcome, g.body.reason],
      [503, "retry", "not authorized yet"],
      "POST /v1/deliveries, signed t=…,v1=…",
    );
    const gBad = await call("/v1/deliveries", {
      method: "POST",
      headers: { "x-signature": "t=1,v1=00" },
      body: gbody,
    });
    assertEqual(gBad.status, 401, "POST /v1/deliveries, badly signed");
    // Current timestamps: refused by comparing the MAC, not by the age check.
    const nowS = Math.floor(Date.now() / 1000);
    for (
      const [name, signature] of [
        ["a wrong MAC", `t=${nowS},v1=${"0".repeat(64)}`],
        ["another secret", signGeneric(gbody, "another-secret-0123456789")],
      ]
    ) {
      const forged = await call("/v1/deliveries", {
        method: "POST",
        headers: { "x-signature": signature },
        body: gbody,
      });
      assertEqual(
        [forged.status, forged.body],
        [401, HMAC_REFUSED],
        `POST /v1/deliveries, the current time with ${name}`,
      );
    }
    console.log(
      `  [${label}] generic delivery, signed: 503 retry; t=1: 401; the current time with a wrong MAC, or another secret's: 401`,
    );

    // QStash's failure callback: QStash gave up after its retries.
    const fbody = JSON.stringify({
      status: 503,
      retried: 2,
      maxRetries: 2,
      dlqId: "dlq_worker_check",
      sourceMessageId: "msg_worker_check",
      url: `${PUBLIC_URL}/v1/qstash`,
      sourceBody: Buffer.from(
        JSON.stringify({ intentId: "pi_0007", kind: "settle" }),
      ).toString("base64"),
    });
    const f = await call("/v1/qstash/failed", {
      method: "POST",
      headers: {
        "upstash-signature": signQStash(
          fbody,
          `${PUBLIC_URL}/v1/qstash/failed`,
        ),
        "content-type": "application/json",
      },
      body: fbody,
    });
    assertEqual([f.status, f.body], [200, {
      outcome: "poison",
      job: "pi_0007/settle",
      delivery: 3,
      reason: "the queue gave up after 3 deliveries",
      resolution: "job dropped, intent still authorized",
    }], "POST /v1/qstash/failed, signed");
    // Signed for /v1/qstash, not for the failure callback's URL.
    const fBad = await call("/v1/qstash/failed", {
      method: "POST",
      headers: {
        "upstash-signature": signQStash(fbody, `${PUBLIC_URL}/v1/qstash`),
      },
      body: fbody,
    });
    assertEqual(
      fBad.status,
      401,
      "POST /v1/qstash/failed, signed for /v1/qstash",
    );
    console.log(
      `  [${label}] QStash failure callback, signed: 200 poison (${f.body.resolution}); signed for another URL: 401`,
    );

    // QStash bodies signed over their bytes (DESIGN §9: the raw body): one
    // after a byte order mark is its job; one with a byte that is not UTF-8
    // (a Latin-1 "é") is unreadable, 489 with no retry, kept as a letter
    // naming its intent, by Content-Length or chunked; the failure callback
    // for it keeps that letter naming the intent.
    const bom = Buffer.concat([
      Buffer.from([0xef, 0xbb, 0xbf]),
      Buffer.from(qbody),
    ]);
    const qBom = await call("/v1/qstash", {
      method: "POST",
      headers: {
        "upstash-signature": signQStash(bom, `${PUBLIC_URL}/v1/qstash`),
        "content-length": String(bom.length),
      },
      body: bom,
    });
    assertEqual(
      [qBom.status, qBom.body.reason],
      [503, "not authorized yet"],
      "POST /v1/qstash, a job after a byte order mark, signed over its bytes",
    );
    const [head, tail] = JSON.stringify({
      intentId: "pi_0005",
      kind: "settle",
      note: "caf",
    }).split("caf");
    const latin1 = Buffer.concat([
      Buffer.from(`${head}caf`),
      Buffer.from([0xe9]),
      Buffer.from(tail),
    ]);
    const letterOf = async (id) =>
      (await call("/v1/dead-letters?limit=1000", { headers: ops })).body.items
        .find((letter) => letter.jobId === `qstash/${id}/unreadable`);
    for (
      const [framing, body] of [
        ["content-length", latin1],
        ["chunked", new Blob([latin1]).stream()],
      ]
    ) {
      const id = `msg_worker_check_latin1_${framing}`;
      const res = await call("/v1/qstash", {
        method: "POST",
        headers: {
          "upstash-signature": signQStash(latin1, `${PUBLIC_URL}/v1/qstash`),
          "upstash-message-id": id,
          // Miniflare's dispatchFetch sends even a Buffer chunked unless
          // its length is given; QStash gives it.
          ...(framing === "chunked"
            ? {}
            : { "content-length": String(latin1.length) }),
        },
        body,
        ...(framing === "chunked" ? { duplex: "half" } : {}),
      });
      const letter = await letterOf(id);
      assertEqual(
        [
          res.status,
          res.headers.get("upstash-nonretryable-error"),
          /not UTF-8/.test(letter?.reason ?? ""),
          letter?.intentId ?? null,
        ],
        [489, "true", true, "pi_0005"],
        `POST /v1/qstash, signed over bytes that are not UTF-8 (${framing})`,
      );
    }
    const lbody = JSON.stringify({
      retried: 0,
      sourceMessageId: "msg_worker_check_latin1_content-length",
      sourceBody: latin1.toString("base64"),
    });
    const lf = await call("/v1/qstash/failed", {
      method: "POST",
      headers: {
        "upstash-signature": signQStash(
          lbody,
          `${PUBLIC_URL}/v1/qstash/failed`,
        ),
      },
      body: lbody,
    });
    assertEqual(
      [
        lf.status,
        (await letterOf("msg_worker_check_latin1_content-length"))?.intentId ??
          null,
      ],
      [489, "pi_0005"],
      "POST /v1/qstash/failed for a message that is not UTF-8",
    );
    console.log(
      `  [${label}] QStash, signed over its bytes: a job after a byte order mark, 503 retry; bytes that are not UTF-8, 489 no retry, kept as an unreadable letter naming pi_0005 (by Content-Length or chunked), and so by its failure callback`,
    );
    // The same bytes as a Cloudflare Queues message on each queue (a real
    // `queue` event on workerd): unreadable, as /v1/qstash reads them, so
    // acked and kept as a letter naming pi_0005, never delivered (the jobs
    // queue) nor given up (the dead-letter queue).
    const cfWorker = await mf.getWorker();
    // The webhook's deliveries above wrote worker lines for pi_0005 too.
    const pi5 = () =>
      lines.filter((line) => /worker +pi_0005\/settle/.test(line)).length;
    const pi5Before = pi5();
    for (const queue of ["relayer-jobs", "relayer-jobs-dlq"]) {
      const id = `worker-check-latin1-${queue}`;
      const got = await cfWorker.queue(queue, [{
        id,
        timestamp: new Date(),
        body: new Uint8Array(latin1),
        attempts: 1,
      }]);
      const letter = (await call("/v1/dead-letters?limit=1000", {
        headers: ops,
      })).body.items.find((l) => l.jobId === `cloudflare/${id}/unreadable`);
      assertEqual(
        [
          got.outcome,
          got.explicitAcks,
          got.retryMessages,
          /not UTF-8/.test(letter?.reason ?? ""),
          letter?.intentId ?? null,
        ],
        ["ok", [id], [], true, "pi_0005"],
        `a Cloudflare Queues message on ${queue} whose bytes are not UTF-8`,
      );
      // Its line, once workerd's output has brought it: any line of a
      // delivery would have come before it.
      const until = Date.now() + 10_000;
      while (
        !lines.some((line) =>
          line.includes(`acked unread and kept as cloudflare/${id}/unreadable`)
        )
      ) {
        if (Date.now() > until) {
          fail(`no line for ${id} on ${queue}\n${lines.join("\n")}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    assertEqual(
      pi5(),
      pi5Before,
      "no delivery nor give-up of pi_0005 from bytes that are not UTF-8",
    );
    console.log(
      `  [${label}] Cloudflare Queues, bytes that are not UTF-8 on the jobs and the dead-letter queue: acked unread, kept as an unreadable letter naming pi_0005`,
    );

    // Pub/Sub push: Google's token, its keys fetched from Google's URL.
    const push = pushEnvelope({ intentId: "pi_0008", kind: "settle" }, {}, {
      deliveryAttempt: 1,
    });
    const p = await call("/v1/pubsub", {
      method: "POST",
      headers: { authorization: `Bearer ${googleToken(PUSH_AUDIENCE)}` },
      body: push,
    });
    assertEqual([p.status, p.headers.get("retry-after"), p.body], [503, null, {
      outcome: "retry",
      job: "pi_0008/settle",
      delivery: 1,
      reason: "not authorized yet",
      delayMs: DELAY_MS,
      note:
        "Pub/Sub waits by its subscription's retry policy; delayMs is what this policy asked for",
    }], "POST /v1/pubsub, Google's token");
    // A token for the dead-letter route's audience does not open this one.
    const pBad = await call("/v1/pubsub", {
      method: "POST",
      headers: {
        authorization: `Bearer ${googleToken(DEAD_LETTER_AUDIENCE)}`,
      },
      body: push,
    });
    assertEqual(pBad.status, 401, "POST /v1/pubsub, another audience's token");
    // Google's claims and kid, signed by another RSA key.
    await refusesForgedPush(call, push, "");
    console.log(
      `  [${label}] Pub/Sub push, Google's token: 503 retry; another audience's token, or Google's claims and kid signed by another key: 401`,
    );

    // Pub/Sub's dead-letter topic: Pub/Sub gave up after 3 deliveries.
    const dl = await call("/v1/pubsub/dead-letter", {
      method: "POST",
      headers: {
        authorization: `Bearer ${googleToken(DEAD_LETTER_AUDIENCE)}`,
      },
      body: pushEnvelope({ intentId: "pi_0009", kind: "settle" }, {
        messageId: "9182736450",
        attributes: { CloudPubSubDeadLetterSourceDeliveryCount: "3" },
      }),
    });
    assertEqual([dl.status, dl.body], [204, ""], "POST /v1/pubsub/dead-letter");
    const { body: resolved } = await call("/v1/intents/pi_0009", {
      headers: ops,
    });
    assertEqual(
      [
        resolved.intent?.state,
        resolved.deadLetter?.cause,
        resolved.deadLetter?.reason,
        resolved.deadLetter?.resolution,
        resolved.deadLetter?.queue,
      ],
      [
        "authorized",
        "exhausted",
        "the queue gave up after 3 deliveries",
        "job dropped, intent still authorized",
        { queue: "pubsub", messageId: "9182736450" },
      ],
      "the intent Pub/Sub's dead-letter topic gave up on",
    );
    console.log(
      `  [${label}] Pub/Sub dead-letter push: 204, dead letter kept (${resolved.deadLetter.resolution})`,
    );

    // The seed's three payments through Cloudflare Queues.
    const jobs = await mf.getQueueProducer("JOBS");
    for (const intentId of ["pi_0001", "pi_0002", "pi_0003"]) {
      await jobs.send({ intentId, kind: "settle" });
    }
    const states = [];
    const deadline = Date.now() + 60_000;
    for (const id of ["pi_0001", "pi_0002", "pi_0003"]) {
      for (;;) {
        const { body } = await call(`/v1/intents/${id}`, { headers: ops });
        if (body.deadLetter) {
          states.push(
            `${id} ${body.intent.state.padEnd(13)}hold ${
              body.intent.hold ?? "-"
            }`,
          );
          break;
        }
        if (Date.now() > deadline) {
          fail(
            `${id} never ended: ${JSON.stringify(body)}\n${lines.join("\n")}`,
          );
        }
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
    const golden = readFileSync(process.env.GOLDEN, "utf8").trimEnd().split(
      "\n",
    ).slice(-3);
    assertEqual(states, golden, "the seed's end states on Cloudflare Queues");
    console.log(`  [${label}] Cloudflare Queues, the seed's three payments:`);
    for (const line of lines.filter((l) => /pi_000[123]\/settle/.test(l))) {
      console.log(`    ${line.trim()}`);
    }
    for (const line of states) console.log(`    ${line}`);
    // pi_0003 is retried twice ("not authorized yet"), each time with
    // retry({ delaySeconds: 3 }): a retry without it would come back at
    // the next batch, within maxBatchTimeout (1 s). Each gap is counted
    // from when the queue let the retried messages go (the first
    // "Retrying message" after the delivery, releaseLog()), not from the
    // delivery's line: the batch's other sends, slow on a loaded machine,
    // ran between the two. Comes back after at least DELAY_MS plus the
    // batch timeout, whatever the load: under DELAY_MS is a retry without
    // the policy's delay; at 2 × DELAY_MS plus the batch timeout or more,
    // at least twice it (the least a doubled delay can give), which only
    // 3 s of this machine's own lateness could also give.
    const deliveredAt = (n) => {
      const at = lines.findIndex((line) =>
        new RegExp(`pi_0003/settle +#${n} `).test(line)
      );
      if (at < 0) fail(`pi_0003/settle #${n} not seen\n${lines.join("\n")}`);
      return times[at];
    };
    const gaps = [2, 3].map((n) => {
      const delivered = deliveredAt(n - 1);
      const released = releases.find((at) => at >= delivered);
      if (released === undefined) {
        fail(`the jobs queue never let pi_0003/settle #${n - 1} go`);
      }
      return deliveredAt(n) - released;
    });
    const most = 2 * DELAY_MS + BATCH_TIMEOUT_MS;
    if (gaps.some((gap) => gap < DELAY_MS || gap >= most)) {
      fail(
        `pi_0003/settle came back ${
          gaps.join(" ms and ")
        } ms after the queue let it go: expected the policy's ${DELAY_MS} ms and the batch timeout's ${BATCH_TIMEOUT_MS} (under ${most} ms), so message.retry() is not given the policy's delaySeconds`,
      );
    }
    console.log(
      `  [${label}] pi_0003/settle came back ${
        gaps.join(" ms and ")
      } ms after the queue let it go: the policy's ${
        DELAY_MS / 1000
      } s delay and the ${BATCH_TIMEOUT_MS / 1000} s batch timeout`,
    );

    // The dead-letter queue: the queue gave up on pi_0004's job.
    const dead = await mf.getQueueProducer("DEAD");
    await dead.send({ intentId: "pi_0004", kind: "settle" });
    const seen = () =>
      lines.filter((line) => line.includes("pi_0004/settle")).length;
    while (seen() === 0) {
      if (Date.now() > deadline + 30_000) {
        fail(`the dead-letter message was not consumed\n${lines.join("\n")}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    // A retry would show by now, even one after the policy's delay (it
    // came back 4 s after, the delay and a batch, above).
    await new Promise((resolve) => setTimeout(resolve, DELAY_MS + 1500));
    const giveUp = lines.filter((line) => line.includes("pi_0004/settle"));
    assertEqual(giveUp.length, 1, "dead-letter message consumed once (acked)");
    if (!/poison/.test(giveUp[0])) fail(`dead-letter line: ${giveUp[0]}`);
    const { body: after } = await call("/v1/intents/pi_0004", { headers: ops });
    assertEqual(
      [after.intent.state, after.deadLetter?.queue?.queue],
      ["authorized", "cloudflare"],
      "an authorized intent given up by the queue: untouched, a dead letter with the queue's ids",
    );
    console.log(`  [${label}] dead-letter queue: ${giveUp[0].trim()}`);

    // A redrive (the job id as two path segments) publishes to the queue again.
    const redriven = await call("/v1/dead-letters/pi_0004/settle/redrive", {
      method: "POST",
      headers: ops,
    });
    assertEqual(
      [redriven.status, redriven.body.enqueued],
      [202, true],
      "POST /v1/dead-letters/pi_0004/settle/redrive",
    );
    const redelivered = () =>
      lines.find((line) => /pi_0004\/settle\s+#1 /.test(line));
    while (!redelivered()) {
      if (Date.now() > deadline + 60_000) {
        fail(`the redriven job was not delivered\n${lines.join("\n")}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    if (!/retry +\(intent pi_0004 is busy/.test(redelivered())) {
      fail(
        `the redriven job of pi_0004 was not busy (${redelivered().trim()}): the give-up's lease (LEASE ${CHECK_LEASE}) lapsed before the redrive was delivered, so what follows would not show a busy answer retried; lengthen CHECK_LEASE in tools/_worker_check.mjs\n${
          lines.join("\n")
        }`,
      );
    }
    console.log(
      `  [${label}] redrive, then the queue: ${redelivered().trim()}`,
    );
    // The give-up above holds pi_0004's lease (for LEASE, CHECK_LEASE), so the
    // redriven job is busy: a retry, never an ack. It comes back, busy,
    // until the queue gives up on it, and that give-up, busy too until the
    // lease lapses, is retried on the dead-letter queue until it can keep
    // its letter. Either busy answer acked (the log line reads the same)
    // would leave the intent with no job and no dead letter: stranded.
    const again = () =>
      lines.find((line) => /pi_0004\/settle\s+#2 /.test(line));
    const lettered = async () =>
      (await call("/v1/intents/pi_0004", { headers: ops })).body.deadLetter;
    const since = Date.now();
    let letter;
    while (!again() || !(letter = await lettered())) {
      if (Date.now() > since + 60_000) {
        fail(
          `the redriven job of pi_0004, busy, ${
            again() ? "was given up" : "was not delivered again"
          }, and no dead letter followed: a busy answer was acked, and the intent is stranded\n${
            lines.join("\n")
          }`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    console.log(
      `  [${label}] the redriven job, busy while the give-up's lease lasts: retried, given up, kept again (${letter.resolution}, ${
        lines.filter((line) => /pi_0004\/settle.*busy/.test(line)).length
      } busy answers)`,
    );

    // A job after a byte order mark through the real producer, as text and
    // as bytes: workerd hands the handler a "text" message as a string
    // that keeps U+FEFF, a "bytes" one as an ArrayBuffer that begins
    // EF BB BF. Either is the job after the mark (not yet authorized: a
    // retry), as /v1/qstash reads it, never an unreadable letter.
    const marked = [["pi_0010", "text"], ["pi_0011", "bytes"]];
    for (const [id] of marked) {
      const res = await call("/v1/intents", {
        method: "POST",
        headers: ops,
        body: JSON.stringify({ id, state: "created" }),
      });
      assertEqual(res.status, 201, `POST /v1/intents ${id}`);
    }
    for (const [intentId, contentType] of marked) {
      const text = `\uFEFF${JSON.stringify({ intentId, kind: "settle" })}`;
      await jobs.send(
        contentType === "text" ? text : new TextEncoder().encode(text),
        { contentType },
      );
    }
    const firstOf = (id) =>
      lines.find((line) => new RegExp(`${id}/settle +#1 `).test(line));
    const sentAt = Date.now();
    while (!marked.every(([id]) => firstOf(id))) {
      if (Date.now() > sentAt + 15_000) {
        fail(
          `a job after a byte order mark on Cloudflare Queues was not delivered (${
            marked.filter(([id]) => !firstOf(id)).map(([id, type]) =>
              `${id} as ${type}`
            ).join(", ")
          }):\n${
            lines.filter((line) => /unreadable|pi_001[01]/.test(line)).join(
              "\n",
            )
          }`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    for (const [id, contentType] of marked) {
      if (!/retry +\(not authorized yet\)/.test(firstOf(id))) {
        fail(
          `${id}, sent as ${contentType} after a byte order mark: ${
            firstOf(id)
          }`,
        );
      }
    }
    console.log(
      `  [${label}] Cloudflare Queues, a job after a byte order mark as "text" and as "bytes": each delivered (${
        marked.map(([id]) => firstOf(id).trim().replace(/\s+/g, " ")).join("; ")
      })`,
    );
  } finally {
    await mf.dispose();
  }
}

/**
 * The store down through a whole queue: `tools/_outage_worker.ts` on real
 * Cloudflare Queues. The jobs queue runs out of its `max_retries` and moves
 * the message to the dead-letter queue by Cloudflare's own rules; the
 * give-up there fails while the store is down, and must still be there,
 * and resolve the intent, once the store is back 13 s later. Retried at a
 * fixed 1 s, the dead-letter queue's six deliveries would all have failed
 * by then, and Cloudflare would have deleted the message.
 */
async function outage() {
  const { mf, output: lines } = await readyWorker(
    {
      scriptPath: process.env.OUTAGE_SCRIPT,
      queueProducers: { JOBS: "outage-jobs" },
      queueConsumers: {
        "outage-jobs": {
          maxBatchTimeout: 1,
          maxRetries: 2,
          deadLetterQueue: "outage-jobs-dlq",
        },
        "outage-jobs-dlq": { maxBatchTimeout: 1, maxRetries: 5 },
      },
    },
    "tools/_outage_worker.ts",
  );
  try {
    const state = async () =>
      await (await mf.dispatchFetch(`${PUBLIC_URL}/state`)).json();
    const post = (path) =>
      mf.dispatchFetch(`${PUBLIC_URL}${path}`, { method: "POST" });
    const failures = (s) =>
      s.lines.filter((line) => line.includes("failed unexpectedly")).length;
    await post("/seed");
    await post("/down");
    await (await mf.getQueueProducer("JOBS")).send({
      intentId: "pi_0001",
      kind: "settle",
    });
    // Three deliveries on the jobs queue (max_retries 2), then the first
    // on the dead-letter queue.
    const deadline = Date.now() + 60_000;
    while (failures(await state()) < 4) {
      if (Date.now() > deadline) {
        fail(
          `the jobs queue did not move the message to its dead-letter queue\n${
            lines.join("")
          }`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    await new Promise((resolve) => setTimeout(resolve, 13_000));
    const whileDown = failures(await state());
    // Retried at a fixed delay, the dead-letter queue's six deliveries
    // would all have failed by now: 3 + 6.
    if (whileDown >= 9) {
      fail(
        `the dead-letter queue retried ${
          whileDown - 3
        } times in 13 s: its give-up does not back off`,
      );
    }
    await post("/up");
    let after = await state();
    while (after.deadLetter === null) {
      if (Date.now() > deadline + 30_000) {
        fail(
          `the give-up never came back after the store did: Cloudflare deleted it, and the intent is stranded\n${
            after.lines.join("\n")
          }`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
      after = await state();
    }
    assertEqual(
      [
        after.intent.state,
        after.intent.hold,
        after.deadLetter.queue?.queue,
        after.deadLetter.reason,
      ],
      [
        "authorized",
        "pending",
        "cloudflare",
        "the queue gave up after 3 deliveries",
      ],
      "an outage through the jobs queue and into its dead-letter queue: resolved once the store is back",
    );
    console.log(
      `  [outage] the store down: ${whileDown} unexpected failures (3 on the jobs queue, then the dead-letter queue backing off), then resolved:`,
    );
    const last = after.lines.filter((line) => line.includes("pi_0001/settle"))
      .at(-1);
    console.log(`    ${last.trim()}`);
    await lateCopy(mf, state);
  } finally {
    await mf.dispose();
  }
}

/**
 * The late-copy guard on Cloudflare, after `outage()` resolved the give-up:
 * the message the jobs queue ran out of reached the dead-letter queue with
 * the same `message.id` (Miniflare's queue broker, on workerd, moved it;
 * the handler recorded the id of every message it was given), so the
 * give-up marked `givingup/cloudflare/dlq/<that id>`. Then a copy of that
 * message arrives late on the jobs queue, a real `queue` event on workerd
 * (`Fetcher.queue()`) carrying the id Miniflare gave it: it must be acked
 * and send nothing, the intent left authorized. A copy with another id, on
 * the same path, must send: so it is the id that stops the first.
 */
async function lateCopy(mf, state) {
  const label = "[outage]";
  // The give-up's line comes after its mark and its ack().
  const since = Date.now();
  let s = await state();
  while (
    !s.lines.some((line) => /pi_0001\/settle .*the queue gave up/.test(line))
  ) {
    if (Date.now() > since + 30_000) {
      fail(`${label} the give-up never logged its line\n${s.lines.join("\n")}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
    s = await state();
  }
  const on = (queue) => s.seen.filter((message) => message.queue === queue);
  const jobs = on("outage-jobs");
  const dead = on("outage-jobs-dlq");
  const id = jobs[0]?.id;
  assertEqual(
    [jobs.length >= 3, new Set(jobs.map((message) => message.id)).size],
    [true, 1],
    `${label} the jobs queue's deliveries of the message: one id across its retries (${
      JSON.stringify(jobs)
    })`,
  );
  if (dead.length === 0 || dead.some((message) => message.id !== id)) {
    fail(
      `${label} the dead-letter queue gave the message another id (jobs queue: ${id}; dead-letter queue: ${
        dead.map((message) => message.id).join(", ")
      }): a give-up marks that id, so a late copy of the message on the jobs queue would not be known by it, and would send. Match the late copy on something the dead-letter copy keeps, or document Cloudflare as not covered in docs/queues.md`,
    );
  }
  console.log(
    `  ${label} the message kept its id into the dead-letter queue: ${id} (attempts ${
      jobs.map((message) => message.attempts).join(", ")
    } on the jobs queue, then ${
      dead.map((message) => message.attempts).join(", ")
    } on the dead-letter queue)`,
  );
  // The give-up's lease (1 s in this Worker) lapses first: until then a
  // copy is busy, and retried.
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const worker = await mf.getWorker();
  const deliver = (copy) =>
    worker.queue("outage-jobs", [{
      id: copy,
      timestamp: new Date(),
      body: { intentId: "pi_0001", kind: "settle" },
      attempts: 1,
    }]);
  const late = await deliver(id);
  s = await state();
  const said = s.lines.filter((line) =>
    line.includes("a late copy, nothing sent")
  );
  assertEqual(
    [
      late.outcome,
      late.explicitAcks,
      late.retryMessages,
      s.sends,
      s.intent.state,
      said.length,
    ],
    ["ok", [id], [], 0, "authorized", 1],
    `${label} a late copy of the given-up message (its id) on the jobs queue: acked, nothing sent, the intent still authorized`,
  );
  console.log(`  ${label} a late copy of ${id}: ${said[0].trim()}`);
  const other = await deliver(`${id}-another`);
  s = await state();
  assertEqual(
    [other.outcome, s.sends, s.intent.state],
    ["ok", 1, "settling"],
    `${label} a copy with another id, on the same path: it sends (the id is what stopped the late copy)`,
  );
  console.log(
    `  ${label} a message with another id, on the same path: sent (${s.sends} send)`,
  );
}

/**
 * A Miniflare running `tools/_postgres_worker.ts` with `nodejs_compat`
 * (postgres.js's Workers build imports node:buffer, node:events and
 * node:stream) on the server at DATABASE_URL, once it is ready; workerd's
 * output goes to `lines`.
 */
async function startPostgresWorker(lines) {
  let mf;
  try {
    mf = new Miniflare({
      modules: true,
      scriptPath: process.env.POSTGRES_SCRIPT,
      compatibilityDate: process.env.COMPAT_DATE,
      compatibilityFlags: ["nodejs_compat"],
      bindings: {
        // The example has no DATABASE_URL: it must reach the server
        // through its Hyperdrive binding (Miniflare's local Hyperdrive).
        CHECK_DATABASE_URL: process.env.DATABASE_URL,
        SENDER_URL: "http://signer.test",
        WEBHOOK_SECRET: SECRET,
        OPS_TOKEN: OPS,
        OPS_TOKEN_NEXT: OPS_NEXT,
        // No PUBLIC_URL: without QStash's keys nothing reads it, and the
        // Worker would name it on its first event.
        PUBSUB_AUDIENCE: PUSH_AUDIENCE,
        PUBSUB_SERVICE_ACCOUNT: SERVICE_ACCOUNT,
        // examples/cloudflare/postgres_worker.ts reads its policy here, as
        // deployed.
        ...SEED_POLICY,
      },
      hyperdrives: { HYPERDRIVE: process.env.DATABASE_URL },
      queueProducers: { JOBS: "pg-jobs", DEAD: "pg-jobs-dlq" },
      queueConsumers: {
        "pg-jobs": { maxBatchTimeout: 1, maxRetries: 2 },
        "pg-jobs-dlq": { maxBatchTimeout: 1, maxRetries: 100 },
      },
      // The signer and Google's keys; the TCP connections to PostgreSQL do
      // not come here.
      outboundService: signer,
      handleRuntimeStdio: collectLines(lines),
    });
    await mf.ready;
    return mf;
  } catch (error) {
    await mf?.dispose().catch(() => {});
    workerFailed("tools/_postgres_worker.ts, nodejs_compat", error, lines);
  }
}

/** The fields of an intent `POST /store` answers. */
const pw = (state, version, broadcasting, mayHaveSent) => ({
  state,
  hold: "pending",
  version,
  broadcasting,
  mayHaveSent,
});

// What `POST /store` must answer: each direct call on PostgresStore, and
// the error a real server's refusal becomes (a version is the bigint's);
// a give-up mark on record refuses the write ahead of a send.
const STORE_STEPS = [
  ["create", pw("authorized", "1", null, false)],
  ["create again", "ConflictError (refused)"],
  ["write ahead", pw("settling", "2", 1000, false)],
  ["write ahead on a stale version", "ConflictError"],
  ["record under another's live lease", "BusyError"],
  ["record with a replayed claim", "ReplayError"],
  ["read", pw("settling", "2", 1000, false)],
  ["void the hold mid-broadcast", "ConflictError (refused)"],
  ["record", pw("settling", "3", null, true)],
  ["fail once it may have sent", "ConflictError (refused)"],
  ["review instead", pw("needs_review", "4", null, true)],
  ["count a delivery", { value: 1 }],
  ["count it again", { value: 2 }],
  ["count it with a replayed claim", "ReplayError"],
  ["deliveries", { value: 2 }],
  ["a give-up mark", { value: 1 }],
  ["create another", pw("authorized", "1", null, false)],
  ["write ahead with its message's mark on record", "ConflictError (refused)"],
  ["write ahead with other messages' marks", pw("settling", "2", 1900, false)],
  ["two writes on one version at once", { value: "ConflictError, settling" }],
];

// The queues' lines for each job, in delivery order: the seed's payments
// (the golden's outcomes; HttpSender words the send's error its own way),
// and pi_0004 given up by the jobs queue.
const PG_LINES = [
  "worker  pi_0001/settle   #1  poison       (retrying will not help; nothing was sent, so the intent failed)",
  "worker  pi_0002/settle   #1  retry        (send: signer answered 502: rpc: connection refused)",
  "worker  pi_0002/settle   #2  retry        (settling for … without tx hash, waiting)",
  "worker  pi_0002/settle   #3  poison       (no luck after 3 deliveries; last broadcast unknown, needs review)",
  "worker  pi_0003/settle   #1  retry        (not authorized yet)",
  "worker  pi_0003/settle   #2  retry        (not authorized yet)",
  "worker  pi_0003/settle   #3  poison       (no luck after 3 deliveries; job dropped, intent still created)",
  "worker  pi_0004/settle   #3  poison       (the queue gave up after 3 deliveries; job dropped, intent still authorized)",
];

/**
 * What the example's app keeps across requests, as one app per isolate
 * does, measured where it costs: 20 `GET /readyz` at once open at most 2
 * PostgreSQL sessions (one probe a second, whoever calls; 2 if the burst
 * straddles a second), counted by the server (`GET /sessions`); 10 pushes
 * with made-up `kid`s fetch Google's keys at most once (once a minute),
 * counted by the outbound service, once a push with Google's `kid` has
 * fetched them. An app built per request forgets both: 20 sessions, 10
 * fetches.
 */
async function sharedState(call) {
  const label = "[PostgresStore, nodejs_compat]";
  const sessions = async () => {
    const { status, body } = await call("/sessions");
    if (status !== 200) {
      fail(`GET /sessions: ${status} ${JSON.stringify(body)}`);
    }
    return body.sessions;
  };
  const before = await sessions();
  const probes = await Promise.all(
    Array.from({ length: 20 }, () => call("/readyz")),
  );
  const opened = await sessions() - before;
  assertEqual(
    probes.map(({ status }) => status),
    probes.map(() => 200),
    "20 GET /readyz at once",
  );
  const push = pushEnvelope({ intentId: "pi_0404", kind: "settle" });
  const known = await call("/v1/pubsub", {
    method: "POST",
    headers: {
      authorization: `Bearer ${googleToken(DEAD_LETTER_AUDIENCE)}`,
    },
    body: push,
  });
  assertEqual(known.status, 401, "POST /v1/pubsub, another audience's token");
  await refusesForgedPush(call, push, `${label} `);
  const fetched = keyFetches;
  for (let n = 1; n <= 10; n++) {
    const { status } = await call("/v1/pubsub", {
      method: "POST",
      headers: {
        authorization: `Bearer ${googleToken(PUSH_AUDIENCE, `made-up-${n}`)}`,
      },
      body: push,
    });
    assertEqual(status, 401, `POST /v1/pubsub, made-up kid ${n}`);
  }
  const refetched = keyFetches - fetched;
  if (opened > 2 || refetched > 1) {
    fail(
      `${label} 20 GET /readyz at once opened ${opened} PostgreSQL sessions (at most 2), and 10 pushes with made-up kids fetched Google's keys ${refetched} times (at most 1): build the app once per isolate, not per request`,
    );
  }
  console.log(
    `  ${label} 20 GET /readyz at once: ${opened} PostgreSQL session(s); 10 pushes with made-up kids: ${refetched} fetch(es) of Google's keys`,
  );
}

/**
 * PostgresStore on workerd, over `cloudflare:sockets` to a real
 * PostgreSQL server: `tools/_postgres_worker.ts` migrates the schema,
 * answers the ops routes and a signed delivery (its replay refused from
 * the replay record in PostgreSQL), runs the store's own writes and
 * refusals, and consumes real Cloudflare Queues: the seed's three payments
 * on the jobs queue, a give-up on the dead-letter queue. Every request and
 * batch has a client of its own. Then a new Miniflare (a new workerd,
 * nothing in memory) reads the end states back from the database.
 */
async function postgresCheck() {
  const label = "[PostgresStore, nodejs_compat]";
  const lines = [];
  let mf = await startPostgresWorker(lines);
  try {
    let call = caller(mf);
    // The second is another request, on a client of its own, and finds
    // the schema current.
    for (const round of ["first", "second"]) {
      const migrated = await call("/migrate", { method: "POST" });
      assertEqual(
        [migrated.status, migrated.body],
        [204, ""],
        `POST /migrate, ${round}`,
      );
    }
    await sharedState(call);
    assertEqual((await call("/readyz")).status, 200, "GET /readyz");
    for (
      const [id, state, hold] of [
        ["pi_0001", "authorized", "pending"],
        ["pi_0002", "authorized", "pending"],
        ["pi_0003", "created", null],
        ["pi_0004", "authorized", "pending"],
        ["pi_0005", "created", null],
      ]
    ) {
      // The last with OPS_TOKEN_NEXT, which the ops routes take beside
      // OPS_TOKEN while the clients move to it.
      const token = id === "pi_0005" ? OPS_NEXT : OPS;
      const { status, body: { intent } } = await call("/v1/intents", {
        method: "POST",
        headers: { authorization: `Bearer ${token}` },
        body: JSON.stringify({ id, state }),
      });
      assertEqual(
        [status, intent?.id, intent?.state, intent?.hold, intent?.version],
        [201, id, state, hold, "1"],
        `POST /v1/intents ${id}`,
      );
    }
    const dup = await call("/v1/intents", {
      method: "POST",
      headers: ops,
      body: JSON.stringify({ id: "pi_0001", state: "created" }),
    });
    assertEqual([dup.status, dup.body], [409, {
      type: "urn:relayer:problem:exists",
      title: "Intent exists",
      status: 409,
      detail:
        "Cannot create intent pi_0001 as it exists: read it with GET /v1/intents/pi_0001 (this route only creates, it changes no intent).",
    }], "POST /v1/intents for an existing intent");
    console.log(
      `  ${label} migrate() twice: 204; /readyz: 200; 5 intents: 201 (the last with OPS_TOKEN_NEXT); a duplicate: 409`,
    );

    const steps = await call("/store", { method: "POST" });
    assertEqual(
      [steps.status, steps.body],
      [200, STORE_STEPS],
      "POST /store: PostgresStore's writes and refusals",
    );
    console.log(
      `  ${label} the store called directly: the write-ahead (lease and claim), its record, a review; refused: a duplicate, a stale version, another's lease, replayed claims (nothing of them committed), a void mid-broadcast, a failure once it may have sent, a write-ahead whose message's give-up mark is on record; of two writes on one version at once from two clients, exactly one lands`,
    );

    // The replay record is a row in PostgreSQL: the same signed request
    // again is refused before the relayer reads anything.
    const gbody = JSON.stringify({
      job: { intentId: "pi_0005", kind: "settle" },
      delivery: 1,
    });
    const signed = {
      method: "POST",
      headers: { "x-signature": signGeneric(gbody) },
      body: gbody,
    };
    const g = await call("/v1/deliveries", signed);
    assertEqual([g.status, g.body], [503, {
      outcome: "retry",
      job: "pi_0005/settle",
      delivery: 1,
      reason: "not authorized yet",
      delayMs: DELAY_MS,
    }], "POST /v1/deliveries, signed");
    const replay = await call("/v1/deliveries", signed);
    assertEqual([replay.status, replay.body], [401, {
      type: "urn:relayer:problem:unauthorized",
      title: "Unauthorized",
      status: 401,
      detail:
        "This signed request was already delivered: a replay is refused. Each delivery must carry a fresh signature.",
    }], "POST /v1/deliveries, the same signed request again");
    const forged = await call("/v1/deliveries", {
      ...signed,
      headers: {
        "x-signature": signGeneric(gbody, "another-secret-0123456789"),
      },
    });
    assertEqual(
      [forged.status, forged.body],
      [401, HMAC_REFUSED],
      `${label} POST /v1/deliveries, the current time with another secret`,
    );
    console.log(
      `  ${label} generic delivery, signed: 503 retry; the same request again: 401 replay; signed now with another secret: 401`,
    );

    // The seed's three payments on the jobs queue, and a give-up on the
    // dead-letter queue, at once.
    const jobs = await mf.getQueueProducer("JOBS");
    for (const intentId of ["pi_0001", "pi_0002", "pi_0003"]) {
      await jobs.send({ intentId, kind: "settle" });
    }
    await (await mf.getQueueProducer("DEAD")).send({
      intentId: "pi_0004",
      kind: "settle",
    });
    // Each job's lines in delivery order, the jobs in id order. How long
    // pi_0002 had been settling at its second delivery is the queue's
    // timing, so it is left out.
    const jobOf = (line) => line.split(/ +/)[1];
    const queued = () =>
      lines.map((line) => line.trim())
        .filter((line) => /^worker +pi_000[1-4]\/settle /.test(line))
        .map((line) =>
          line.replace(/settling for \S+ without/, "settling for … without")
        )
        .sort((x, y) => jobOf(x).localeCompare(jobOf(y)));
    const deadline = Date.now() + 60_000;
    while (queued().length < PG_LINES.length) {
      if (Date.now() > deadline) {
        fail(
          `${label} the queues did not finish the jobs\n${lines.join("\n")}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }

    // A new Miniflare, a new workerd: only what PostgreSQL kept.
    await mf.dispose();
    const after = [];
    mf = await startPostgresWorker(after);
    call = caller(mf);
    const ends = [];
    for (
      const id of [
        "pi_0001",
        "pi_0002",
        "pi_0003",
        "pi_0004",
        "pi_0005",
        "pw_0001",
      ]
    ) {
      const { status, body } = await call(`/v1/intents/${id}`, {
        headers: ops,
      });
      if (status !== 200) {
        fail(
          `GET /v1/intents/${id} after the restart: ${status} ${
            JSON.stringify(body)
          }`,
        );
      }
      ends.push(body);
    }
    const golden = readFileSync(process.env.GOLDEN, "utf8").trimEnd().split(
      "\n",
    ).slice(-3);
    const states = ends.slice(0, 3).map(({ intent }) =>
      `${intent.id} ${intent.state.padEnd(13)}hold ${intent.hold ?? "-"}`
    );
    assertEqual(
      states,
      golden,
      "the seed's end states, read back from PostgreSQL",
    );
    assertEqual(
      ends.map(({ intent, deadLetter }) => [
        intent.id,
        deadLetter?.cause ?? null,
        deadLetter?.resolution ?? null,
        deadLetter?.queue?.queue ?? null,
      ]),
      [
        ["pi_0001", "declared", "nothing was sent, so the intent failed", null],
        ["pi_0002", "exhausted", "last broadcast unknown, needs review", null],
        ["pi_0003", "exhausted", "job dropped, intent still created", null],
        [
          "pi_0004",
          "exhausted",
          "job dropped, intent still authorized",
          "cloudflare",
        ],
        ["pi_0005", null, null, null],
        ["pw_0001", null, null, null],
      ],
      "the dead letters, read back from PostgreSQL",
    );
    assertEqual(queued(), PG_LINES, `${label} the queues' deliveries`);
    // The forgeries above were refused, and the log said so (once a
    // minute per route): the lines an operator reads for a queue that
    // cannot get in.
    const output = [...lines, ...after].map((line) => line.trim());
    const refused = /^relayer POST \/v1\/\S+ refused 401: /;
    assertEqual(
      output.some((line) => refused.test(line)),
      true,
      `${label} a log line for the refused requests`,
    );
    // Given OPS_TOKEN_NEXT, each Worker's first event says a rotation is
    // under way, as main.ts's start line does.
    const rotation =
      "relayer: routes: ops (two tokens: OPS_TOKEN_NEXT, a rotation under way)";
    assertEqual(
      output.includes(rotation),
      true,
      `${label} the first event's line of the ops token's rotation`,
    );
    // Nothing else from workerd: no uncaught error (a client's end that
    // failed in waitUntil, I/O refused on behalf of another request).
    assertEqual(
      output.filter((line) =>
        line !== "" && !/^worker +pi_000[1-5]\/settle /.test(line) &&
        !refused.test(line) && line !== rotation &&
        !/^relayer intent pi_000[1-5] created by an operator: /.test(line)
      ),
      [],
      `${label} workerd's other output`,
    );
    // One send of each authorized payment the jobs queue delivered:
    // pi_0002's later deliveries, each on a client of its own, found its
    // unknown outcome on record and waited instead of sending again.
    assertEqual(
      Object.entries(sends).sort(),
      [["pi_0001", 1], ["pi_0002", 1]],
      "the signer's sends",
    );
    console.log(
      `  ${label} Cloudflare Queues, the seed's three payments and a give-up on the dead-letter queue:`,
    );
    for (const line of queued()) console.log(`    ${line}`);
    console.log(`  ${label} read back by a new workerd, from PostgreSQL:`);
    for (const line of states) console.log(`    ${line}`);
    console.log(`    the signer's sends: ${JSON.stringify(sends)}`);
  } finally {
    await mf.dispose();
  }
}

/**
 * The example's client over verified TLS on workerd, at a server whose
 * certificate names its IP address alone (TLS_DATABASE_URL, at 127.0.0.1,
 * its CA given to workerd as SSL_CERT_FILE): at the address it migrates and
 * reads, as postgres.js's Workers build leaves the check to workerd's
 * `startTls()`, which checks the certificate against the address it
 * dialed; by a name the certificate does not hold (`localhost`), it is
 * refused. workerd keeps the refusal's reason to its own log: postgres.js
 * hears nothing of it, and `migrate()` says nothing answered within its
 * bound (2 s here), and that workerd may have refused the certificate, as
 * a read unanswered and a write given no connection within the store's
 * `connectionWaitMs` (1 s here) do.
 */
async function postgresTls() {
  const label = "[PostgresStore, TLS]";
  const lines = [];
  const mf = await startPostgresWorker(lines);
  try {
    const call = caller(mf);
    const atAddress = process.env.TLS_DATABASE_URL;
    const at = await call("/tls", {
      method: "POST",
      body: JSON.stringify({ url: atAddress }),
    });
    assertEqual(
      [at.status, at.body],
      [200, { intent: null }],
      `${label} verify-full at ${new URL(atAddress).hostname}`,
    );
    const byName = new URL(atAddress);
    byName.hostname = "localhost";
    const refused = await call("/tls", {
      method: "POST",
      body: JSON.stringify({ url: byName.href, waitMs: 2000 }),
    });
    const mismatches = () =>
      lines.filter((line) => /reason = Hostname mismatch/.test(line)).length;
    const why = lines.find((line) => /TLS peer's certificate/.test(line));
    if (
      refused.status !== 200 ||
      !/nothing answered within 2000ms: .*workerd may have refused the server's TLS certificate/
        .test(refused.body.error ?? "") ||
      !/Hostname mismatch/.test(why ?? "")
    ) {
      fail(
        `${label} verify-full by a name the certificate does not hold: ${refused.status} ${
          JSON.stringify(refused.body)
        }, workerd's log: ${
          why ?? "nothing"
        }; expected a refusal for the name (Hostname mismatch) that names workerd's TLS`,
      );
    }
    // The store's other calls, refused so on a client that never
    // migrated: a read unanswered, a write given no connection, each in
    // its bound (1 s), each naming workerd's TLS too.
    const calls = await call("/tls", {
      method: "POST",
      body: JSON.stringify({ url: byName.href, waitMs: 1000, calls: true }),
    });
    const named = (said, head) =>
      typeof said === "string" && said.startsWith(head) &&
      /, or workerd refused its TLS certificate \(.*\); (retry|nothing was written, so try again)$/
        .test(said);
    if (
      calls.status !== 200 ||
      !named(
        calls.body.read,
        "Error: PostgreSQL did not answer the store's read within 1000ms: ",
      ) ||
      !named(
        calls.body.write,
        "Error: PostgreSQL gave the store no connection within 1000ms: ",
      )
    ) {
      fail(
        `${label} a read and a write by a name the certificate does not hold: ${calls.status} ${
          JSON.stringify(calls.body)
        }; expected each to name workerd's TLS beside what it says of the pool and the server`,
      );
    }
    // sslmode=require, which encrypts without checking the server
    // elsewhere: workerd's startTls checks it all the same.
    const before = mismatches();
    const required = await call("/tls", {
      method: "POST",
      body: JSON.stringify({ url: byName.href, ssl: "require", waitMs: 2000 }),
    });
    // workerd's output comes apart from the answer.
    const deadline = Date.now() + 5_000;
    while (mismatches() === before && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    if (required.body.error === undefined || mismatches() === before) {
      fail(
        `${label} require by a name the certificate does not hold: ${required.status} ${
          JSON.stringify(required.body)
        }; expected workerd to refuse it as it refuses verify-full (Hostname mismatch)`,
      );
    }
    console.log(
      `  ${label} verify-full at 127.0.0.1, a certificate naming the address alone: migrated and read; require by localhost refused as verify-full is; verify-full by localhost: refused (${refused.body.error}; a read: ${calls.body.read}; a write: ${calls.body.write}; workerd's log: ${
        why?.replace(/^.*failed: /, "") ?? "nothing"
      })`,
    );
  } finally {
    await mf.dispose();
  }
}

/**
 * What the queues do with a batch the handler never settles, which
 * docs/queues.md ("A batch the handler never settles") and
 * examples/cloudflare/wrangler.toml's `retry_delay` rest on, on a Worker of
 * its own: a consumer that throws (the Worker failing before the handler
 * runs) gets each message back after the consumer's `retryDelay`, one
 * attempt each, into the dead-letter queue and, out of retries there,
 * nowhere; a consumer that retries with `delaySeconds: 1` gets it back
 * after 1 s, whatever its `retryDelay`.
 */
async function unsettledBatches() {
  const script = `
    const seen = [];
    export default {
      fetch: () => Response.json(seen),
      async queue(batch) {
        for (const m of batch.messages) {
          seen.push({ queue: batch.queue, attempts: m.attempts, at: Date.now() });
        }
        if (batch.queue === "explicit") {
          for (const m of batch.messages) m.retry({ delaySeconds: 1 });
          return;
        }
        throw new Error("the Worker failed before the handler ran");
      },
    };`;
  const mf = new Miniflare({
    modules: true,
    script,
    compatibilityDate: process.env.COMPAT_DATE,
    queueProducers: { BYPASS: "bypass", EXPLICIT: "explicit" },
    queueConsumers: {
      bypass: {
        maxBatchTimeout: 1,
        maxRetries: 1,
        retryDelay: 3,
        deadLetterQueue: "bypass-dlq",
      },
      "bypass-dlq": { maxBatchTimeout: 1, maxRetries: 1, retryDelay: 3 },
      explicit: { maxBatchTimeout: 1, maxRetries: 1, retryDelay: 6 },
    },
  });
  try {
    await mf.ready;
    const body = { intentId: "pi_0001", kind: "settle" };
    await (await mf.getQueueProducer("BYPASS")).send(body);
    await (await mf.getQueueProducer("EXPLICIT")).send(body);
    // bypass: 1 s batch + 3 s, 3 times; then nothing. explicit: 1 s + 1 s.
    await new Promise((resolve) => setTimeout(resolve, 17_000));
    const seen = await (await mf.dispatchFetch(`${PUBLIC_URL}/`)).json();
    const on = (queue) => seen.filter((m) => m.queue === queue);
    const gaps = (list) => list.slice(1).map((m, i) => m.at - list[i].at);
    const bypassed = [...on("bypass"), ...on("bypass-dlq")];
    assertEqual(
      bypassed.map((m) => `${m.queue} #${m.attempts}`),
      ["bypass #1", "bypass #2", "bypass-dlq #1", "bypass-dlq #2"],
      "a batch that throws: retried, an attempt each, into the dead-letter queue and then dropped",
    );
    // The move to the dead-letter queue waits no retryDelay: gaps 1 and 3.
    const [first, , third] = gaps(bypassed);
    if (first < 3000 || third < 3000) {
      fail(
        `a batch that throws came back after ${first} ms and ${third} ms, not the consumer's retryDelay (3 s): wrangler.toml's retry_delay would not hold a give-up the handler never settled`,
      );
    }
    const explicit = gaps(on("explicit"));
    if (explicit.length !== 1 || explicit[0] >= 6000) {
      fail(
        `retry({ delaySeconds: 1 }) on a consumer with retryDelay 6 came back after ${explicit} ms: retry_delay would override the handler's own delays`,
      );
    }
    console.log(
      `  [unsettled batches] a consumer that throws: back after ${first} ms and ${third} ms (retryDelay 3 s), then dropped; retry({ delaySeconds: 1 }) over retryDelay 6 s: back after ${
        explicit[0]
      } ms`,
    );
  } finally {
    await mf.dispose();
  }
}

/**
 * The Worker must not start on `vars` (unquoted `[vars]`, JSON bindings):
 * workerd's `Uncaught …` line must match `uncaught`. Shows that workerd
 * hands the Worker the number or boolean itself (only a number is refused
 * as one the Worker may hold rounded) and that a refused setting stops
 * the Worker with a line that names it, as docs/queues.md says.
 */
async function refusesToStart(vars, uncaught, what) {
  const lines = [];
  const label = `examples/cloudflare/worker.ts, ${what}`;
  let mf;
  try {
    mf = await startMiniflare([], lines, [], vars);
  } catch (error) {
    const said = startFailure(label, error, lines, process.env.COMPAT_DATE);
    const line = said.find((l) => /\bUncaught\b/.test(l));
    if (line === undefined || !uncaught.test(line)) {
      for (const l of said) console.error(l);
      fail(`${what}: expected workerd's line to match ${uncaught}`);
    }
    console.log(`  [${what}] refused at start: ${line.trim()}`);
    return;
  }
  await mf.dispose();
  fail(`${what}: the Worker started`);
}

/**
 * `qstashPublisher` on workerd (tools/_publish_worker.ts, built in the
 * Worker's global scope): a publish QStash takes (the request as QStash's
 * API takes it), one QStash rate-limits (429 with Retry-After: its wait on
 * the error), and one QStash answers too late (failed near the bound, the
 * outbound fetch aborted); and the Worker writes nothing to its output.
 */
async function publishing() {
  const published = [];
  let slowAborted = false;
  const qstash = async (request) => {
    const url = new URL(request.url);
    if (url.host !== "qstash.test") {
      return new Response("not found", { status: 404 });
    }
    published.push({
      path: decodeURIComponent(url.pathname),
      authorization: request.headers.get("authorization"),
      contentType: request.headers.get("content-type"),
      retries: request.headers.get("upstash-retries"),
      failureCallback: request.headers.get("upstash-failure-callback"),
      body: await request.text(),
    });
    if (url.pathname.includes("/limited/")) {
      return new Response("too many requests", {
        status: 429,
        headers: { "retry-after": "7" },
      });
    }
    if (url.pathname.includes("/slow/")) {
      // Past the publisher's 300 ms; the abort reaches here as the
      // request's signal, where Miniflare passes it on.
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, 2000);
        request.signal?.addEventListener("abort", () => {
          slowAborted = true;
          clearTimeout(timer);
          resolve();
        });
      });
      return Response.json({ messageId: "msg_late" }, { status: 201 });
    }
    return Response.json({ messageId: "msg_workerd_1" }, { status: 201 });
  };
  const { mf, output: lines } = await readyWorker(
    { scriptPath: process.env.PUBLISH_SCRIPT, outboundService: qstash },
    "tools/_publish_worker.ts",
  );
  try {
    const publish = async (name) =>
      await (await mf.dispatchFetch(`${PUBLIC_URL}/publish/${name}`, {
        method: "POST",
      })).json();
    assertEqual(
      await publish("ok"),
      { messageId: "msg_workerd_1" },
      "a publish QStash takes",
    );
    assertEqual(
      published[0],
      {
        path: "/v2/publish/https://relayer.example.test/ok/v1/qstash",
        authorization: "Bearer qstash-token-for-workerd",
        contentType: "application/json",
        retries: "9",
        failureCallback: "https://relayer.example.test/ok/v1/qstash/failed",
        body: '{"intentId":"pi_0001","kind":"settle"}',
      },
      "the publish as QStash's API takes it",
    );
    const limited = await publish("limited");
    assertEqual(
      [limited.error, limited.retryAfterMs],
      [
        "QStash did not take the job pi_0001/settle (HTTP 429): rate-limited by QStash's rate limit; try again in 7 s (QStash said: too many requests)",
        7000,
      ],
      "a publish QStash rate-limits",
    );
    const slow = await publish("slow");
    if (!/within 300 ms/.test(slow.error) || slow.ms > 1500) {
      fail(
        `a publish QStash answers after its bound: ${
          JSON.stringify(slow)
        } (expected to fail within 300 ms, near the bound)`,
      );
    }
    const written = lines.join("").trim();
    if (written !== "") {
      fail(`the publisher wrote to the Worker's output:\n${written}`);
    }
    console.log(
      `  [qstashPublisher] built in global scope; a publish taken, a 429 (Retry-After 7: retryAfterMs 7000), a late answer failed after ${slow.ms} ms (bound 300 ms; the outbound request ${
        slowAborted
          ? "aborted"
          : "not seen aborted by Miniflare's outbound service"
      }); nothing written to the output`,
    );
  } finally {
    await mf.dispose();
  }
}

/**
 * Bodies held back on workerd, where a timer belongs to the request that
 * set it and ends with it: two held reads that overlap, and one begun once
 * the first was answered, are each answered 408 once BODY_TIMEOUT (1 s)
 * passed, while a delivery sent whole meanwhile is answered at once, on
 * `compatibilityDate`. The Worker's reads keep a timer each
 * (`webhook/_deadlines.ts`); one timer shared by every read, as on Deno,
 * Node and Bun, ended here with the request that set it, and the bodies
 * held after that one waited on unanswered.
 */
async function heldBodies(compatibilityDate) {
  const label = `held bodies, compatibility date ${compatibilityDate}`;
  const { mf } = await (async () => {
    const lines = [];
    try {
      return {
        mf: await startMiniflare(
          [],
          lines,
          [],
          { BODY_TIMEOUT: "1s" },
          compatibilityDate,
        ),
      };
    } catch (error) {
      workerFailed(label, error, lines);
    }
  })();
  const began = Date.now();
  /** A generic delivery whose first bytes are sent `afterMs` in, the rest never (or at once). */
  const delivery = async (name, afterMs, whole) => {
    await new Promise((resolve) => setTimeout(resolve, afterMs));
    const body = JSON.stringify({
      job: { intentId: "pi_0001", kind: "settle" },
      delivery: 1,
      messageId: `worker-check-held-${name}`,
    });
    const bytes = new TextEncoder().encode(body);
    const stream = new ReadableStream({
      start(controller) {
        controller.enqueue(whole ? bytes : bytes.subarray(0, 10));
        if (whole) controller.close();
      },
    });
    const sent = Date.now();
    const answer = mf.dispatchFetch(`${PUBLIC_URL}/v1/deliveries`, {
      method: "POST",
      headers: {
        "x-signature": signGeneric(body),
        "content-length": String(bytes.length),
      },
      body: stream,
      duplex: "half",
    }).then(async (res) => {
      await res.body?.cancel();
      return res.status;
    });
    const status = await Promise.race([
      answer,
      new Promise((resolve) => setTimeout(() => resolve("none"), 5_000)),
    ]);
    stream.cancel().catch(() => {});
    return { name, status, ms: Date.now() - sent, at: sent - began };
  };
  try {
    const answers = await Promise.all([
      delivery("first", 0, false),
      delivery("overlapping", 400, false),
      delivery("whole", 100, true),
      delivery("after the first", 1_600, false),
    ]);
    const wrong = answers.filter(({ name, status, ms }) =>
      name === "whole" ? status !== 503 : status !== 408 || ms > 3_000
    );
    if (wrong.length > 0) {
      fail(
        `bodies held back on workerd (compatibility date ${compatibilityDate}), BODY_TIMEOUT 1s: expected a 408 within 3s for each held one and a 503 for the whole one, got ${
          answers.map(({ name, status, ms, at }) =>
            `${name} (sent at ${at} ms): ${status} after ${ms} ms`
          ).join("; ")
        }`,
      );
    }
    console.log(
      `  [${label}] BODY_TIMEOUT 1s: ${
        answers.map(({ name, status, ms }) =>
          `${name} ${status} after ${ms} ms`
        )
          .join(", ")
      }`,
    );
  } finally {
    await mf.dispose();
  }
}

/** Unquoted `[vars]` the Worker must refuse at its start, on workerd. */
async function refusedVars() {
  // With a PUBLIC_URL on this machine (wrangler dev's), loadConfig takes
  // it and the Worker's own check refuses it; off it, loadConfig does.
  await refusesToStart(
    { RELAYER_INSECURE_DEV: true, PUBLIC_URL: "http://127.0.0.1:8787" },
    /Uncaught Error: RELAYER_INSECURE_DEV is for local runs: unset it$/,
    "RELAYER_INSECURE_DEV = true",
  );
  await refusesToStart(
    { RELAYER_INSECURE_DEV: true },
    /Uncaught Error: ConfigError: RELAYER_INSECURE_DEV is for local runs, and this service is reached at PUBLIC_URL, off this machine: it would take requests with no signature or token, from anyone who reaches it, on /,
    "RELAYER_INSECURE_DEV = true, PUBLIC_URL off this machine",
  );
  // 1234567890123456789 unquoted: the Worker holds 1234567890123456800.
  await refusesToStart(
    { WEBHOOK_SECRET: Number("1234567890123456789") },
    /Uncaught Error: ConfigError: WEBHOOK_SECRET is a number other than a whole one below 2\^53, which the Worker may hold rounded, not as written: write it quoted/,
    "WEBHOOK_SECRET = 1234567890123456789",
  );
  // A message retention the queue handler refuses (the seed's policy and
  // the default LEASE: 2 retries of up to 30 s each): workerConfig refuses
  // it by the handler's rule, naming the setting, in the Worker's global
  // scope, so workerd refuses the Worker at its start, before any request
  // or batch.
  await refusesToStart(
    { CLOUDFLARE_MESSAGE_RETENTION: "1m" },
    /Uncaught Error: ConfigError: CLOUDFLARE_MESSAGE_RETENTION is 1m0s: the waits this handler asks between a message's 3 deliveries \(max_retries = 2\) span up to 1m0s/,
    'CLOUDFLARE_MESSAGE_RETENTION = "1m"',
  );
  await refusesToStart(
    {
      CLOUDFLARE_MESSAGE_RETENTION: "61s",
      CLOUDFLARE_DELIVERY_DELAY: "1s",
    },
    /Uncaught Error: ConfigError: CLOUDFLARE_MESSAGE_RETENTION is 1m1s: a message's delivery delay \(1s\) and the waits this handler asks between a message's 3 deliveries \(max_retries = 2\) span up to 1m1s/,
    'CLOUDFLARE_MESSAGE_RETENTION = "61s" with CLOUDFLARE_DELIVERY_DELAY = "1s"',
  );
}

/**
 * A service's settings that only main.ts reads, copied into the Worker with
 * values main.ts refuses: the Worker starts on workerd all the same, says
 * nothing in its global scope, and names each once, on its first event
 * (workerConfig's `nameUnread`), not again on the next.
 */
async function serviceOnlyVars() {
  const vars = {
    KV_PATH: "https://kv.example.test/db",
    KV_QUEUE: "1",
    QSTASH_TOKEN: "a-qstash-token-0123",
    DATABASE_URL: "mysql://u:p@db.test/r",
  };
  const what = "settings only main.ts reads";
  const lines = [];
  let mf;
  try {
    mf = await startMiniflare([], lines, [], vars);
  } catch (error) {
    const label = `examples/cloudflare/worker.ts, ${what}`;
    for (
      const l of startFailure(label, error, lines, process.env.COMPAT_DATE)
    ) {
      console.error(l);
    }
    fail(`${what}: the Worker refused to start`);
  }
  const named = (name) =>
    lines.filter((line) =>
      line.includes(`relayer: ${name} is set, but only main.ts reads it`)
    ).length;
  try {
    const before = Object.keys(vars).filter((name) => named(name) > 0);
    for (let i = 0; i < 2; i++) {
      const res = await mf.dispatchFetch(`${PUBLIC_URL}/healthz`);
      await res.body?.cancel();
      if (res.status !== 200) {
        fail(`${what}: GET /healthz answered ${res.status}`);
      }
    }
    // workerd's output comes apart from the answer.
    const deadline = Date.now() + 5_000;
    while (
      Object.keys(vars).some((name) => named(name) === 0) &&
      Date.now() < deadline
    ) await new Promise((resolve) => setTimeout(resolve, 50));
    const counts = Object.keys(vars).map((name) => `${name} ${named(name)}`);
    if (before.length > 0 || counts.some((count) => !count.endsWith(" 1"))) {
      for (const l of lines) console.error(l);
      fail(
        `${what}: expected each named once, on the first request (before it: ${
          before.join(", ") || "none"
        }; after two: ${counts.join(", ")})`,
      );
    }
    console.log(
      `  [${what}] started beside ${
        Object.keys(vars).join(", ")
      }, each named once on the first request`,
    );
  } finally {
    await mf.dispose();
  }
}

/**
 * The docs' local-run secrets given to the Worker, with a loopback
 * PUBLIC_URL (a Worker has no platform marker, so the start takes them): a
 * loopback request is served; once one comes to a public host, as
 * every request on Cloudflare does, each is answered 503 naming the
 * setting, never its value, a loopback one too, and it is logged once.
 */
async function publishedSecrets() {
  const what = "the docs' local-run secrets";
  const local = "local-secret-0123456789";
  const ops = "local-ops-token-0123456789";
  const lines = [];
  let mf;
  try {
    mf = await startMiniflare([], lines, [], {
      WEBHOOK_SECRET: local,
      OPS_TOKEN: ops,
      // As a .dev.vars for wrangler dev gives it: the start takes them.
      PUBLIC_URL: "http://127.0.0.1:8787",
    });
  } catch (error) {
    const label = `examples/cloudflare/worker.ts, ${what}`;
    for (
      const l of startFailure(label, error, lines, process.env.COMPAT_DATE)
    ) {
      console.error(l);
    }
    fail(`${what}: the Worker refused to start`);
  }
  const detail =
    `WEBHOOK_SECRET is a value the docs give for a local run, which anyone can read, and this Worker is reached off this machine, so it answers nothing: generate a random one, such as with: openssl rand -base64 32, and set it with: wrangler secret put WEBHOOK_SECRET`;
  const call = async (url) => {
    const res = await mf.dispatchFetch(url, {
      headers: { authorization: `Bearer ${ops}` },
    });
    return { status: res.status, text: await res.text() };
  };
  try {
    const served = await call("http://127.0.0.1:8787/v1/dead-letters");
    assertEqual(served.status, 200, `${what}: a loopback ops call`);
    for (
      const url of [
        "https://relayer.example.workers.dev/v1/dead-letters",
        "http://127.0.0.1:8787/v1/dead-letters",
      ]
    ) {
      const refused = await call(url);
      assertEqual(refused.status, 503, `${what}: ${url} once reached`);
      assertEqual(JSON.parse(refused.text).detail, detail, `${what}: ${url}`);
      if (refused.text.includes(local) || refused.text.includes(ops)) {
        fail(`${what}: the refusal shows a secret's value`);
      }
    }
    // workerd's output comes apart from the answer.
    const said = () =>
      lines.filter((line) => line.includes(`relayer: ${detail}`)).length;
    const deadline = Date.now() + 5_000;
    while (said() === 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assertEqual(said(), 1, `${what}: the refusal's log lines`);
    console.log(
      `  [${what}] a loopback request served; once one came to a public host, each answered 503 naming WEBHOOK_SECRET, logged once`,
    );
  } finally {
    await mf.dispose();
  }
}

try {
  if (process.env.POSTGRES_SCRIPT) {
    await postgresCheck();
    await postgresTls();
  } else {
    // Each step has a Miniflare of its own and waits on queues and timers
    // more than it computes: four at once, the longest first.
    await inSteps([
      () => check([]),
      () => check(["nodejs_compat"]),
      outage,
      unsettledBatches,
      refusedVars,
      serviceOnlyVars,
      publishedSecrets,
      // The check's date, and one before 2022-03-21, where a Worker has no
      // navigator unless its flags ask for one.
      () => heldBodies(process.env.COMPAT_DATE),
      () => heldBodies("2022-01-01"),
      publishing,
    ], 4);
  }
} catch (error) {
  printHeld();
  console.error(
    `worker-check: FAIL unexpected error (${
      firstLine(error)
    }): run it again; if it repeats, report it with the output above`,
  );
  process.exit(1);
}
