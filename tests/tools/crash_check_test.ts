/**
 * The crash test's overlap check (I5): every pair of sends, so a send in
 * flight at a kill, between two others, does not hide their overlap; its
 * booking of answers (under the publication they came in; Pub/Sub's
 * counted pushes and refused stale tokens); its count of each process's
 * fetches of Google's keys; the quiet after an acked give-up; what the
 * operator makes of a resolution's answer; the order of an intent's reads
 * (I3); its `--trace` flag; when it starts a server again that refused
 * to start; with several instances, whose sends the signer saw and
 * where the queue sends a request; how it reads a page of dead letters
 * whose items are not all letters, a delivery's answer and an intent's
 * view that are not objects; which answers to a replay it excuses under
 * database faults; the signer stub's answer to a `/send` whose
 * body a kill cut; and the line a failed run prints (a fault of the
 * tool's own followed by its stack).
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  type AnswerBody,
  answerBody,
  type Attempt,
  backwardMove,
  bookAnswers,
  failedHeadline,
  fetchesByGeneration,
  fleetKeyFetchesAllowed,
  instanceSenderUrl,
  isIntentView,
  type JobRecord,
  keyFetchesAllowed,
  killSegment,
  LoopWatch,
  namesMessage,
  operatorCall,
  outagesIn,
  overlappingSends,
  parseOptions,
  pickInstance,
  quietAfterGiveUp,
  readLetterPage,
  recoveryLate,
  replayAnswer,
  resolveAnswer,
  SentOrder,
  settledBehindCutSend,
  signerPath,
  SignerStub,
  STALL_CATCH_UP_MS,
  START_TRIES,
  startAgain,
  startMetFault,
  stoodStill,
  storeFailed,
  unclearOverlap,
} from "../../tools/crash.ts";

const send = (arrivedAt: number, answeredAt: number | null) => ({
  arrivedAt,
  answeredAt,
});

Deno.test("overlappingSends() finds two sends that overlap even when a send spanning a kill lies between them", () => {
  const kills = [{ from: 150, to: 160 }];
  // 1 runs 0..100; 2 arrives at 10 and is in flight at the kill; 3 arrives
  // at 50, while 1 is in flight: a neighbours-only check skipped both pairs
  // with 2, and never compared 1 with 3.
  const sends = [send(0, 100), send(10, 200), send(50, 60)];
  assert.deepEqual(overlappingSends(sends, kills), [0, 2]);
});

Deno.test("overlappingSends() passes sends one after another, and pairs where one was in flight at a kill", () => {
  assert.equal(
    overlappingSends([send(0, 10), send(10, 20), send(25, null)], []),
    undefined,
  );
  // 2 arrives while 1 is in flight, but 1 died with the process.
  assert.equal(
    overlappingSends([send(0, null), send(50, 60)], [{ from: 20, to: 30 }]),
    undefined,
  );
});

Deno.test("overlappingSends() passes, and says why, two sends the stub stamped together after a stall of its loop longer than the Sender timeout", () => {
  // The stub's loop stood still from 500 to 1,100 (600 ms): the service
  // gave up on /send 1 at its 200 ms timeout, then rescued it; the stub
  // served both when it came back, /send 2 while /send 1's body was read.
  const clock = { senderTimeoutMs: 200, leaseMs: 500 };
  const sends = [send(1_100, 1_102), send(1_101, 1_103)];
  const unclear: string[] = [];
  assert.equal(
    overlappingSends(sends, [], {
      ...clock,
      stalls: [{ from: 500, to: 1_100 }],
      unclear,
    }),
    undefined,
  );
  assert.deepEqual(unclear, [
    "/send 2 arrived while /send 1 was in flight, but both reached the signer stub across a 600ms stall of the tool's own event loop, longer than the 200ms Sender timeout",
  ]);
  // Without the stall, or with one no longer than the timeout, it is an overlap.
  assert.deepEqual(overlappingSends(sends, [], { ...clock, stalls: [] }), [
    0,
    1,
  ]);
  assert.deepEqual(
    overlappingSends(sends, [], {
      ...clock,
      stalls: [{ from: 900, to: 1_100 }],
    }),
    [0, 1],
  );
  // A send stamped longer after the stall than the loop's catch-up was
  // served by a loop running again: an overlap.
  const late = 1_100 + STALL_CATCH_UP_MS + 1;
  assert.deepEqual(
    overlappingSends([send(1_100, late + 5), send(late, late + 6)], [], {
      ...clock,
      stalls: [{ from: 500, to: 1_100 }],
    }),
    [0, 1],
  );
  // Both reached the stub before the stall, stamped by a loop that ran:
  // the stall while the first was in flight (held within a longer lease)
  // is no reason to doubt their overlap.
  assert.deepEqual(
    overlappingSends([send(400, 1_102), send(450, 1_103)], [], {
      ...clock,
      leaseMs: 2_000,
      stalls: [{ from: 500, to: 1_100 }],
    }),
    [0, 1],
  );
  // The first already answered when the stall began: no stall between them.
  assert.equal(
    unclearOverlap(send(100, 499), send(498, 500), {
      ...clock,
      stalls: [{ from: 500, to: 1_100 }],
    }),
    undefined,
  );
});

Deno.test("overlappingSends() passes a pair whose first send was held at the stub past the lease, and only then", () => {
  const clock = { senderTimeoutMs: 200, leaseMs: 500, stalls: [] };
  // Its sender (or the stub) stood still 600 ms mid-request: the lease
  // lapsed, and another delivery rescued on the same nonce meanwhile.
  assert.equal(
    unclearOverlap(send(0, 600), send(550, 551), clock),
    "the first was held at the signer stub for 600ms, past the 500ms lease",
  );
  assert.equal(
    overlappingSends([send(0, 600), send(550, 551)], [], clock),
    undefined,
  );
  // Held 400 ms, within the lease: the lease should have kept the second out.
  assert.deepEqual(
    overlappingSends([send(0, 400), send(350, 351)], [], clock),
    [0, 1],
  );
  // Never answered, and no kill: in flight to the end, an overlap.
  assert.deepEqual(
    overlappingSends([send(0, null), send(900, 901)], [], clock),
    [0, 1],
  );
});

Deno.test("LoopWatch keeps a stall of the tool's loop, and none while it runs", async () => {
  const watch = new LoopWatch(5, 100);
  watch.start();
  try {
    await new Promise((resolve) => setTimeout(resolve, 60));
    assert.equal(watch.stalls.length, 0);
    const from = performance.now();
    while (performance.now() - from < 300) {
      // the loop stands still
    }
    await new Promise((resolve) => setTimeout(resolve, 30));
  } finally {
    watch.stop();
  }
  assert.equal(watch.stalls.length, 1);
  const [stall] = watch.stalls;
  assert.ok(stall!.to - stall!.from >= 300, JSON.stringify(stall));
});

Deno.test("overlappingSends() with several instances passes only the sends of the instance a kill hit", () => {
  // Instance 0 is killed from 150 to 160; instance 1 keeps serving.
  const kills = [{ from: 150, to: 160, instance: 0, generation: 1 }];
  const of = (
    instance: number,
    arrivedAt: number,
    answeredAt: number | null,
  ) => ({
    arrivedAt,
    answeredAt,
    instance,
  });
  // Two sends of instance 1 overlap during the other's kill: no lease of
  // theirs died, so their overlap is flagged.
  assert.deepEqual(
    overlappingSends([of(1, 100, 200), of(1, 155, 170)], kills),
    [0, 1],
  );
  // A send of instance 0 cut by its kill, then one of instance 1 while it
  // was still unanswered (its lease lapsed): passed.
  assert.equal(
    overlappingSends([of(0, 100, null), of(1, 700, 720)], kills),
    undefined,
  );
});

Deno.test("signerPath() reads back the instance each of several reaches the signer as, and a path of one instance names none", () => {
  const base = "http://127.0.0.1:9000";
  for (const index of [0, 1, 2]) {
    const url = new URL(`${instanceSenderUrl(base, index)}/send`);
    assert.deepEqual(signerPath(url.pathname), {
      instance: index,
      pathname: "/send",
    });
    const receipt = new URL(`${instanceSenderUrl(base, index)}/receipt/0xab`);
    assert.deepEqual(signerPath(receipt.pathname), {
      instance: index,
      pathname: "/receipt/0xab",
    });
  }
  // Each instance its own path: a kill of one excuses none of another's.
  assert.equal(
    new Set([0, 1, 2].map((index) => instanceSenderUrl(base, index))).size,
    3,
  );
  assert.deepEqual(signerPath("/send"), {
    instance: undefined,
    pathname: "/send",
  });
});

Deno.test("pickInstance() sends to a live instance, one not avoided where there is one, drawn by the seed", () => {
  const [a, b, c] = [{ live: true }, { live: false }, { live: true }];
  const servers = [a, b, c];
  for (const draw of [0, 0.3, 0.5, 0.99]) {
    const random = () => draw;
    // Never to the one being restarted.
    assert.notEqual(pickInstance(servers, random), b);
    // The other copy's, or the raced delivery's, avoided.
    assert.equal(pickInstance(servers, random, new Set([a])), c);
    assert.equal(pickInstance(servers, random, new Set([c])), a);
    // Every live one avoided: a live one still.
    assert.notEqual(pickInstance(servers, random, new Set([a, c])), b);
  }
  // The draw spreads requests over the live ones.
  assert.equal(pickInstance(servers, () => 0), a);
  assert.equal(pickInstance(servers, () => 0.99), c);
  // None live: any, to wait for.
  const down = [{ live: false }, { live: false }];
  assert.equal(pickInstance(down, () => 0.99), down[1]);
});

Deno.test("killSegment() splits each kill's share of the answers among several instances, and keeps a run of one as it was", () => {
  assert.equal(killSegment({ intents: 60, kills: 3, instances: 1 }), 45);
  assert.equal(killSegment({ intents: 300, kills: 5, instances: 1 }), 150);
  assert.equal(killSegment({ intents: 60, kills: 3, instances: 2 }), 22);
  assert.equal(killSegment({ intents: 60, kills: 3, instances: 3 }), 15);
  // Never below 8 answers.
  assert.equal(killSegment({ intents: 4, kills: 3, instances: 3 }), 8);
});

Deno.test("parseOptions() takes --instances, 1 unless given", () => {
  assert.equal(parseOptions(["--seed", "7"]).instances, 1);
  assert.equal(parseOptions(["--instances", "3"]).instances, 3);
  assert.throws(
    () => parseOptions(["--instances", "0"]),
    /--instances must be an integer >= 1: current value is "0"/,
  );
});

Deno.test("parseOptions() takes --db-faults disk on KvStore alone, and the PostgreSQL faults not there", () => {
  assert.deepEqual(parseOptions(["--db-faults", "disk"]).dbFaults, ["disk"]);
  assert.equal(outagesIn(["disk"]), true);
  assert.throws(
    () => parseOptions(["--store", "postgres", "--db-faults", "disk"]),
    /--db-faults disk needs --store kv \(it fills the SQLite file's disk\): current value is postgres/,
  );
  assert.throws(
    () => parseOptions(["--db-faults", "disk,terminate"]),
    /--db-faults needs --store postgres or pgbouncer: current value is kv/,
  );
});

Deno.test("parseOptions() takes --trace as a flag without a value, off unless given", () => {
  assert.equal(parseOptions(["--seed", "7"]).trace, false);
  const options = parseOptions(["--trace", "--seed", "7", "--intents=60"]);
  assert.equal(options.trace, true);
  assert.equal(options.seed, 7);
  assert.equal(options.intents, 60);
  assert.throws(() => parseOptions(["--trace=yes"]), /Unknown argument/);
});

/** A job as the queue tracks it, at its `generation`'th publication. */
const job = (generation: number, lane: JobRecord["lane"] = "qstash") => ({
  intentId: "pi_0035",
  jobId: "pi_0035/settle",
  delivery: 1,
  ended: false,
  poisoned: [],
  lost: new Set<number>(),
  unread: new Set<number>(),
  lostCopyAfterAck: false,
  generation,
  queueLimit: null,
  counted: false,
  countedPushes: new Map<string, number>(),
  giveUpInFlight: false,
  messageId: `m-pi_0035-${generation}`,
  publishTime: "2026-01-01T11:00:00.123Z",
  lane,
  quiet: [],
  idle: false,
  redrives: 0,
  redrivenGeneration: 0,
} satisfies JobRecord);

