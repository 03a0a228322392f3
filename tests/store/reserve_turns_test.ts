/**
 * The turns of `reserveInTurn()` (store/_reserve_turns.ts) over a client
 * whose `reserve()`s settle when the test says, and whose pool's closes it
 * makes: a close passes the turn on once, and the `reserve()` it passed
 * over settling later passes nothing more; a rejected `reserve()` passes
 * the turn on as a served one does; and a settled turn is held by nothing
 * (its watch of the closes ended). The writes over a real server are in
 * postgres_reserve_turns_test.ts.
 *
 * @module
 */

import assert from "node:assert/strict";
import { plainInTurn, reserveInTurn } from "../../store/_reserve_turns.ts";

/** A client of `reserve()`s that wait until settled by hand, and closes made by hand. */
function client() {
  const options: { onclose?: (id: number) => void } = {};
  const waiting: {
    resolve(connection: string): void;
    reject(error: Error): void;
  }[] = [];
  return {
    client: {
      options,
      reserve: () =>
        new Promise<string>((resolve, reject) =>
          void waiting.push({ resolve, reject })
        ),
    },
    waiting,
    /** A connection of the pool closed, as postgres.js calls `onclose`. */
    close: () => options.onclose?.(1),
  };
}

/** Lets every microtask queued so far (and those they queue) run. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

/**
 * Runs `body` apart, where the garbage collector can be asked to run,
 * after `client` (a stand-in of postgres.js's) and `reserveInTurn` are
 * declared: `body` fills `given` with a `WeakRef` of each `gaveUp` it
 * passed, and the answer is how many of them are still held after it.
 */
async function heldAfterGc(client: string, body: string): Promise<number> {
  const module = new URL("../../store/_reserve_turns.ts", import.meta.url);
  const script = await Deno.makeTempFile({ suffix: ".ts" });
  try {
    await Deno.writeTextFile(
      script,
      `import { reserveInTurn } from ${JSON.stringify(module.href)};
const client = ${client};
const given: WeakRef<() => boolean>[] = [];
${body}
const gc = (globalThis as unknown as { gc(): void }).gc;
for (let i = 0; i < 2; i++) {
  await new Promise((resolve) => setTimeout(resolve, 0));
  gc();
}
console.log(given.filter((ref) => ref.deref() !== undefined).length);
`,
    );
    const { success, stdout, stderr } = await new Deno.Command(
      Deno.execPath(),
      {
        args: [
          "run",
          "--quiet",
          "--v8-flags=--expose-gc",
          "--allow-read",
          script,
        ],
        stdout: "piped",
        stderr: "piped",
      },
    ).output();
    assert.ok(success, new TextDecoder().decode(stderr));
    return Number(new TextDecoder().decode(stdout).trim());
  } finally {
    await Deno.remove(script);
  }
}

Deno.test("reserveInTurn() passes the turn on once at a close, and not again when the reserve() it passed over settles", async () => {
  const { client: sql, waiting, close } = client();
  const answers = ["a", "b", "c"].map(() => reserveInTurn(sql, () => false));
  await settle();
  assert.equal(waiting.length, 1, "one reserve() waits at a time");
  // A close may have stranded the first (porsager/postgres#1195): the
  // second asks meanwhile.
  close();
  await settle();
  assert.equal(waiting.length, 2);
  waiting[0]!.resolve("a");
  await settle();
  assert.equal(waiting.length, 2, "the turn was passed on twice");
  waiting[1]!.resolve("b");
  await settle();
  assert.equal(waiting.length, 3);
  waiting[2]!.resolve("c");
  assert.deepEqual(await Promise.all(answers), ["a", "b", "c"]);
});

Deno.test("reserveInTurn() passes the turn on when a reserve() rejects, and rejects with its error", async () => {
  const { client: sql, waiting } = client();
  const first = reserveInTurn(sql, () => false);
  const second = reserveInTurn(sql, () => false);
  await settle();
  assert.equal(waiting.length, 1);
  const refused = new Error("refused");
  waiting[0]!.reject(refused);
  await assert.rejects(first, (error) => error === refused);
  await settle();
  assert.equal(waiting.length, 2, "the next reserve() never asked");
  waiting[1]!.resolve("b");
  assert.equal(await second, "b");
});

