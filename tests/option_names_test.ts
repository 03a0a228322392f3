import assert from "node:assert/strict";
import postgres from "postgres";
import {
  ConflictError,
  createRelayer,
  HttpSender,
  MemoryStore,
  ScriptedSender,
} from "../mod.ts";
import { createQueueHandler } from "../cloudflare/queue_handler.ts";
import { KvStore } from "../store/kv.ts";
import { PostgresStore } from "../store/postgres.ts";
import { createApp, googleJwks, qstashPublisher } from "../webhook/app.ts";

// Each constructor is given its options with one name misspelt, the kind of
// slip TypeScript catches only in an object literal (a JavaScript caller,
// options spread from a settings object). Before this check, each fell back
// to its default in silence.

const store = new MemoryStore();
const sender = new ScriptedSender({});
const kv = {
  atomic: () => {
    throw new Error("no I/O");
  },
  getMany: () => Promise.reject(new Error("no I/O")),
} as unknown as ConstructorParameters<typeof KvStore>[0];
// Never connects: postgres.js opens a connection on the first query.
const sql = postgres("postgres://user@127.0.0.1:9/db", { max: 1 });

/** Calls `build` with `options` and returns the TypeError's message. */
function refusal(build: (options: never) => unknown, options: unknown) {
  try {
    build(options as never);
  } catch (error) {
    assert.ok(error instanceof TypeError, String(error));
    return error.message;
  }
  assert.fail("it took the options");
}

const cases: {
  name: string;
  build: (options: never) => unknown;
  good: Record<string, unknown>;
  typo: string;
  names: string;
}[] = [
  {
    name: "createRelayer()",
    build: (options) => createRelayer(options),
    good: { store, sender, leaseMs: 30_000 },
    typo: "leaseMS",
    names: "store, sender, policy, now, random, leaseMs, clockSkewMs",
  },
  {
    name: "createApp()",
    build: (options) => createApp(options),
    good: { store, sender, leaseMs: 30_000, opsToken: "t".repeat(32) },
    typo: "opsTokn",
    names:
      "store, sender, policy, now, random, leaseMs, clockSkewMs, qstash, pubsub, pubsubDeadLetter, webhookSecret, webhookSecretNext, opsToken, opsTokenNext, insecureDev, maxBodyBytes, bodyTimeoutMs, log, enqueue, redriveTo, monotonicNow",
  },
  {
    name: "KvStore",
    build: (options) => new KvStore(kv, options),
    good: { prefix: ["tenant"] },
    typo: "prefx",
    names: "prefix, enqueueOptions",
  },
  {
    name: "PostgresStore",
    build: (options) => new PostgresStore(sql, options),
    good: { schema: "tenant" },
    typo: "schemaName",
    names: "schema, connectionWaitMs",
  },
  {
    name: "HttpSender",
    build: (options) => new HttpSender(options),
    good: { url: "http://127.0.0.1:9", timeoutMs: 1_000 },
    typo: "timeout",
    names: "url, timeoutMs, fetch, headers",
  },
  {
    name: "qstashPublisher()",
    build: (options) => qstashPublisher(options),
    good: { token: "t", publicUrl: "https://relayer.example", retries: 3 },
    typo: "baseURL",
    names: "token, publicUrl, retries, baseUrl, timeoutMs",
  },
  {
    name: "googleJwks()",
    build: (options) => googleJwks(options),
    good: { url: "https://keys.example/certs" },
    typo: "uri",
    names: "url, fetch, now",
  },
  {
    name: "createQueueHandler()",
    build: (options) => createQueueHandler(options),
    good: {
      relayer: createRelayer({ store, sender }),
      maxRetries: 9,
      deadLetterQueue: "relayer-jobs-dlq",
      deadLetterMaxRetries: 100,
    },
    typo: "deadLetterQeue",
    names:
      "relayer, maxRetries, deadLetterQueue, deadLetterMaxRetries, messageRetentionMs, deadLetterMessageRetentionMs, deliveryDelayMs, concurrency, log",
  },
];

for (const { name, build, good, typo, names } of cases) {
  Deno.test(`${name} refuses an option it does not read, naming it and the ones it reads, instead of falling back to a default`, () => {
    assert.ok(build(good as never)); // the same options, spelt right
    const what = refusal(build, { ...good, [typo]: 1 });
    assert.match(
      what,
      new RegExp(`as "${typo}" is not one of its options \\(`),
    );
    assert.ok(what.endsWith(`(${names}): check its spelling`), what);
    // Options that are not an object say so, not the engine.
    assert.match(
      refusal(build, null),
      /as its options must be an object such as \{.*\}: current value is null/,
    );
  });
}