const answer = (
  path: string,
  status: number,
  body: AnswerBody = {},
  marks: { counted?: boolean; stale?: boolean } = {},
): Attempt => ({
  kind: "answer",
  path,
  status,
  body,
  retryAfter: null,
  ...marks,
});

Deno.test("bookAnswers() books a poison answer under the publication it came in, not one a redrive made since", () => {
  // Seed 257: publication 1's give-up, repeated, was answered (poison, as
  // its first copy was) once a redrive had removed the letter and published
  // the job again; booked under publication 2, the check wanted a dead
  // letter that nothing was meant to write.
  const record = job(2);
  const unexpected: string[] = [];
  bookAnswers(record, 1, [
    answer("/v1/qstash/failed", 200, {
      outcome: "poison",
      delivery: 1,
      resolution: "job dropped, intent still authorized",
    }),
  ], { live: false, generation: 1, pubsubBackoff: () => 0, unexpected });
  assert.deepEqual(record.poisoned, [{
    delivery: 1,
    resolution: "job dropped, intent still authorized",
    generation: 1,
  }]);
  assert.deepEqual(unexpected, []);
});

Deno.test("bookAnswers() books a poison answered by the copy sent again of a delivery whose 503 wrote nothing under database faults", () => {
  // A run of the CI's faults form: delivery 1's look failed (503, its
  // replay record unwritten), the same signed request sent again was a
  // first delivery and poisoned the job; its letter at delivery 1 was
  // flagged as one no answer had poisoned.
  const record = job(1);
  const unexpected: string[] = [];
  bookAnswers(record, 1, [{
    kind: "answer",
    path: "/v1/qstash",
    status: 503,
    body: { title: "Delivery failed" },
    retryAfter: null,
    unrecordedCopy: {
      outcome: "poison",
      delivery: 1,
      resolution: "nothing was sent, so the intent failed",
    },
  }], { live: true, generation: 1, pubsubBackoff: () => 0, unexpected });
  assert.deepEqual(record.poisoned, [{
    delivery: 1,
    resolution: "nothing was sent, so the intent failed",
    generation: 1,
  }]);
  assert.deepEqual(unexpected, []);
});

