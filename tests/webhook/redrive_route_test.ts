import assert from "node:assert/strict";
import { createApp } from "../../webhook/app.ts";
import {
  type Job,
  MemoryStore,
  ScriptedSender,
  type Store,
} from "../../mod.ts";
import { deadLetter } from "../store/_contract.ts";
import { heldBySession } from "../../store/_held_lock.ts";
import { BACKENDS } from "../_stores.ts";

const OPS = "ops-token-for-redrive-tests";
const ops = { authorization: `Bearer ${OPS}` };

/**
 * An app (an instance of the service) on `store`, redriving to `publish`
 * unless `queue` is false.
 */
function appOn(
  store: Store,
  options: {
    queue?: boolean;
    publish: (job: Job) => Promise<void>;
    log?: (line: string) => void;
  },
) {
  return createApp({
    store,
    sender: new ScriptedSender({}),
    policy: { maxDeliveries: 1 },
    insecureDev: true, // an unsigned delivery makes the dead letter
    opsToken: OPS,
    ...(options.queue === false ? {} : {
      redriveTo: { publish: options.publish },
    }),
    ...(options.log ? { log: options.log } : {}),
  });
}

/**
 * An app whose store (`store`, else a new MemoryStore) holds a dead letter
 * for `pi_0001/settle` (intent still created).
 */
async function withDeadLetter(
  options: {
    queue?: boolean;
    publish?: (job: Job) => Promise<void>;
    log?: (line: string) => void;
    store?: Store;
  } = {},
) {
  const store = options.store ?? new MemoryStore();
  await store.createIntent({ id: "pi_0001", state: "created" });
  const enqueued: Job[] = [];
  const app = appOn(store, {
    ...options,
    publish: options.publish ??
      ((job: Job) => Promise.resolve(void enqueued.push(job))),
  });
  const poisoned = await app.request("/v1/deliveries", {
    method: "POST",
    body: JSON.stringify({
      job: { intentId: "pi_0001", kind: "settle" },
      delivery: 1,
    }),
  });
  assert.equal((await poisoned.json()).outcome, "poison");
  return { app, enqueued, store };
}

Deno.test("createApp() without a queue to redrive to refuses the redrive (503) and keeps the dead letter, so the intent is not stranded", async () => {
  const { app, store } = await withDeadLetter({ queue: false });
  const res = await app.request("/v1/dead-letters/pi_0001/settle/redrive", {
    method: "POST",
    headers: ops,
  });
  assert.equal(res.status, 503);
  const body = await res.json();
  assert.equal(body.type.endsWith("not-configured"), true, body.type);
  assert.match(
    body.detail,
    /set QSTASH_TOKEN, or KV_QUEUE=1 on a Deno KV file, as the local queue runs neither on Deno Deploy nor with KV_URL or DATABASE_URL/,
  );
  // The intent is still created: its dead letter is what records it.
  assert.notEqual(await store.getDeadLetter("pi_0001/settle"), null);
  // The body the answer gives is a delivery, counted afresh from 1.
  const job = JSON.parse(
    /as (\{"job":.*"delivery":1\})/.exec(body.detail)?.[1] ?? "null",
  );
  assert.deepEqual(job, {
    job: { intentId: "pi_0001", kind: "settle" },
    delivery: 1,
  });
  const again = await app.request("/v1/deliveries", {
    method: "POST",
    body: JSON.stringify(job),
  });
  assert.equal((await again.json()).delivery, 1);
});