Deno.test("createApp() hands the relayer's own options to it", () => {
  // Each reaches createRelayer's checks: none is lost on the way.
  assert.throws(
    () => createApp({ store, sender, leaseMs: 0 }),
    /Cannot create relayer as 'leaseMs'/,
  );
  assert.throws(
    () => createApp({ store, sender, policy: { maxDeliveries: 0 } }),
    /maxDeliveries/,
  );
  assert.throws(
    () => createApp({ store, sender, random: 5 as unknown as () => number }),
    /Cannot create relayer as 'random' must be a function/,
  );
});

// The relayer's per-call option bags, the same slip one call later: a
// misspelt `message` turned the late-copy guard off for that delivery, and
// a misspelt `deliveries` reached the count check as undefined.
const relayer = createRelayer({ store, sender });
const job = { kind: "settle", intentId: "pi_0001" } as const;
const calls: {
  name: string;
  call: (options: unknown) => Promise<unknown>;
  good: Record<string, unknown>;
  typo: string;
  names: string;
  optional: boolean;
}[] = [
  {
    name: "deliver()",
    call: (options) => relayer.deliver(job, 1, options as never),
    good: { countAs: "pi_0001/settle" },
    typo: "mesage",
    names: "claim, countAs, message",
    optional: true,
  },
  {
    name: "giveUp()",
    call: (options) => relayer.giveUp(job, options as never),
    good: { deliveries: 3, queue: { queue: "generic", messageId: "m1" } },
    typo: "delivery",
    names: "deliveries, queue, claim",
    optional: false,
  },
  {
    name: "redrive()",
    // The letter's intent does not exist: refused once the options pass.
    call: (options) =>
      relayer.redrive("pi_0001/settle", options as never).catch((error) => {
        if (error instanceof ConflictError) return null;
        throw error;
      }),
    good: {},
    typo: "dedupe",
    names: "publish, message",
    optional: true,
  },
  {
    name: "discard()",
    call: (options) => relayer.discard("pi_0001/settle", options as never),
    good: { version: "1" },
    typo: "versoin",
    names: "version",
    optional: true,
  },
  {
    name: "keepUnreadable()",
    call: (options) => relayer.keepUnreadable(options as never),
    good: { queue: "local", raw: "{", detail: "not JSON" },
    typo: "detials",
    names: "queue, id, raw, seen, detail, claim",
    optional: false,
  },
];

for (const { name, call, good, typo, names, optional } of calls) {
  Deno.test(`relayer.${name} refuses an option it does not read, before it reads or writes anything`, async () => {
    await call(good); // the same options, spelt right
    const before = JSON.stringify(await store.getDeadLetter("pi_0001/settle"));
    await assert.rejects(
      () => call({ ...good, [typo]: 1 }),
      (error: unknown) => {
        assert.ok(error instanceof TypeError, String(error));
        assert.match(
          error.message,
          new RegExp(`as "${typo}" is not one of its options \\(`),
        );
        assert.ok(
          error.message.endsWith(`(${names}): check its spelling`),
          error.message,
        );
        return true;
      },
    );
    assert.equal(
      JSON.stringify(await store.getDeadLetter("pi_0001/settle")),
      before,
    );
    if (optional) await call(undefined);
    await assert.rejects(() => call(null), /its options must be an object/);
  });
}

Deno.test("createApp() refuses a misspelt redriveTo option at once, not at an operator's first redrive", () => {
  assert.equal(
    refusal(
      (options) => createApp({ store, sender, redriveTo: options }),
      { publsh: () => Promise.resolve() },
    ),
    'Cannot create app with this redriveTo as "publsh" is not one of its options (publish, message): check its spelling',
  );
  assert.ok(
    createApp({
      store,
      sender,
      redriveTo: { publish: () => Promise.resolve() },
    }),
  );
});

Deno.test("deliver() and giveUp() refuse a queue message's ids with a misspelt field: the message would have no marks, and a late copy of it would send", async () => {
  const typo = { queue: "qstash", mesageId: "msg_1" };
  await assert.rejects(
    () => relayer.deliver(job, 1, { message: typo as never }),
    new TypeError(
      'Cannot deliver this message as "mesageId" is not one of its options (queue, messageId, dlqId): check its spelling',
    ),
  );
  await assert.rejects(
    () => relayer.giveUp(job, { deliveries: 3, queue: typo as never }),
    new TypeError(
      'Cannot give up on this queue message as "mesageId" is not one of its options (queue, messageId, dlqId): check its spelling',
    ),
  );
  await relayer.deliver(job, 1, {
    message: { queue: "qstash", messageId: "msg_1" },
  });
});