Deno.test("bookAnswers() books a poison under the delivery its answer names, not the number of the request: a repeated give-up answers its letter's", () => {
  // QStash's failure callback at its 5th delivery, repeated after the
  // first was answered: answered from the letter, poisoned at delivery 3.
  const record = job(1);
  const unexpected: string[] = [];
  bookAnswers(record, 5, [
    answer("/v1/qstash/failed", 200, {
      outcome: "poison",
      delivery: 3,
      resolution: "last broadcast sent as 0x1, needs review",
    }),
  ], { live: true, generation: 1, pubsubBackoff: () => 0, unexpected });
  assert.deepEqual(record.poisoned, [{
    delivery: 3,
    resolution: "last broadcast sent as 0x1, needs review",
    generation: 1,
  }]);
});

Deno.test("bookAnswers() keeps the number of a delivery whose answer said the store failed among those that may have left a letter, on every lane", () => {
  // Seed 1030 under --db-faults terminate: Pub/Sub's push 1 was declared
  // poison, and the write of its letter lost its answer to a terminated
  // session (503 Delivery failed, "it may have landed or not"); it had
  // landed, and push 2 found the intent failed. Its letter at delivery 1
  // was flagged as one nothing had poisoned.
  const failed = {
    type: "urn:relayer:problem:delivery-failed",
    title: "Delivery failed",
    status: 503,
  } as AnswerBody;
  for (const path of ["/v1/pubsub", "/v1/qstash", "/v1/deliveries"]) {
    const record = job(1, path === "/v1/pubsub" ? "pubsub" : "qstash");
    const unexpected: string[] = [];
    bookAnswers(record, 1, [answer(path, 503, failed)], {
      live: true,
      generation: 1,
      pubsubBackoff: () => 0,
      unexpected,
    });
    assert.deepEqual([...record.lost], [1], path);
    assert.deepEqual(unexpected, []);
  }
  // A retry the relayer decided on is not the store's failure.
  const record = job(1);
  bookAnswers(record, 2, [
    answer("/v1/qstash", 503, {
      outcome: "retry",
      reason: "send: signer answered 502: rpc: connection refused",
    }),
  ], { live: true, generation: 1, pubsubBackoff: () => 0, unexpected: [] });
  assert.deepEqual([...record.lost], []);
});

Deno.test("bookAnswers() keeps a counted push's 204 off the delivery numbers, and waits out a stale token's 401", () => {
  const record = job(1, "pubsub");
  const unexpected: string[] = [];
  const options = {
    live: true,
    generation: 1,
    pubsubBackoff: () => 70,
    unexpected,
  };
  // Refused, as an expired token must be: Pub/Sub pushes again.
  const refused = bookAnswers(record, 3, [
    answer("/v1/pubsub", 401, {}, { stale: true }),
  ], options);
  assert.deepEqual(refused, { delayMs: 70, acked: false, lostCopy: false });
  assert.deepEqual(unexpected, []);
  // Without deliveryAttempt the service's count is not 4.
  const acked = bookAnswers(record, 4, [
    answer("/v1/pubsub", 204, {}, { counted: true }),
  ], options);
  assert.equal(acked.acked, true);
  assert.deepEqual([...record.unread], []);
  // A 401 to a push with a valid token is a violation.
  bookAnswers(record, 5, [answer("/v1/pubsub", 401)], options);
  assert.equal(unexpected.length, 1);
  assert.match(unexpected[0]!, /Pub\/Sub push 5 to \/v1\/pubsub answered 401/);
});