Deno.test("reserveInTurn() keeps nothing of a reserve() once it settled: its watch of the pool's closes ends with it", async () => {
  // Whether what each of 100 turns was given is still held after them.
  const held = await heldAfterGc(
    `{ options: {}, reserve: () => Promise.resolve("connection") }`,
    `for (let i = 0; i < 100; i++) {
  const gaveUp = () => false;
  given.push(new WeakRef(gaveUp));
  await reserveInTurn(client, gaveUp);
}`,
  );
  // The last turn's may outlive it a little; not one a turn.
  assert.ok(held <= 5, `${held} of 100 turns' callers still held`);
});

Deno.test("reserveInTurn() passes the turn over 20,000 callers that gave up while it was held, and serves the next", async () => {
  const { client: sql, waiting } = client();
  const first = reserveInTurn(sql, () => false);
  // Writes that gave up while the first reserve() waited (each past its
  // connectionWaitMs): passed over one after another when the turn passes.
  const passedOver = Array.from({ length: 20_000 }, () => {
    let gave = false;
    const answer = reserveInTurn(sql, () => gave);
    gave = true;
    return answer;
  });
  const next = reserveInTurn(sql, () => false);
  await settle();
  assert.equal(waiting.length, 1);
  waiting[0]!.resolve("a");
  assert.equal(await first, "a");
  await settle();
  assert.equal(waiting.length, 2, "the next caller never asked");
  waiting[1]!.resolve("b");
  assert.equal(await next, "b");
  for (const answer of await Promise.all(passedOver)) {
    assert.equal(answer, null);
  }
});

Deno.test("reserveInTurn() keeps nothing of a caller that gave up while the turn is held", async () => {
  // A reserve() that waits for long (every connection of the pool busy)
  // holds the turn, and the writes that wait behind it give up, one a
  // connectionWaitMs, for as long as it waits.
  const held = await heldAfterGc(
    `{ options: {}, reserve: () => new Promise(() => {}) }`,
    `void reserveInTurn(client, () => false);
for (let i = 0; i < 1000; i++) {
  let gave = false;
  const gaveUp = () => gave;
  given.push(new WeakRef(gaveUp));
  void reserveInTurn(client, gaveUp);
  gave = true;
}`,
  );
  assert.ok(held <= 64, `${held} of 1,000 callers that gave up still held`);
});

Deno.test("reserveInTurn() lets go of callers that gave up after a turn served many: the queue grows again from what is left", async () => {
  const { client: sql, waiting } = client();
  void reserveInTurn(sql, () => false);
  // 1,000 writes wait behind the first, and are served one by one.
  const served = Array.from(
    { length: 1_000 },
    () => reserveInTurn(sql, () => false),
  );
  for (let i = 0; i <= 1_000; i++) {
    // The next reserve() is made a few microtasks after the last settled.
    for (let tick = 0; tick < 8 && waiting.length <= i; tick++) {
      await Promise.resolve();
    }
    waiting[i]!.resolve(`c${i}`);
  }
  await Promise.all(served);
  // Then a reserve() holds the turn, and 1,000 writes behind it give up:
  // they are let go as the queue grows, not kept for the 2,000 the queue
  // once had room for.
  void reserveInTurn(sql, () => false);
  const gaveUp = Array.from({ length: 1_000 }, () => {
    let gave = false;
    const answer = reserveInTurn(sql, () => gave);
    gave = true;
    return answer;
  });
  let answered = 0;
  for (const answer of gaveUp) void answer.then(() => answered++);
  await settle();
  assert.ok(answered >= 1_000 - 64, `${1_000 - answered} of 1,000 still kept`);
});

Deno.test("reserveInTurn() makes no reserve() for a caller that gave up before it asked, the turn free", async () => {
  const { client: sql, waiting } = client();
  assert.equal(await reserveInTurn(sql, () => true), null);
  await settle();
  assert.equal(waiting.length, 0, "a reserve() was made");
  // The turn was not taken: the next caller is served.
  const next = reserveInTurn(sql, () => false);
  await settle();
  assert.equal(waiting.length, 1);
  waiting[0]!.resolve("a");
  assert.equal(await next, "a");
});