Deno.test("createApp() without a queue answers 404 for a missing dead letter and 409 for a settled intent before it advises a redelivery", async () => {
  const { app, store } = await withDeadLetter({ queue: false });
  const missing = await app.request("/v1/dead-letters/pi_0404/settle/redrive", {
    method: "POST",
    headers: ops,
  });
  assert.equal(missing.status, 404);
  const absent = await missing.json();
  assert.equal(absent.type.endsWith("not-found"), true);
  // It says where the letters that are there are listed.
  assert.equal(
    absent.detail,
    "There is no dead letter for pi_0404/settle (redriven, discarded or resolved since, or never kept): GET /v1/dead-letters lists those there are.",
  );
  await store.createIntent({ id: "pi_done", state: "settled" });
  await store.putDeadLetter({
    jobId: "pi_done/settle",
    intentId: "pi_done",
    deliveries: 3,
    cause: "exhausted",
    reason: "no luck after 3 deliveries",
    resolution: "job dropped, intent still settling",
    lastError: "pending",
    poisonedAt: 0,
  });
  const settled = await app.request("/v1/dead-letters/pi_done/settle/redrive", {
    method: "POST",
    headers: ops,
  });
  assert.equal(settled.status, 409);
  assert.equal(settled.headers.get("retry-after"), null);
  const body = await settled.json();
  assert.equal(body.type.endsWith("cannot-redrive"), true, body.type);
  assert.match(
    body.detail,
    /intent pi_done is already settled: no job can help it\. Discard the letter once nobody needs the record$/,
  );
  assert.doesNotMatch(body.detail, /delivery/);
  assert.notEqual(await store.getDeadLetter("pi_done/settle"), null);
});

Deno.test("createApp() answers 503 when the redrive's queue fails, keeps the dead letter, and logs why", async () => {
  const lines: string[] = [];
  const { app, store } = await withDeadLetter({
    publish: () => Promise.reject(new Error("QStash answered 500")),
    log: (line) => lines.push(line),
  });
  const res = await app.request("/v1/dead-letters/pi_0001/settle/redrive", {
    method: "POST",
    headers: ops,
  });
  assert.equal(res.status, 503);
  assert.equal(res.headers.get("retry-after"), "5");
  const body = await res.json();
  assert.equal(body.type, "urn:relayer:problem:redrive-failed");
  assert.match(body.detail, /^The redrive of pi_0001\/settle did not complete/);
  assert.doesNotMatch(body.detail, /QStash answered/);
  assert.ok(
    lines.includes(
      "relayer redrive of pi_0001/settle failed: Error: QStash answered 500",
    ),
    lines.join("\n"),
  );
  assert.notEqual(await store.getDeadLetter("pi_0001/settle"), null);
});

Deno.test("createApp() answers a redrive the database held up (another session's lock, a cancelled statement) with 503 redrive-failed saying so", async () => {
  const { app } = await withDeadLetter({
    publish: () =>
      Promise.reject(
        heldBySession(
          "Cannot redrive pi_0001/settle as another session held a lock it needed for over 5000ms (lock_timeout; see pg_locks and pg_stat_activity): nothing was written; retry",
          new Error("canceling statement due to lock timeout"),
        ),
      ),
  });
  const res = await app.request("/v1/dead-letters/pi_0001/settle/redrive", {
    method: "POST",
    headers: ops,
  });
  assert.equal(res.status, 503);
  const body = await res.json();
  assert.equal(body.type, "urn:relayer:problem:redrive-failed");
  assert.match(
    body.detail,
    /^The redrive of pi_0001\/settle did not complete \(held up in the database: another session's lock, or a statement cancelled by statement_timeout or pg_cancel_backend; the relayer's log names it\): try again\./,
  );
});

Deno.test("createApp() redrives a dead letter named by intent and kind, as two path segments", async () => {
  const { app, enqueued } = await withDeadLetter();
  const res = await app.request("/v1/dead-letters/pi_0001/settle/redrive", {
    method: "POST",
    headers: ops,
  });
  assert.equal(res.status, 202);
  assert.deepEqual(await res.json(), {
    job: { intentId: "pi_0001", kind: "settle" },
    jobId: "pi_0001/settle",
    enqueued: true,
  });
  assert.deepEqual(enqueued, [{ intentId: "pi_0001", kind: "settle" }]);
  const again = await app.request("/v1/dead-letters/pi_0001/settle/redrive", {
    method: "POST",
    headers: ops,
  });
  assert.equal(again.status, 404); // redriven already: the dead letter is gone
});

Deno.test("createApp() still redrives a dead letter whose job id is one %2F-encoded segment", async () => {
  const { app } = await withDeadLetter();
  const res = await app.request("/v1/dead-letters/pi_0001%2Fsettle/redrive", {
    method: "POST",
    headers: ops,
  });
  assert.equal(res.status, 202);
});