Deno.test("fetchesByGeneration() counts each process's fetches of Google's keys, a fetch until its kill ended being the dying one's", () => {
  const kills = [{ from: 100, to: 120 }, { from: 300, to: 310 }];
  assert.deepEqual(
    fetchesByGeneration([5, 60, 110, 120, 130, 400, 999], kills, 0, 1000),
    [
      { generation: 1, fetches: 4, lifeMs: 120 },
      { generation: 2, fetches: 1, lifeMs: 190 },
      { generation: 3, fetches: 2, lifeMs: 690 },
    ],
  );
});

Deno.test("fleetKeyFetchesAllowed() bounds several instances' fetches of Google's keys by every process's, each instance's dated by its own kills", () => {
  const minute = keyFetchesAllowed(60_000) - keyFetchesAllowed(0);
  assert.equal(keyFetchesAllowed(0), 3);
  assert.ok(minute > 0, "a longer life may fetch more");
  // No kill: one process per instance, each the whole run.
  assert.deepEqual(fleetKeyFetchesAllowed([], 3, 0, 1000), {
    processes: 3,
    allowed: 3 * keyFetchesAllowed(1000),
  });
  // Instance 1 killed twice: three processes of its, one of instance 0's.
  const kills = [
    { from: 100, to: 120, instance: 1, generation: 1 },
    { from: 500, to: 530, instance: 1, generation: 2 },
  ];
  assert.deepEqual(fleetKeyFetchesAllowed(kills, 2, 0, 1000), {
    processes: 4,
    allowed: 4 * keyFetchesAllowed(0),
  });
  // A run of a few minutes: the processes' lives, not the run's, each.
  const long = [{ from: 100_000, to: 101_000, instance: 0, generation: 1 }];
  assert.deepEqual(fleetKeyFetchesAllowed(long, 2, 0, 200_000), {
    processes: 3,
    allowed: keyFetchesAllowed(101_000) + keyFetchesAllowed(99_000) +
      keyFetchesAllowed(200_000),
  });
});

Deno.test("storeFailed() takes a 503 that says the store failed, and no other answer", () => {
  const problem = (type: string, detail: string) =>
    JSON.stringify({
      type: `urn:relayer:problem:${type}`,
      status: 503,
      detail,
    });
  assert.ok(storeFailed(
    503,
    problem(
      "delivery-failed",
      "The delivery could not finish (the store failed unexpectedly); the queue will redeliver it.",
    ),
  ));
  assert.ok(storeFailed(
    503,
    problem(
      "store-failed",
      "The read of intent pi_0010 could not reach the store (the relayer's log says why): try again.",
    ),
  ));
  assert.ok(storeFailed(
    503,
    "retry: PostgreSQL lost the connection during the write (Error: write CONNECTION_CLOSED 127.0.0.1:43165): it may have landed or not; the next read says which",
  ));
  // A retry after a send, a refusal, an acceptance: not the store's.
  assert.ok(
    !storeFailed(
      503,
      "retry: send: signer answered 502: rpc: connection refused",
    ),
  );
  assert.ok(!storeFailed(401, problem("store-failed", "")));
  // A 500 is the service failing, whatever it names: never excused.
  assert.ok(!storeFailed(500, problem("store-failed", "")));
  assert.ok(!storeFailed(502, "PostgreSQL"));
  assert.ok(!storeFailed(200, "PostgreSQL"));
});

Deno.test("SentOrder keeps two reads' answers in the order they were sent, not answered", () => {
  const observed = new SentOrder<string>();
  // The operator's read is sent first and reads the intent before its
  // settle commits; the sampler's read, sent after the commit, answers
  // first; one more read is lost with the server.
  const operator = observed.send("pi_1");
  const sampler = observed.send("pi_1");
  observed.send("pi_1");
  sampler("settled");
  assert.deepEqual(observed.get("pi_1"), ["settled"]);
  operator("settling");
  assert.deepEqual(observed.get("pi_1"), ["settling", "settled"]);
  assert.deepEqual(observed.get("pi_2"), []);
});

const giveUpAnswer = (resolution: string): Attempt => ({
  kind: "answer",
  path: "/v1/deliveries",
  status: 200,
  body: { outcome: "poison", resolution },
  retryAfter: null,
});

Deno.test("quietAfterGiveUp() ends the quiet after a generic route's drop with its lease, timed from the give-up's first copy", () => {
  // Seed 85 under --db-faults terminate: the give-up's first copies went
  // at 4943 ms and were acked at 5757 ms; the delivery it left held up
  // sent at 6010 ms. The route's deliveries name no message, so only the
  // drop's lease (500 ms, from after 4943 ms) held it off: not a violation.
  const dropped = [giveUpAnswer("job dropped, intent still authorized")];
  const quiet = quietAfterGiveUp("generic", dropped, 4943, 5757);
  assert.deepEqual(quiet, { from: 5757, to: 5443 });
  assert.ok(!(6010 > quiet.from && 6010 < quiet.to));
  // Acked within the lease: a send before it ends is still flagged.
  assert.deepEqual(quietAfterGiveUp("generic", dropped, 1000, 1100), {
    from: 1100,
    to: 1500,
  });
});

Deno.test("quietAfterGiveUp() keeps the quiet open after a drop on QStash's and Pub/Sub's routes, and after any other resolution", () => {
  const dropped = [giveUpAnswer("job dropped, intent still authorized")];
  for (const lane of ["qstash", "pubsub"] as const) {
    assert.deepEqual(quietAfterGiveUp(lane, dropped, 4943, 5757), {
      from: 5757,
      to: Infinity,
    });
  }
  const review = [
    giveUpAnswer("last broadcast unknown, needs review"),
    { kind: "lost", path: "/v1/deliveries", error: "connection reset" },
  ] as const;
  assert.deepEqual(quietAfterGiveUp("generic", review, 4943, 5757), {
    from: 5757,
    to: Infinity,
  });
  // A bridge whose deliveries name the message: its give-up's marks hold
  // every later copy off, as on QStash.
  assert.deepEqual(quietAfterGiveUp("generic", dropped, 4943, 5757, true), {
    from: 5757,
    to: Infinity,
  });
});