/** `count` callers of `sql` behind the turn, each giving up once asked if `gave`, and how many times they were asked. */
function callers(
  sql: Parameters<typeof reserveInTurn>[0],
  count: number,
  gave: boolean,
) {
  const asked = { times: 0 };
  const answers = Array.from({ length: count }, () => {
    let given = false;
    const answer = reserveInTurn(sql, () => {
      asked.times++;
      return given;
    });
    given = gave;
    return answer;
  });
  return { answers, asked };
}

/** How many of `answers` have not settled yet. */
async function unanswered(answers: Promise<unknown>[]): Promise<number> {
  let answered = 0;
  for (const answer of answers) void answer.then(() => answered++);
  await settle();
  return answers.length - answered;
}

Deno.test("reserveInTurn() asks each waiting caller a bounded number of times, and keeps at most as many that gave up as callers still waiting", async () => {
  const { client: sql } = client();
  void reserveInTurn(sql, () => false);
  // 100 writes wait behind a reserve() that holds the turn, then 1,000
  // give up behind them.
  const waiting = callers(sql, 100, false);
  const gaveUp = callers(sql, 1_000, true);
  // Let go whenever the queue doubled: each caller asked O(1) times, not
  // once for every caller that came after it (100,000 times here).
  const asked = waiting.asked.times + gaveUp.asked.times;
  assert.ok(asked <= 5 * 1_100, `asked ${asked} times`);
  // The queue holds at most twice the 100 still waiting.
  const kept = await unanswered(gaveUp.answers);
  assert.ok(kept < 100, `${kept} of 1,000 that gave up still kept`);
});

Deno.test("reserveInTurn() keeps at most as many callers that gave up as callers still waiting when the turn last passed", async () => {
  const { client: sql, waiting } = client();
  void reserveInTurn(sql, () => false);
  // 1,000 writes wait, and 900 of them are served one by one.
  const { answers } = callers(sql, 1_000, false);
  for (let i = 0; i <= 900; i++) {
    for (let tick = 0; tick < 8 && waiting.length <= i; tick++) {
      await Promise.resolve();
    }
    waiting[i]!.resolve(`c${i}`);
  }
  await settle();
  assert.equal(await unanswered(answers), 100);
  // Behind the 100 left (the next of them holding the turn), 250 give up:
  // let go once the queue doubled from what was left, not from the 1,000
  // it once held.
  const gaveUp = callers(sql, 250, true);
  const kept = await unanswered(gaveUp.answers);
  assert.ok(kept < 100, `${kept} of 250 that gave up still kept`);
});

/**
 * `client()`'s stand-in made callable as postgres.js's is: its queries
 * (the tagged template, `unsafe()`) are handed to the pool as postgres.js
 * 3.4.9 hands them (`handle()` calls `handler` once), each logged by its
 * text in `sent` then; `begin()` is logged when called, and its `BEGIN`
 * a microtask later, when postgres.js hands it to the pool.
 */
function callable() {
  const { client: base, waiting, close } = client();
  const sent: string[] = [];
  const query = (text: string, args: unknown[], simple = false) => ({
    args,
    options: { simple },
    handler: () => void sent.push(text),
    handle() {
      this.handler();
    },
    execute() {
      this.handle();
      return Promise.resolve([]);
    },
  });
  const sql = Object.assign(
    (strings: TemplateStringsArray, ...values: unknown[]) =>
      query(strings.join("?"), values),
    {
      ...base,
      reserve: () => {
        sent.push("reserve()");
        return base.reserve();
      },
      unsafe: (text: string, args: unknown[] = []) =>
        query(text, args, args.length === 0),
      begin: async () => {
        sent.push("begin()");
        await 1;
        sent.push("BEGIN");
        return "begun";
      },
    },
  );
  return { sql, waiting, close, sent };
}