Deno.test("createApp() guards the two-segment redrive route like the other ops routes", async () => {
  const { app } = await withDeadLetter();
  const path = "/v1/dead-letters/pi_0001/settle/redrive";
  assert.equal((await app.request(path, { method: "POST" })).status, 401);
  const wrongMethod = await app.request(path, { headers: ops });
  assert.equal(wrongMethod.status, 405);
  assert.equal(wrongMethod.headers.get("allow"), "POST");
  const unknown = await app.request("/v1/dead-letters/pi_0404/settle/redrive", {
    method: "POST",
    headers: ops,
  });
  assert.equal(unknown.status, 404);
});

Deno.test("createApp() discards a dead letter no job can act on (DELETE), and refuses one whose intent a job can still move", async () => {
  const { app, store } = await withDeadLetter();
  const path = "/v1/dead-letters/pi_0001/settle";
  assert.equal((await app.request(path, { method: "DELETE" })).status, 401);
  // The intent is still created: the letter is its record of having no job.
  const refused = await app.request(path, { method: "DELETE", headers: ops });
  assert.equal(refused.status, 409);
  const problem = await refused.json();
  assert.equal(problem.type, "urn:relayer:problem:cannot-discard");
  assert.match(
    problem.detail,
    /is still created: .* Authorize the intent, then redrive it/,
  );
  assert.notEqual(await store.getDeadLetter("pi_0001/settle"), null);
  // An unreadable message's letter, by its three segments or encoded whole.
  for (
    const [name, url] of [
      ["m-1", "/v1/dead-letters/pubsub/m-1/unreadable"],
      ["m-2", "/v1/dead-letters/pubsub%2Fm-2%2Funreadable"],
    ] as const
  ) {
    await store.putDeadLetter({
      ...deadLetter(`pubsub/${name}/unreadable`, 0),
      intentId: "",
    });
    const stale = await app.request(`${url}?version=stale`, {
      method: "DELETE",
      headers: ops,
    });
    assert.equal(stale.status, 409, url);
    // An empty version is a mistake, not a letter that changed.
    const empty = await app.request(`${url}?version=`, {
      method: "DELETE",
      headers: ops,
    });
    assert.equal(empty.status, 400, url);
    assert.match((await empty.json()).detail, /^'version' is empty/);
    const res = await app.request(url, { method: "DELETE", headers: ops });
    assert.equal(res.status, 200, url);
    assert.equal(
      (await res.json()).discarded.jobId,
      `pubsub/${name}/unreadable`,
    );
    assert.equal(await store.getDeadLetter(`pubsub/${name}/unreadable`), null);
    const again = await app.request(url, { method: "DELETE", headers: ops });
    assert.equal(again.status, 404, url);
  }
});

Deno.test("createApp() discards a dead letter read at its version, and answers 405 for other methods on a letter's path", async () => {
  const { app, store } = await withDeadLetter();
  await store.createIntent({ id: "pi_0002", state: "settled" });
  await store.putDeadLetter(deadLetter("pi_0002/settle", 0));
  const { version } = (await store.getDeadLetter("pi_0002/settle"))!;
  const res = await app.request(
    `/v1/dead-letters/pi_0002/settle?version=${encodeURIComponent(version)}`,
    { method: "DELETE", headers: ops },
  );
  assert.equal(res.status, 200);
  assert.equal(
    (await res.json()).discarded.resolution,
    deadLetter("pi_0002/settle", 0).resolution,
  );
  for (
    const [method, url, allow] of [
      ["GET", "/v1/dead-letters/pi_0002/settle", "DELETE"],
      ["POST", "/v1/dead-letters/pubsub/m-1/unreadable", "DELETE"],
      ["DELETE", "/v1/dead-letters/pi_0001/settle/redrive", "POST"],
      ["DELETE", "/v1/dead-letters/pi_0001%2Fsettle/redrive", "POST"],
    ]
  ) {
    const wrong = await app.request(url!, { method: method!, headers: ops });
    assert.equal(wrong.status, 405, `${method} ${url}`);
    assert.equal(wrong.headers.get("allow"), allow);
  }
  // The letter a DELETE of a redrive path might have named is untouched.
  assert.notEqual(await store.getDeadLetter("pi_0001/settle"), null);
});