Deno.test("namesMessage() has the generic jobs of even-numbered intents name their message, and the others not", () => {
  assert.equal(namesMessage("pi_0032"), true);
  assert.equal(namesMessage("pi_0033"), false);
  assert.equal(namesMessage("pi_0100"), true);
  // An id without a number is one of the others.
  assert.equal(namesMessage("pi_x"), false);
});

Deno.test("resolveAnswer() takes a resolution's 503 for a receipt it could not read as one to try again, with or without database faults", () => {
  // Seed 13 under --db-faults terminate: the route could not read the
  // receipt of 0x1f (the signer's answer came past SENDER_TIMEOUT), and
  // rightly wrote nothing; the operator flagged it.
  const unread = JSON.stringify({
    type: "urn:relayer:problem:receipts-unread",
    title: "Receipts unread",
    status: 503,
    detail:
      "The receipt of 0x000000000000001f could not be read (the relayer's log says why), and a payment with a tx that confirmed must not fail: try again.",
  });
  assert.equal(resolveAnswer(503, unread, true), "again");
  assert.equal(resolveAnswer(503, unread, false), "again");
  const storeDown = JSON.stringify({
    type: "urn:relayer:problem:store-failed",
    status: 503,
  });
  assert.equal(resolveAnswer(503, storeDown, true), "again");
  assert.equal(resolveAnswer(503, storeDown, false), "unexpected");
  assert.equal(resolveAnswer(200, "{}", false), "answered");
  assert.equal(
    resolveAnswer(409, '{"type":"urn:relayer:problem:tx-pending"}', false),
    "answered",
  );
  assert.equal(resolveAnswer(500, unread, true), "unexpected");
  assert.equal(resolveAnswer(400, "{}", true), "unexpected");
});

Deno.test("backwardMove() orders two reads of an intent only when one was answered before the other was sent", () => {
  // Seed 1125 under --db-faults terminate: the sampler's read, sent at
  // 2000 ms while the database was out, was answered at 3300 ms with
  // settled (the operator had settled the payment at 3186 ms); the
  // operator's read, sent at 3180 ms, answered needs_review at 3190 ms.
  // In the order sent that looked like settled → needs_review.
  const rank = ["authorized", "settling", "needs_review", "settled"];
  const reaches = (from: string, to: string) =>
    rank.indexOf(to) >= rank.indexOf(from);
  const seen = (sampledAt: number) =>
    [
      { state: "authorized", sentAt: -Infinity, answeredAt: -Infinity },
      { state: "settled", sentAt: 2000, answeredAt: sampledAt },
      { state: "needs_review", sentAt: 3180, answeredAt: 3190 },
      { state: "settled", sentAt: Infinity, answeredAt: Infinity },
    ] as const;
  assert.equal(backwardMove(seen(3300), reaches), undefined);
  // Answered before the operator's read was sent: a move backwards.
  assert.deepEqual(backwardMove(seen(3100), reaches), [
    "settled",
    "needs_review",
  ]);
  // Answered in the very millisecond the other was sent: not ordered.
  assert.equal(
    backwardMove([
      { state: "settled", sentAt: 2000, answeredAt: 3180 },
      { state: "needs_review", sentAt: 3180, answeredAt: 3190 },
    ], reaches),
    undefined,
  );
  // Ordered across a read between them that overlaps both.
  assert.deepEqual(
    backwardMove([
      { state: "settled", sentAt: 0, answeredAt: 10 },
      { state: "needs_review", sentAt: 5, answeredAt: 40 },
      { state: "needs_review", sentAt: 30, answeredAt: 50 },
    ], reaches),
    ["settled", "needs_review"],
  );
  // The end state is after every read.
  assert.deepEqual(
    backwardMove([
      { state: "settled", sentAt: 0, answeredAt: 5 },
      { state: "settling", sentAt: Infinity, answeredAt: Infinity },
    ], reaches),
    ["settled", "settling"],
  );
});

Deno.test("settledBehindCutSend() with several instances counts a kill only of the send's instance, and a line of another or of its next process", () => {
  const line =
    "worker  pi_0005/settle   #3  done         (0x0000000000000010 confirmed, intent settled)";
  // Instance 0's process 1 is killed from 500 to 530; its send arrived at
  // 440 and never got an answer.
  const kills = [{ from: 500, to: 530, instance: 0, generation: 1 }];
  const sends = (instance: number) => () => [{
    arrivedAt: 440,
    answeredAt: null,
    instance,
  }];
  const behind = (writer: number, generation: number, sender = 0, at = 900) =>
    settledBehindCutSend(
      line,
      generation,
      at,
      sends(sender),
      kills,
      200,
      writer,
    );
  // Settled by instance 1, or by instance 0's next process.
  assert.equal(behind(1, 1), "pi_0005");
  assert.equal(behind(0, 2), "pi_0005");
  // Not by the process the kill ended; not behind a send of an instance
  // the kill did not hit.
  assert.equal(behind(0, 1), undefined);
  assert.equal(behind(1, 1, 1), undefined);
  // Not a line another instance wrote before the kill: the send was still
  // in flight, and its settle was not behind a cut one.
  assert.equal(behind(1, 1, 0, 480), undefined);
});