Deno.test("plainInTurn() hands a query with values to the pool at once while no reserve() waits, and holds one back while one does until the turn passes, before the next reserve()", async () => {
  const { sql, waiting, sent } = callable();
  const plain = plainInTurn(sql);
  plain`SELECT ${1}`.handle();
  assert.deepEqual(sent, ["SELECT ?"]);
  const first = reserveInTurn(sql, () => false);
  const second = reserveInTurn(sql, () => false);
  await settle();
  plain`SELECT ${2}`.handle();
  plain.unsafe("SELECT $1", [3]).handle();
  await settle();
  assert.deepEqual(sent, ["SELECT ?", "reserve()"], "held back");
  waiting[0]!.resolve("a");
  await settle();
  // Out in order once the turn passed, before the next reserve() asked.
  assert.deepEqual(sent, [
    "SELECT ?",
    "reserve()",
    "SELECT ?",
    "SELECT $1",
    "reserve()",
  ]);
  waiting[1]!.resolve("b");
  assert.deepEqual(await Promise.all([first, second]), ["a", "b"]);
  plain`SELECT ${4}`.handle();
  assert.equal(sent.length, 6, "at once: no reserve() waits");
});

Deno.test("plainInTurn() hands a query without values to the pool at once while a reserve() waits: sent whole, it is answered before the write's", async () => {
  const { sql, waiting, sent } = callable();
  const plain = plainInTurn(sql);
  const reserved = reserveInTurn(sql, () => false);
  await settle();
  plain`SELECT 1`.handle();
  plain.unsafe("SELECT 2").handle();
  assert.deepEqual(sent, ["reserve()", "SELECT 1", "SELECT 2"]);
  waiting[0]!.resolve("a");
  assert.equal(await reserved, "a");
});

Deno.test("plainInTurn() calls begin() at once while no reserve() waits, and, while one does, once the turn passes, before the next reserve()", async () => {
  const { sql, waiting, sent } = callable();
  const plain = plainInTurn(sql);
  assert.equal(await plain.begin(), "begun");
  const first = reserveInTurn(sql, () => false);
  const second = reserveInTurn(sql, () => false);
  await settle();
  const begun = plain.begin();
  await settle();
  assert.deepEqual(sent, ["begin()", "BEGIN", "reserve()"]);
  waiting[0]!.resolve("a");
  assert.equal(await begun, "begun");
  await settle();
  assert.deepEqual(sent, [
    "begin()",
    "BEGIN",
    "reserve()",
    "begin()",
    "BEGIN",
    "reserve()",
  ]);
  waiting[1]!.resolve("b");
  assert.deepEqual(await Promise.all([first, second]), ["a", "b"]);
});

Deno.test("reserveInTurn() asks for its reserve() only after the BEGIN of a begin() called just before is handed to the pool", async () => {
  const { sql, waiting, sent } = callable();
  const begun = plainInTurn(sql).begin();
  const reserved = reserveInTurn(sql, () => false);
  await settle();
  assert.deepEqual(sent, ["begin()", "BEGIN", "reserve()"]);
  waiting[0]!.resolve("a");
  assert.deepEqual(await Promise.all([begun, reserved]), ["begun", "a"]);
});

Deno.test("plainInTurn() holds back nothing for good behind a reserve() a close stranded: the close's probes, not held back, pass the turn", async () => {
  const { sql, waiting, close, sent } = callable();
  const plain = plainInTurn(sql);
  void reserveInTurn(sql, () => false);
  await settle();
  plain`SELECT ${"held"}`.handle();
  // The reserve() may be stranded (porsager/postgres#1195): the probes go,
  // one more than the pool's one connection, and the turn passes.
  close();
  await settle();
  assert.deepEqual(sent, [
    "reserve()",
    "SELECT 1",
    "SELECT 1",
    "SELECT ?",
  ]);
  assert.equal(waiting.length, 1, "no other reserve() was asked for");
});

Deno.test("plainInTurn() is one client per client, the same for everything but queries and begin()", () => {
  const { sql } = callable();
  assert.equal(plainInTurn(sql), plainInTurn(sql));
  assert.equal(plainInTurn(sql).options, sql.options);
  assert.equal(plainInTurn(sql).reserve, sql.reserve);
});