Deno.test("createApp() answers 503 with Retry-After when the store fails under a redrive without a queue or a discard, and logs why", async () => {
  const lines: string[] = [];
  const { store } = await withDeadLetter();
  const down = new Proxy(store, {
    get(target, key) {
      if (key === "getDeadLetter" || key === "getIntent") {
        return () => Promise.reject(new Error("store down"));
      }
      const value = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  const app = createApp({
    store: down,
    sender: new ScriptedSender({}),
    insecureDev: true,
    opsToken: OPS,
    log: (line) => lines.push(line),
  });
  for (
    const [method, url] of [
      ["POST", "/v1/dead-letters/pi_0001/settle/redrive"],
      ["DELETE", "/v1/dead-letters/pi_0001/settle"],
    ] as const
  ) {
    const res = await app.request(url, { method, headers: ops });
    assert.equal(res.status, 503, url);
    assert.equal(res.headers.get("retry-after"), "5");
    const body = await res.json();
    assert.equal(body.type, "urn:relayer:problem:store-failed");
    assert.doesNotMatch(body.detail, /store down/);
  }
  assert.equal(
    lines.filter((line) => /failed: .*store down/.test(line)).length,
    2,
  );
  assert.notEqual(await store.getDeadLetter("pi_0001/settle"), null);
});

Deno.test("createApp() answers 400 for a discard of an id no dead letter can have, before the store or the log sees it", async () => {
  const lines: string[] = [];
  const store = new MemoryStore();
  const app = createApp({
    store: new Proxy(store, {
      get: () => () => Promise.reject(new Error("the store was asked")),
    }),
    sender: new ScriptedSender({}),
    opsToken: OPS,
    log: (line) => lines.push(line),
  });
  for (
    const url of [
      "/v1/dead-letters/x%0Arelayer%20started%20OK%0A",
      "/v1/dead-letters/pi_0001",
      "/v1/dead-letters/pi_0001/refund",
      "/v1/dead-letters/sqs/m-1/unreadable",
      "/v1/dead-letters/pubsub%2Fm%0A1%2Funreadable",
      `/v1/dead-letters/${"p".repeat(129)}/settle`,
    ]
  ) {
    const res = await app.request(url, { method: "DELETE", headers: ops });
    assert.equal(res.status, 400, url);
    assert.equal(
      (await res.json()).type,
      "urn:relayer:problem:bad-job-id",
      url,
    );
  }
  assert.deepEqual(lines, []);
});

Deno.test("createApp() refuses (409) the redrive of a dead letter whose intent does not exist, keeps the letter and queues nothing, with a queue or without", async () => {
  for (const queue of [true, false]) {
    const { app, enqueued, store } = await withDeadLetter({ queue });
    await store.putDeadLetter(deadLetter("pi_gone/settle", 0));
    const res = await app.request("/v1/dead-letters/pi_gone/settle/redrive", {
      method: "POST",
      headers: ops,
    });
    assert.equal(res.status, 409, `queue: ${queue}`);
    const problem = await res.json();
    assert.equal(problem.type, "urn:relayer:problem:cannot-redrive");
    assert.match(
      problem.detail,
      /^Cannot redrive pi_gone\/settle as intent pi_gone does not exist: a job for it would only retry "not found" until poisoned again\. Create the intent \(POST \/v1\/intents\), then redrive, or discard the letter$/,
    );
    assert.deepEqual(enqueued, []);
    assert.notEqual(await store.getDeadLetter("pi_gone/settle"), null);
  }
});

Deno.test("createApp() answers a malformed, repeated or unknown query parameter of an ops route with a 400 that says what to send, and removes nothing", async () => {
  const { app, store } = await withDeadLetter();
  await store.createIntent({ id: "pi_0002", state: "settled" });
  await store.putDeadLetter(deadLetter("pi_0002/settle", 0));
  const { version } = (await store.getDeadLetter("pi_0002/settle"))!;
  const letter = "/v1/dead-letters/pi_0002/settle";
  const cases: [string, string, string, RegExp][] = [
    [
      "DELETE",
      `${letter}?version=%20${version}`,
      "bad-version",
      new RegExp(
        `^'version' must be the dead letter's version as GET /v1/dead-letters lists it \\(1-200 printable ASCII characters\\), or left out to remove whatever letter is there: current value is " ${version}"\\.$`,
      ),
    ],
    [
      "DELETE",
      `${letter}?version=${"9".repeat(201)}`,
      "bad-version",
      /current value is "9{100}"…\(201 characters\)\.$/,
    ],
    [
      "DELETE",
      `${letter}?version=${version}&version=${version}`,
      "bad-version",
      /^'version' is given 2 times: send it once\.$/,
    ],
    [
      "DELETE",
      `${letter}?versoin=${version}`,
      "bad-query",
      /^"versoin" is not a parameter of this route: send only 'version'\.$/,
    ],
    [
      "GET",
      "/v1/dead-letters?limit=-1",
      "bad-limit",
      /^'limit' must be an integer in 1\.\.1000 \(default 50\): current value is "-1"\.$/,
    ],
    [
      "GET",
      "/v1/dead-letters?limit=1&limit=1000",
      "bad-limit",
      /^'limit' is given 2 times: send it once\.$/,
    ],
    [
      "GET",
      "/v1/dead-letters?cursor=",
      "bad-cursor",
      /^'cursor' is empty: leave it out for the first page, or send the 'cursor' the previous page answered; a page whose 'cursor' is null was the last, so stop there\.$/,
    ],
    [
      "GET",
      "/v1/dead-letters?cursor=a&cursor=b",
      "bad-cursor",
      /^'cursor' is given 2 times: send it once\.$/,
    ],
    [
      "GET",
      "/v1/dead-letters?cursor=a&cursor=b&cursor=c",
      "bad-cursor",
      /^'cursor' is given 3 times: send it once\.$/,
    ],
    [
      "GET",
      "/v1/dead-letters?limt=5",
      "bad-query",
      /^"limt" is not a parameter of this route: send only 'limit' and 'cursor'\.$/,
    ],
  ];
  for (const [method, url, type, detail] of cases) {
    const res = await app.request(url, { method, headers: ops });
    assert.equal(res.status, 400, `${method} ${url}`);
    const problem = await res.json();
    assert.equal(problem.type, `urn:relayer:problem:${type}`, url);
    assert.match(problem.detail, detail, url);
  }
  assert.notEqual(await store.getDeadLetter("pi_0002/settle"), null);
  // A version of the right shape that is not the letter's is a 409 that
  // names the letter's own, whether it changed or was never one.
  const stale = await app.request(`${letter}?version=bad`, {
    method: "DELETE",
    headers: ops,
  });
  assert.equal(stale.status, 409);
  assert.match(
    (await stale.json()).detail,
    new RegExp(
      `^Cannot discard pi_0002/settle as its dead letter's version is "${version}", not "bad": it changed since it was read, or that was never its version; re-read it`,
    ),
  );
  const removed = await app.request(`${letter}?version=${version}`, {
    method: "DELETE",
    headers: ops,
  });
  assert.equal(removed.status, 200);
});

// Two redrives of one letter at once on two instances over one store:
// both publish (the queue's deduplication id drops the second on QStash; a
// Pub/Sub topic or a Worker's queue keeps it), one removes the letter. The
// loser answered 409 as if it had queued nothing, "re-read it", and an
// operator who then queued the job again by hand put a third on the queue.
for (const backend of BACKENDS) {
  Deno.test(`createApp() answers the loser of two concurrent redrives on two instances 409, saying its job was published all the same [${backend.name}]`, async () => {
    const { store: opened, close } = await backend.open();
    try {
      const published: Job[] = [];
      let started = 0;
      let bothStarted!: () => void;
      const both = new Promise<void>((resolve) => (bothStarted = resolve));
      // Each publish waits for the other's: both read the letter first.
      const publish = async (job: Job) => {
        if (++started === 2) bothStarted();
        await both;
        published.push(job);
      };
      const { app, store } = await withDeadLetter({ store: opened, publish });
      const other = appOn(store, { publish });
      const [a, b] = await Promise.all(
        [app, other].map((instance) =>
          instance.request("/v1/dead-letters/pi_0001/settle/redrive", {
            method: "POST",
            headers: ops,
          })
        ),
      );
      assert.deepEqual([a!.status, b!.status].sort(), [202, 409]);
      assert.equal(published.length, 2);
      // Taken by the other: no retry changes that, so none is asked for.
      assert.equal(
        (a!.status === 409 ? a! : b!).headers.get("retry-after"),
        null,
      );
      const lost = await (a!.status === 409 ? a! : b!).json();
      assert.match(lost.type, /cannot-redrive$/);
      assert.match(lost.detail, /published all the same/);
      assert.match(lost.detail, /pi_0001\/settle:/); // its deduplication id
      await (a!.status === 409 ? b! : a!).body?.cancel();
      assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
    } finally {
      await close();
    }
  });

  // The other order across instances (docs/routes.md): a redrive on
  // another instance whose read of the letter comes after the winner
  // removed it, while the winner is still answering, finds no letter. No
  // store keeps who removed a letter, so it cannot tell the winner from a
  // letter never kept: 404, and nothing published. On one instance it is
  // a 409 (below).
  Deno.test(`createApp() answers a redrive on another instance that reads the letter only after a concurrent redrive removed it 404, publishing nothing [${backend.name}]`, async () => {
    const { store: opened, close } = await backend.open();
    try {
      const published: Job[] = [];
      const publish = (job: Job) => Promise.resolve(void published.push(job));
      const { app, store } = await withDeadLetter({ store: opened, publish });
      const other = appOn(store, { publish });
      let firstRead!: () => void;
      const first = new Promise<void>((resolve) => (firstRead = resolve));
      let removed!: () => void;
      const removal = new Promise<void>((resolve) => (removed = resolve));
      let reads = 0;
      const redrive = store.redrive.bind(store);
      store.redrive = async (...args: Parameters<typeof store.redrive>) => {
        const letter = await redrive(...args);
        removed();
        return letter;
      };
      const getDeadLetter = store.getDeadLetter.bind(store);
      store.getDeadLetter = async (jobId: string) => {
        const read = ++reads;
        if (read === 1) firstRead();
        // The second redrive's read waits for the first's removal.
        if (read === 2) await removal;
        return await getDeadLetter(jobId);
      };
      const request = (instance: typeof app) =>
        instance.request("/v1/dead-letters/pi_0001/settle/redrive", {
          method: "POST",
          headers: ops,
        });
      const a = request(app);
      await first;
      const [b] = await Promise.all([request(other), removal]);
      assert.equal(b.status, 404);
      assert.match(
        (await b.json()).detail,
        /redriven, discarded or resolved since/,
      );
      assert.equal((await a).status, 202);
      await (await a).body?.cancel();
      assert.deepEqual(published, [{ intentId: "pi_0001", kind: "settle" }]);
    } finally {
      await close();
    }
  });
}

Deno.test("createApp() answers the redrive of an unreadable message's letter named by its three segments, as its DELETE is, 400 (nothing to redrive), not 404 as if no route answered", async () => {
  const { app, enqueued, store } = await withDeadLetter();
  await store.putDeadLetter(deadLetter("pubsub/m-1/unreadable", 0));
  for (
    const url of [
      "/v1/dead-letters/pubsub/m-1/unreadable/redrive",
      "/v1/dead-letters/pubsub%2Fm-1%2Funreadable/redrive",
    ]
  ) {
    const res = await app.request(url, { method: "POST", headers: ops });
    assert.equal(res.status, 400, url);
    const body = await res.json();
    assert.equal(body.type, "urn:relayer:problem:bad-job-id", url);
    assert.match(body.detail, /nothing to redrive/, url);
  }
  const wrong = await app.request(
    "/v1/dead-letters/pubsub/m-1/unreadable/redrive",
    { method: "DELETE", headers: ops },
  );
  assert.equal(wrong.status, 405);
  assert.equal(wrong.headers.get("allow"), "POST");
  assert.deepEqual(enqueued, []);
  assert.notEqual(await store.getDeadLetter("pubsub/m-1/unreadable"), null);
});

// Two redrives of one letter on one instance (an operator's double click,
// a retried request reaching the same instance), the second's read, if it
// made one, held until the first removed the letter. DESIGN §16: one wins;
// the other answers 409 and enqueues nothing. It used to read no letter
// and answer 404, as if none had been kept.
for (const backend of BACKENDS) {
  Deno.test(`createApp() answers a redrive of a letter whose redrive runs on the same instance 409, reading and publishing nothing, even where its read would come after the removal [${backend.name}]`, async () => {
    const { store: opened, close } = await backend.open();
    try {
      const published: Job[] = [];
      const { app, store } = await withDeadLetter({
        store: opened,
        publish: (job) => Promise.resolve(void published.push(job)),
      });
      let firstRead!: () => void;
      const first = new Promise<void>((resolve) => (firstRead = resolve));
      let secondArrived!: () => void;
      const arrived = new Promise<void>((resolve) => (secondArrived = resolve));
      let removed!: () => void;
      const removal = new Promise<void>((resolve) => (removed = resolve));
      let reads = 0;
      const getDeadLetter = store.getDeadLetter.bind(store);
      store.getDeadLetter = async (jobId: string) => {
        const read = ++reads;
        if (read === 1) firstRead();
        if (read === 2) {
          // The second redrive's read comes after the first's removal.
          secondArrived();
          await removal;
        }
        return await getDeadLetter(jobId);
      };
      const redrive = store.redrive.bind(store);
      store.redrive = async (...args: Parameters<typeof store.redrive>) => {
        // The first removes the letter only once the second has read or
        // answered: both are under way at once.
        await arrived;
        const letter = await redrive(...args);
        removed();
        return letter;
      };
      const request = () =>
        app.request("/v1/dead-letters/pi_0001/settle/redrive", {
          method: "POST",
          headers: ops,
        });
      const a = request();
      await first;
      const b = await request();
      secondArrived();
      const problem = await b.json();
      assert.equal(b.status, 409, JSON.stringify(problem));
      assert.equal(problem.type, "urn:relayer:problem:cannot-redrive");
      assert.match(
        problem.detail,
        /^Cannot redrive pi_0001\/settle as another redrive of it is under way on this instance/,
      );
      // The one 409 a retry can change, once the first has answered.
      assert.equal(b.headers.get("retry-after"), "1");
      assert.equal((await a).status, 202);
      await (await a).body?.cancel();
      assert.equal(reads, 1); // the second read nothing
      assert.deepEqual(published, [{ intentId: "pi_0001", kind: "settle" }]);
      assert.equal(await store.getDeadLetter("pi_0001/settle"), null);
      // Once the first has answered, a redrive reads again: the letter is
      // gone (404), and nothing more is published.
      const after = await request();
      assert.equal(after.status, 404);
      await after.body?.cancel();
      assert.deepEqual(published, [{ intentId: "pi_0001", kind: "settle" }]);
    } finally {
      await close();
    }
  });
}

// A 503 redrive-failed says "try again. If it did complete after all, the
// retry answers 404": the retry, sent once the 503 is read, is not taken
// for a redrive still under way on this instance.
for (const backend of BACKENDS) {
  Deno.test(`createApp() goes ahead with a redrive retried after its 503 redrive-failed: 202 where it had not completed, 404 where it had [${backend.name}]`, async () => {
    const { store: opened, close } = await backend.open();
    try {
      const published: Job[] = [];
      let fail = true;
      const { app, store } = await withDeadLetter({
        store: opened,
        publish: (job) => {
          if (fail) return Promise.reject(new Error("QStash answered 500"));
          return Promise.resolve(void published.push(job));
        },
        log: () => {},
      });
      const request = () =>
        app.request("/v1/dead-letters/pi_0001/settle/redrive", {
          method: "POST",
          headers: ops,
        });
      const failed = await request();
      assert.equal(failed.status, 503);
      const problem = await failed.json();
      assert.equal(problem.type, "urn:relayer:problem:redrive-failed");
      assert.match(
        problem.detail,
        /try again\. If it did complete after all, the retry answers 404/,
      );
      fail = false;
      const retried = await request();
      assert.equal(retried.status, 202);
      await retried.body?.cancel();
      assert.deepEqual(published, [{ intentId: "pi_0001", kind: "settle" }]);
      // A removal that landed, its answer lost: 503, then the retry's 404.
      await store.putDeadLetter(deadLetter("pi_0001/settle", 1));
      const redrive = store.redrive.bind(store);
      store.redrive = async (...args: Parameters<typeof store.redrive>) => {
        await redrive(...args);
        throw new Error("the connection dropped before the answer");
      };
      const lost = await request();
      assert.equal(lost.status, 503);
      await lost.body?.cancel();
      store.redrive = redrive;
      const after = await request();
      assert.equal(after.status, 404);
      await after.body?.cancel();
    } finally {
      await close();
    }
  });
}