Deno.test("settledBehindCutSend() names a delivery's settle whose intent's last /send a kill cut, and nothing else", () => {
  const settledLine =
    "worker  pi_0005/settle   #3  done         (0x0000000000000010 confirmed, intent settled) message pubsub/m-pi_0005-1";
  const kills = [{ from: 100, to: 120 }, { from: 500, to: 530 }];
  // The rescue arrived at 440 and was unanswered when kill 2 began at 500.
  const cut = [send(10, 20), send(440, 650)];
  const sendsOf = (id: string) => id === "pi_0005" ? cut : [];
  const behind = (line: string, generation: number, sends = sendsOf) =>
    settledBehindCutSend(line, generation, 900, sends, kills, 200);
  assert.equal(behind(settledLine, 3), "pi_0005");
  assert.equal(
    behind(settledLine.replace(" message pubsub/m-pi_0005-1", ""), 3),
    "pi_0005",
  );
  // A line of the server the kill ended is not behind the kill.
  assert.equal(behind(settledLine, 2), undefined);
  // The queue's give-up settles behind a write-ahead by design: not counted.
  assert.equal(
    behind(
      settledLine.replace(
        "(0x",
        "(the queue gave up after 3 deliveries: 0x",
      ),
      3,
    ),
    undefined,
  );
  assert.equal(
    behind(settledLine.replace("done", "retry"), 3),
    undefined,
  );
  // Answered before the kill, past the Sender's timeout at the kill, or
  // followed by another send: its end may be on record.
  assert.equal(behind(settledLine, 3, () => [send(440, 490)]), undefined);
  assert.equal(behind(settledLine, 3, () => [send(250, null)]), undefined);
  assert.equal(
    behind(settledLine, 3, () => [send(440, null), send(600, 610)]),
    undefined,
  );
  // A send that arrived after the line is not the one it settled behind.
  assert.equal(
    behind(settledLine, 3, () => [send(440, null), send(950, 960)]),
    "pi_0005",
  );
});

/** The one line main.ts writes when a lost connection fails its start. */
const refusal = (cause: string) =>
  `relayer: cannot start: DATABASE_URL: cannot open PostgreSQL 127.0.0.1:43475/postgres, no TLS: ${cause}`;
const refused = (cause: string, stderr = [refusal(cause)]) => ({
  code: 1,
  signal: null,
  stderr,
});

Deno.test("startAgain() starts a server again, as a platform does, when database faults cut its migration and it refused to start", () => {
  // About 1 run in 30 of --kills 3 --db-faults terminate: the restart
  // after a kill met the fault's burst of terminated sessions, the service
  // refused to start, and the old tool failed the run on it.
  for (
    const cause of [
      "read ECONNRESET",
      "write CONNECTION_CLOSED 127.0.0.1:43475",
      "terminating connection due to administrator command",
      "connect ECONNREFUSED 127.0.0.1:43475 (nothing listens at that host and port: start the server, or correct the host and port in DATABASE_URL)",
      "the database system is starting up",
      // Through PgBouncer, while its logins to the server fail.
      "server login has been failing, try again later (server_login_retry)",
      // A cancel fault's pg_cancel_backend cutting a start's statement:
      // 3 of 7 runs of --store pgbouncer --db-faults cancel failed on it.
      "canceling statement due to user request",
    ]
  ) {
    assert.equal(startAgain(refused(cause), true, 1), true, cause);
    assert.equal(
      startAgain(refused(cause), true, START_TRIES - 1),
      true,
      cause,
    );
  }
  // KvStore under --db-faults disk: a restart while the disk is full.
  const full = [
    "relayer: cannot start: KV_PATH: the disk that holds /tmp/relayer_crash_x/relayer.kv is full (No space left on device (os error 28)): Deno KV cannot write its files there. Free space on that disk, then start again (keep KV_PATH: the store holds every payment's record).",
  ];
  assert.equal(startAgain(refused("", full), true, 1), true);
});

Deno.test("startAgain() fails the run on any other start failure: no faults, too many tries, a crash, another refusal", () => {
  const lost = refused("read ECONNRESET");
  // Without database faults nothing should cut a start.
  assert.equal(startAgain(lost, false, 1), false);
  // Bounded.
  assert.equal(START_TRIES, 5);
  assert.equal(startAgain(lost, true, START_TRIES), false);
  // A refusal for something no fault makes: the run's setup is wrong.
  for (
    const cause of [
      'Cannot use the PostgreSQL schema "relayer" as this role lacks USAGE on the sequence: grant them to it',
      "no answer within 20000ms: is it a PostgreSQL server this process can reach, and is the migration not waiting on another's lock?",
      'password authentication failed for user "relayer"',
    ]
  ) {
    assert.equal(startAgain(refused(cause), true, 1), false, cause);
  }
  assert.equal(
    startAgain(
      refused("", ["relayer: cannot start: WEBHOOK_SECRET is missing"]),
      true,
      1,
    ),
    false,
  );
  // A crash: a stack after the line, an uncaught error, a signal, another code.
  assert.equal(
    startAgain(
      refused("", [refusal("read ECONNRESET"), "    at main.ts:400:5"]),
      true,
      1,
    ),
    false,
  );
  assert.equal(
    startAgain(
      refused("", [
        "error: Uncaught (in promise) Error: read ECONNRESET",
        "    at TCP.onStreamRead (ext:deno_node/internal/stream_base_commons.ts:217:20)",
      ]),
      true,
      1,
    ),
    false,
  );
  assert.equal(
    startAgain({ ...lost, code: 137, signal: "SIGKILL" }, true, 1),
    false,
  );
  assert.equal(startAgain({ ...lost, code: 70 }, true, 1), false);
  assert.equal(startAgain(refused("", []), true, 1), false);
});

Deno.test("startMetFault() excuses a start the database fault under way refused, not one begun after the database was back", () => {
  // --instances 3 --kills 3 --db-faults down,… --db-down 5, seed 71757: a
  // kill's restart fell into the 5 s down, its tries' backoffs (0.25 to
  // 1 s) ran out before the database came back, and the run failed on the
  // fifth refusal.
  const down = [{ up: null }];
  assert.equal(startMetFault(down, 1_000), true);
  // Begun while down, refused just after the database came back.
  assert.equal(startMetFault([{ up: 6_000 }], 5_900), true);
  // Begun once every fault was over: a refusal then is counted.
  assert.equal(startMetFault([{ up: 6_000 }, { up: 9_000 }], 9_100), false);
  assert.equal(startMetFault([], 0), false);
});

Deno.test("recoveryLate() times each live instance from the database's return or its own later start, and asks none being started again", () => {
  const bound = 5_000;
  // Lived through the fault: late past the bound from the database's return.
  assert.equal(
    recoveryLate(10_000, [{ live: true, upAt: 1_000 }], 14_900),
    false,
  );
  assert.equal(
    recoveryLate(10_000, [{ live: true, upAt: 1_000 }], 10_000 + bound + 1),
    true,
  );
  // --instances 4 --kills 3 --db-faults immediate,… seed 95514 (and 71757):
  // an instance a kill started again during the fault came up 3 s after
  // the database; its /readyz 200 at 5.1 s was counted as the service's
  // late recovery.
  const restarted = [{ live: true, upAt: 1_000 }, { live: true, upAt: 13_000 }];
  assert.equal(recoveryLate(10_000, restarted, 15_100), false);
  assert.equal(recoveryLate(10_000, restarted, 13_000 + bound + 1), true);
  // One being started again is not asked, and with none live nothing is late.
  assert.equal(
    recoveryLate(10_000, [{ live: false, upAt: 1_000 }], 60_000),
    false,
  );
  assert.equal(
    recoveryLate(10_000, [{ live: true, upAt: 1_000 }, {
      live: false,
      upAt: 2_000,
    }], 16_000),
    true,
  );
});

Deno.test("recoveryLate() does not count the time the tool's own loop stood still since the database's return", () => {
  const bound = 5_000;
  const live = [{ live: true, upAt: 1_000 }];
  // Stood still 700 ms after the return: the bound moves by as much.
  const stalls = [{ from: 12_000, to: 12_700 }];
  assert.equal(recoveryLate(10_000, live, 10_000 + bound + 600, stalls), false);
  assert.equal(recoveryLate(10_000, live, 10_000 + bound + 701, stalls), true);
  // Only what lies after the return, and before the time asked, counts.
  assert.equal(
    recoveryLate(10_000, live, 10_000 + bound + 1, [{
      from: 9_000,
      to: 10_000,
    }]),
    true,
  );
  assert.equal(
    recoveryLate(10_000, live, 10_000 + bound + 301, [{
      from: 9_800,
      to: 10_300,
    }]),
    true,
  );
  assert.equal(
    recoveryLate(10_000, live, 10_000 + bound + 299, [{
      from: 9_800,
      to: 10_300,
    }]),
    false,
  );
  assert.equal(stoodStill([{ from: 1, to: 5 }, { from: 8, to: 20 }], 3, 10), 4);
  assert.equal(stoodStill([], 0, 100), 0);
  // The run's stalls wholly before the return (or after the time asked)
  // count nothing, not less than nothing.
  const earlier = [{ from: 2_000, to: 3_000 }, { from: 12_000, to: 12_700 }];
  assert.equal(stoodStill(earlier, 10_000, 12_000), 0);
  assert.equal(stoodStill(earlier, 4_000, 11_000), 0);
  assert.equal(recoveryLate(10_000, live, 10_000 + bound - 1, earlier), false);
});

Deno.test("operatorCall() answers a call's status and body, and names a call left unanswered past its bound", async () => {
  let release = () => {};
  const held = new Promise<void>((resolve) => release = resolve);
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (request) => {
      assert.equal(request.headers.get("authorization"), "Bearer ops-token");
      if (new URL(request.url).pathname === "/down") {
        return new Response("Bad Gateway", { status: 502 });
      }
      if (request.method === "POST") await held;
      return Response.json({ id: "pi_1" }, { status: 201 });
    },
  );
  const base = `http://127.0.0.1:${server.addr.port}`;
  try {
    assert.deepEqual(
      await operatorCall(`${base}/v1/intents/pi_1`, "ops-token"),
      {
        status: 201,
        body: { id: "pi_1" },
      },
    );
    await assert.rejects(
      operatorCall(`${base}/v1/intents`, "ops-token", { method: "POST" }, 100),
      {
        message: "the operator's POST /v1/intents had no answer within 100ms",
      },
    );
    // An answer that is no JSON (a proxy's error page) fails as it is,
    // not as a call left unanswered.
    await assert.rejects(
      operatorCall(`${base}/down`, "ops-token"),
      SyntaxError,
    );
  } finally {
    release();
    await server.shutdown();
  }
});

Deno.test("failedHeadline() follows a fault of the tool itself with its stack's frames, and leaves a refusal or a violation one line", () => {
  const tools = (): never => {
    const letter = JSON.parse("null") as { intentId: string };
    throw new Error(letter.intentId);
  };
  let fault: Error | undefined;
  try {
    tools();
  } catch (error) {
    fault = error as Error;
  }
  assert.ok(fault instanceof TypeError);
  const lines = failedHeadline(114299, fault).split("\n");
  assert.equal(
    lines[0],
    `crash test FAILED (seed 114299): ${fault.message}`,
  );
  assert.ok(lines.length > 1, "no frames below the line");
  assert.ok(lines.slice(1).every((line) => /^\s+at /.test(line)));
  assert.match(lines[1]!, /tools .*crash_check_test\.ts:\d+:\d+/);
  for (
    const reason of [
      new Error("server 2.1 exited by itself (code 1, signal null)"),
      new Error("interrupted"),
    ]
  ) {
    assert.equal(
      failedHeadline(7, reason),
      `crash test FAILED (seed 7): ${reason.message}`,
    );
  }
});

/** A dead letter as `GET /v1/dead-letters` lists it. */
const listed = (intentId: string) => ({
  jobId: `${intentId}/settle`,
  intentId,
  deliveries: 1,
  cause: "gave-up",
  reason: "the queue gave up after 1 delivery",
  resolution: "job dropped, intent still authorized",
  lastError: "",
  poisonedAt: 1_767_225_600_000,
  version: "12",
});

Deno.test("readLetterPage() leaves out and reports a page's items that are no dead letter, and reads the rest, as PostgreSQL's listing answered them with nulls in front", () => {
  // What the service answered on a connection where a statement had
  // failed while its rows streamed: three nulls before its one letter.
  const page = readLetterPage({
    items: [null, null, null, listed("pi_0032")],
    cursor: null,
  });
  assert.deepEqual(page.letters.map((letter) => letter.intentId), [
    "pi_0032",
  ]);
  assert.equal(page.cursor, null);
  assert.equal(page.wrong, "3 of its 4 items no dead letter: null, null, null");

  const { letters, cursor, wrong } = readLetterPage({
    items: [listed("pi_0001"), { jobId: "pi_0002/settle" }, listed("pi_0003")],
    cursor: "c1",
  });
  assert.deepEqual(letters.map((letter) => letter.intentId), [
    "pi_0001",
    "pi_0003",
  ]);
  assert.equal(cursor, "c1");
  assert.match(wrong ?? "", /^1 of its 3 items no dead letter: \{"jobId"/);

  assert.deepEqual(
    readLetterPage({ items: [listed("pi_0001")], cursor: "c2" }),
    { letters: [listed("pi_0001")], cursor: "c2", wrong: null },
  );
  assert.deepEqual(readLetterPage(null), {
    letters: [],
    cursor: null,
    wrong: "a page without items: null",
  });
  assert.equal(
    readLetterPage({ items: [], cursor: 7 }).wrong,
    "a cursor 7",
  );
  // Every field the checks read: a count that is no number, a letter
  // without the version a redrive names.
  const { version: _, ...unversioned } = listed("pi_0005");
  const odd = readLetterPage({
    items: [{ ...listed("pi_0004"), deliveries: "1" }, unversioned],
    cursor: null,
  });
  assert.deepEqual(odd.letters, []);
  assert.match(odd.wrong ?? "", /^2 of its 2 items no dead letter: /);
});

Deno.test("answerBody() books a delivery's JSON object as it came, and anything else (a JSON null, a number, an array, no JSON) as its text, never a null", () => {
  assert.deepEqual(answerBody('{"outcome":"retry","delayMs":20}'), {
    outcome: "retry",
    delayMs: 20,
  });
  for (const text of ["null", "7", "[]", "", "Internal Server Error"]) {
    const body = answerBody(text);
    // What the queue reads of every answer.
    assert.equal(body.delayMs, undefined);
    assert.deepEqual(body, { title: text });
  }
});

Deno.test("isIntentView() takes an intent's view, with or without a dead letter, and nothing else", () => {
  const intent = { id: "pi_0001", state: "authorized", hold: "pending" };
  assert.ok(isIntentView({ intent, deliveries: 0, deadLetter: null }));
  assert.ok(
    isIntentView({ intent, deliveries: 1, deadLetter: listed("pi_0001") }),
  );
  for (
    const body of [
      null,
      "null",
      {},
      { intent: null, deadLetter: null },
      { intent: {}, deadLetter: null },
      { intent },
      { intent, deadLetter: "pi_0001/settle" },
    ]
  ) {
    assert.equal(isIntentView(body), false, JSON.stringify(body));
  }
});

Deno.test("outagesIn() counts every database fault but a retype, which changes the database without taking it away", () => {
  assert.equal(outagesIn([]), false);
  assert.equal(outagesIn(["retype", "retype"]), false);
  for (
    const kind of ["fast", "immediate", "down", "terminate", "cancel"] as const
  ) {
    assert.equal(outagesIn([kind]), true);
    assert.equal(outagesIn(["retype", kind]), true);
  }
});

Deno.test("the signer stub answers a /send whose body a kill cut with a 400 and records nothing, as QStash's stand-in does", async () => {
  const stub = new SignerStub(() => 0.5);
  stub.behaviours.set("pi_0001", "confirm");
  const cut = new Request("http://127.0.0.1/send", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('{"intentId":"pi_0'));
        controller.error(new Error("connection reset"));
      },
    }),
  });
  const response = await stub.handler(cut);
  await response.body?.cancel();
  assert.equal(response.status, 400);
  assert.equal(stub.sends.size, 0);
  assert.deepEqual(stub.strangers, []);
  // A whole one is still answered and recorded.
  const whole = await stub.handler(
    new Request("http://127.0.0.1/send", {
      method: "POST",
      body: JSON.stringify({ intentId: "pi_0001", replace: false }),
    }),
  );
  assert.equal(whole.status, 200);
  assert.equal(stub.sends.get("pi_0001")?.length, 1);
});

Deno.test("replayAnswer() excuses a replay whose first write a database fault cut, and nothing else", () => {
  // A replay must be refused; without database faults nothing else goes.
  assert.equal(replayAnswer(200, 401, "", false), "refused");
  assert.equal(
    replayAnswer(200, 200, '{"outcome":"done"}', false),
    "unexpected",
  );
  assert.equal(
    replayAnswer(503, 200, '{"outcome":"done"}', false),
    "unexpected",
  );
  // A first copy answered 5xx may have written nothing: the copy sent
  // again is a first delivery.
  assert.equal(replayAnswer(503, 200, '{"outcome":"done"}', true), "first");
  // The store lost its connection under the replay: it did nothing.
  assert.equal(
    replayAnswer(
      200,
      503,
      '{"outcome":"retry","reason":"PostgreSQL lost the connection during the write (Error: write CONNECTION_CLOSED 127.0.0.1:43165): it may have landed or not; the next read says which"}',
      true,
    ),
    "unread",
  );
  // A `cancel` fault's pg_cancel_backend cut the replay's first write,
  // where its replay record is read: nothing was written, and the store
  // could not tell a replay (PgBouncer, seed 23, 3 instances).
  const cancelled = JSON.stringify({
    outcome: "retry",
    job: "pi_0006/settle",
    delivery: 2,
    reason:
      "intent pi_0006 is busy: Cannot admit a delivery as another session cancelled its statement (canceling statement due to user request: pg_cancel_backend; see pg_stat_activity): nothing was written; retry",
  });
  assert.equal(replayAnswer(200, 503, cancelled, true), "unread");
  // Without database faults, the same answer is a violation; and a replay
  // busy behind another delivery's lease is one under faults too.
  assert.equal(replayAnswer(200, 503, cancelled, false), "unexpected");
  assert.equal(
    replayAnswer(
      200,
      503,
      '{"outcome":"retry","reason":"intent pi_0006 is busy with another delivery"}',
      true,
    ),
    "unexpected",
  );
  // A 500 is the service failing, whatever it names.
  assert.equal(replayAnswer(200, 500, cancelled, true), "unexpected");
});
