/**
 * Operator routes raced against deliveries of the same intent, with real
 * concurrency (requests started together, a Sender that holds a send in
 * flight, an injected clock), on every store.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  BusyError,
  type Job,
  notSent,
  poison,
  type Sender,
  type Store,
} from "../../mod.ts";
import { createApp, type WebhookApp } from "../../webhook/app.ts";
import { BACKENDS, recordsFail } from "../_stores.ts";
import { gatedSender } from "../relayer/_gated_sender.ts";
import { job, qstash, qstashFailed } from "./_late_copy.ts";
import { QSTASH } from "./_signing.ts";
import { leasedApp } from "./_give_up_mid_send.ts";

const OPS = "ops-token-for-ops-race-tests";
const headers = { authorization: `Bearer ${OPS}` };

async function raceApp(
  store: Store,
  options: { maxDeliveries?: number; leaseMs?: number } = {},
) {
  await store.createIntent({
    id: "pi_0002",
    state: "authorized",
    hold: "pending",
  });
  const clock = { now: 1_000_000 };
  const gated = gatedSender();
  const published: Array<{ job: Job; dedup: string }> = [];
  const enqueued: Job[] = [];
  const app = createApp({
    store,
    sender: gated.sender,
    policy: { maxDeliveries: options.maxDeliveries ?? 3 },
    now: () => clock.now,
    random: () => 0,
    leaseMs: options.leaseMs ?? 200,
    clockSkewMs: 0,
    qstash: QSTASH,
    opsToken: OPS,
    redriveTo: {
      publish: (job: Job, dedup: string) =>
        Promise.resolve(void published.push({ job, dedup })),
    },
    enqueue: (job: Job) => Promise.resolve(void enqueued.push(job)),
  });
  return { app, clock, gated, published, enqueued };
}

/** An app on `store` and `sender` as these races run one: its clock `clock.now` (its monotonic clock `clock.mono`, if given), a lease of 200 ms, 3 deliveries, QStash and the ops token. */
function opsApp(
  store: Store,
  sender: Sender,
  clock: { now: number; mono?: number },
): WebhookApp {
  return leasedApp(store, {
    clock,
    opsToken: OPS,
    qstash: QSTASH,
    sender,
    ...(clock.mono === undefined ? {} : {
      monotonicNow: () => clock.mono!,
    }),
  });
}

/**
 * Posts a fail of a review that may have sent (`post`), whose answer is
 * 409 `send-in-flight`: a send of it may still run in some instance with
 * no write-ahead on record. Then steps the app's monotonic clock
 * (`clock.mono`) a lease (200 ms): every send has ended.
 */
async function waitedOut(
  post: () => Promise<Response>,
  clock: { mono?: number },
): Promise<void> {
  const first = await post();
  const problem = await first.json();
  assert.equal(first.status, 409, JSON.stringify(problem));
  assert.match(problem.type, /send-in-flight$/);
  assert.equal(first.headers.get("retry-after"), "1");
  clock.mono = (clock.mono ?? 0) + 200;
}

/** {@linkcode waitedOut}, then `post` again: that answer. */
async function afterTheWait(
  post: () => Promise<Response>,
  clock: { mono?: number },
): Promise<Response> {
  await waitedOut(post, clock);
  return await post();
}

/** Creates `pi_0002` settling, its tx 0xold on record as sent. */
async function settlingOnOld(store: Store): Promise<void> {
  await store.createIntent({
    id: "pi_0002",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
    txHashes: ["0xold"],
    lastBroadcast: { outcome: "sent", txHash: "0xold", at: 0 },
  });
}

for (const backend of BACKENDS) {
  Deno.test(`ops race: a fail by hand while the give-up left a send in flight is refused, concurrent with a fresh copy [${backend.name}]`, async () => {
    const { store, close } = await backend.open();
    try {
      const { app, clock, gated } = await raceApp(store);
      const started = gated.nextStart();
      const { delivery, intent } = await givenUpMidSend(
        app,
        clock,
        started,
      );
      // A fail and a fresh copy of another message, at once.
      const [fail, copy] = await Promise.all([
        app.request("/v1/intents/pi_0002/resolve", {
          method: "POST",
          headers,
          body: JSON.stringify({
            to: "failed",
            version: intent.version,
            nonceChecked: true,
          }),
        }),
        app.request("/v1/qstash", await qstash("msg_2", "0")),
      ]);
      const failBody = await fail.json();
      assert.equal(fail.status, 409, JSON.stringify(failBody));
      assert.match(failBody.type, /send-in-flight$/);
      assert.equal(copy.status, 200, await copy.text());
      assert.equal(gated.sends, 1);
      assert.equal((await store.getIntent("pi_0002"))?.hold, "pending");
      gated.releaseAll();
      await (await delivery).text();
      assert.equal(gated.maxInFlight, 1);
      assert.equal((await store.getIntent("pi_0002"))?.hold, "pending");
    } finally {
      await close();
    }
  });

  Deno.test(`ops race: two operators redrive the same letter at once: one job queued, every answer true [${backend.name}]`, async () => {
    const { store, close } = await backend.open();
    try {
      const { app, published } = await raceApp(store, { maxDeliveries: 2 });
      const dropped = await app.request(
        "/v1/qstash",
        await qstash("msg_1", "1"),
      );
      assert.equal(dropped.status, 200);
      const redrive = () =>
        app.request("/v1/dead-letters/pi_0002/settle/redrive", {
          method: "POST",
          headers,
        });
      const answers = await Promise.all([redrive(), redrive(), redrive()]);
      const bodies = await Promise.all(answers.map((a) => a.json()));
      const statuses = answers.map((a) => a.status);
      assert.equal(
        statuses.filter((s) => s === 202).length,
        1,
        JSON.stringify(bodies),
      );
      for (const [i, status] of statuses.entries()) {
        assert.ok(
          status === 202 || status === 404 || status === 409,
          JSON.stringify(bodies[i]),
        );
      }
      // Every answer that says nothing went out: no publish of its own.
      const saidPublished = bodies.filter((b, i) =>
        statuses[i] === 202 || /published all the same/.test(b.detail ?? "")
      ).length;
      assert.equal(published.length, saidPublished, JSON.stringify(bodies));
      // One deduplication id: a deduplicating queue holds one job.
      assert.equal(
        new Set(published.map((p) =>
          p.dedup
        )).size,
        1,
      );
      assert.equal(await store.getDeadLetter("pi_0002/settle"), null);
    } finally {
      await close();
    }
  });

  Deno.test(`ops race: a redrive while a copy of the dropped message and the redriven job are delivered: one send [${backend.name}]`, async () => {
    const { store, close } = await backend.open();
    try {
      const { app, gated } = await raceApp(store, { maxDeliveries: 2 });
      const dropped = await app.request(
        "/v1/qstash",
        await qstash("msg_1", "1"),
      );
      assert.equal(dropped.status, 200);
      const started = gated.nextStart();
      const another = gated.nextStart(); // a second send: the race lost
      const [lateInit, firstInit] = [
        await qstash("msg_1", "0"),
        await qstash("msg_2", "0"),
      ];
      const answered = Promise.all([
        app.request("/v1/qstash", lateInit),
        app.request("/v1/dead-letters/pi_0002/settle/redrive", {
          method: "POST",
          headers,
        }),
      ]);
      const delivered = Promise.resolve(app.request("/v1/qstash", firstInit));
      // The fresh message's send is held until the copy and the redrive
      // have answered: both ran while its delivery was under way. (Held
      // until then, unless that delivery answered, sending nothing, or a
      // second send began: a race lost, which the checks below name.)
      await started;
      await Promise.race([answered, another, delivered]);
      gated.releaseAll();
      const [late, redriven] = await answered;
      const first = await delivered;
      const texts = [
        await late.text(),
        await redriven.text(),
        await first.text(),
      ];
      assert.equal(redriven.status, 202, texts[1]);
      assert.equal(gated.maxInFlight, 1, JSON.stringify(texts));
      assert.equal(gated.sends, 1, JSON.stringify(texts));
      assert.match(texts[2]!, /sent 0x0001/, JSON.stringify(texts));
      // The copy sends nothing: a late copy, or busy behind the send.
      assert.match(texts[0]!, /late copy|busy/, JSON.stringify(texts));
    } finally {
      await close();
    }
  });

  Deno.test(`ops race: POST /v1/jobs twice at once, both delivered at once: one send in flight [${backend.name}]`, async () => {
    const { store, close } = await backend.open();
    try {
      const { app, gated, enqueued } = await raceApp(store);
      const post = () =>
        app.request("/v1/jobs", {
          method: "POST",
          headers,
          body: JSON.stringify(job),
        });
      const posts = await Promise.all([post(), post()]);
      assert.deepEqual(posts.map((p) => p.status), [202, 202]);
      assert.equal(enqueued.length, 2);
      const started = gated.nextStart();
      const another = gated.nextStart(); // a second send: the race lost
      const inits = [await qstash("msg_a", "0"), await qstash("msg_b", "0")];
      const delivered = inits.map((init) =>
        Promise.resolve(app.request("/v1/qstash", init))
      );
      // One sends, held until the other has answered: that one met the
      // send in flight (or its write ahead), and is busy.
      await started;
      const first = await Promise.race([
        ...delivered.map((d, i) => d.then(() => i)),
        another.then(() => -1),
      ]);
      gated.releaseAll();
      const texts = await Promise.all(
        (await Promise.all(delivered)).map((a) => a.text()),
      );
      assert.equal(gated.sends, 1, JSON.stringify(texts));
      assert.match(texts[first]!, /busy/, JSON.stringify(texts));
      assert.equal(gated.maxInFlight, 1);
    } finally {
      await close();
    }
  });
}

for (const backend of BACKENDS) {
  // The operator reads the intent in review and looks its nonce up while
  // a send the give-up could not wait for still runs; the send then ends,
  // its tx out (its record taken on the intent in review), before the
  // fail is posted. The tx may leave after the look, as the route's own
  // refusal says: the fail must not void the hold of a payment that paid.
  Deno.test(`ops race: a fail by hand posted after a send the operator's look overlapped ended does not void a payment its tx paid [${backend.name}]`, async () => {
    const { store, close } = await backend.open();
    try {
      const { ended, chain, fail: failed } = await sendEndedInReview(
        store,
        "landed",
      );
      assert.match(await ended.text(), /sent 0xlanded/);
      assert.equal(chain.size, 1);
      const fail = await failed();
      const body = await fail.json();
      const after = await store.getIntent("pi_0002");
      assert.notEqual(
        after?.hold,
        "voided",
        `the hold of a payment whose tx landed was voided: ${fail.status} ${
          JSON.stringify(body)
        }`,
      );
      // Its record kept its tx on the intent in review and moved the
      // version: the fail, decided on the look made while it ran, is a
      // race lost; read again, the tx on record reads confirmed.
      assert.equal(fail.status, 409, JSON.stringify(body));
      assert.match(body.type, /changed$/);
      assert.deepEqual(after?.txHashes, ["0xlanded"]);
      const again = await failed(after!.version);
      const againBody = await again.json();
      assert.equal(again.status, 409, JSON.stringify(againBody));
      assert.match(againBody.type, /tx-confirmed$/);
      assert.equal((await store.getIntent("pi_0002"))?.hold, "pending");
    } finally {
      await close();
    }
  });
}

/**
 * Delivers message `msg_1` (of `pi_0002`) on `app`, and once its send
 * began (`started`) lets its lease lapse (`clock` a minute on), has QStash
 * give the message up, and reads the payment, in review: the delivery,
 * still under way, and the intent as the operator reads it.
 */
async function givenUpMidSend(
  app: WebhookApp,
  clock: { now: number },
  started: Promise<unknown>,
): Promise<{ delivery: Promise<Response>; intent: { version: string } }> {
  const delivery = Promise.resolve(
    app.request("/v1/qstash", await qstash("msg_1", "0")),
  );
  await started;
  clock.now += 60_000; // the lease lapses mid-send
  const gaveUp = await app.request(
    "/v1/qstash/failed",
    await qstashFailed("msg_1"),
  );
  assert.equal(gaveUp.status, 200, await gaveUp.clone().text());
  const { intent } = await (await app.request("/v1/intents/pi_0002", {
    headers,
  })).json();
  assert.equal(intent.state, "needs_review");
  return { delivery, intent };
}

/**
 * The payment `pi_0002`, created authorized in `store`, sent by a
 * delivery whose lease lapses mid-send, put in review by QStash's give-up meanwhile (the
 * operator reads it, and looks its nonce up: unused), its send then ended,
 * its record kept on the intent in review, or, with `recordFails`, failed
 * (the store down for it: only the process's memory has its tx): with its
 * tx landed (`"landed"`), in doubt (`"doubt"`: an error that does not say
 * the tx stayed home), or refused (`"refused"`: an error declared not
 * sent). Returns the delivery's answer, the txs that landed, and a fail by
 * hand of the payment with `"nonceChecked":true` on the version read while
 * the send ran, or on `version`, or with its body streamed (and that body's
 * text, `failText`), and the app's clocks (`clock.mono` its monotonic one).
 */
async function sendEndedInReview(
  store: Store,
  ending: "landed" | "doubt" | "refused",
  { recordFails = false, recordBusy = false } = {},
) {
  await store.createIntent({
    id: "pi_0002",
    state: "authorized",
    hold: "pending",
  });
  const clock = { now: 1_000_000, mono: 0 };
  const chain = new Set<string>(); // txs that landed
  let finish!: () => void;
  let began!: () => void;
  const sending = new Promise<void>((r) => began = r);
  const app = opsApp(
    recordFails
      ? recordsFail(store)
      : recordBusy
      ? recordsRefusedBusy(store)
      : store,
    {
      send: () => {
        began();
        return new Promise((resolve, reject) =>
          finish = () => {
            if (ending === "doubt") {
              return reject(new Error("socket hang up"));
            }
            if (ending === "refused") {
              return reject(notSent(new Error("nonce too low")));
            }
            chain.add("0xlanded");
            resolve({ txHash: "0xlanded" });
          }
        );
      },
      receipt: (hash: string) =>
        Promise.resolve(chain.has(hash) ? "confirmed" : "dropped"),
    },
    clock,
  );
  const { delivery, intent } = await givenUpMidSend(
    app,
    clock,
    sending,
  );
  assert.equal(chain.size, 0);
  // The send ends meanwhile; its record is kept on the intent in review.
  finish();
  const ended = await delivery;
  const failText = JSON.stringify({
    to: "failed",
    version: intent.version,
    nonceChecked: true,
  });
  const fail = async (
    given: string | ReadableStream<Uint8Array> = intent.version,
  ) =>
    await app.request("/v1/intents/pi_0002/resolve", {
      method: "POST",
      headers,
      ...(typeof given === "string"
        ? {
          body: JSON.stringify({
            to: "failed",
            version: given,
            nonceChecked: true,
          }),
        }
        : { body: given, duplex: "half" }),
    });
  return { ended, chain, fail, failText, clock };
}

/**
 * A store that refuses every send's record as busy (another delivery's
 * lease), writing nothing: as a `ConflictError`, a refusal.
 */
function recordsRefusedBusy(store: Store): Store {
  return new Proxy(store, {
    get(target, key) {
      if (key === "recordBroadcast") {
        return () =>
          Promise.reject(new BusyError("intent pi_0002 is leased to another"));
      }
      const value = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/** Posts two fails by hand at once with `fail`: both must be refused (409, `type`), the hold of `pi_0002` still pending. */
async function twoFailsRefused(
  store: Store,
  fail: () => Promise<Response>,
  type: RegExp,
): Promise<void> {
  const answers = await Promise.all([fail(), fail()]);
  const bodies = await Promise.all(answers.map((a) => a.json()));
  assert.equal(
    (await store.getIntent("pi_0002"))?.hold,
    "pending",
    `a fail that arrived before the send-ended warning was given voided the hold: ${
      answers.map((a, i) => `${a.status} ${JSON.stringify(bodies[i])}`)
        .join(" | ")
    }`,
  );
  for (const [i, answer] of answers.entries()) {
    assert.equal(answer.status, 409, JSON.stringify(bodies[i]));
    assert.match(bodies[i].type, type);
  }
}

for (const backend of BACKENDS) {
  // As above, but the send's answer is an error that does not say the tx
  // stayed home (its outcome unknown, no hash): the tx left all the same.
  // No tx the route can read, but its record (unknown) moved the version:
  // the operator's look came before the tx left, and must be made again.
  Deno.test(`ops race: a fail by hand posted after a send the operator's look overlapped ended in doubt is refused (its record moved the version), then taken on a fresh read [${backend.name}]`, async () => {
    const { store, close } = await backend.open();
    try {
      const { ended, fail, clock } = await sendEndedInReview(store, "doubt");
      assert.equal(ended.status, 503);
      const first = await fail();
      const body = await first.json();
      assert.equal(
        (await store.getIntent("pi_0002"))?.hold,
        "pending",
        `a fail on a look made before the send ended voided the hold: ${first.status} ${
          JSON.stringify(body)
        }`,
      );
      assert.equal(first.status, 409, JSON.stringify(body));
      assert.match(body.type, /changed$/);
      const now = (await store.getIntent("pi_0002"))!;
      assert.equal(now.lastBroadcast?.outcome, "unknown");
      // Told, the operator looks the nonce up again: the word stands, once
      // a send that may still run in some instance has had its lease (the
      // review may have sent).
      assert.equal((await fail()).status, 409, "the old version again");
      const second = await afterTheWait(() => fail(now.version), clock);
      assert.equal(second.status, 200, await second.clone().text());
      assert.equal((await store.getIntent("pi_0002"))?.hold, "voided");
    } finally {
      await close();
    }
  });
}

for (const backend of BACKENDS) {
  // Two fails posted at once (two operators, or a script's retry sent while
  // its first try still ran), both on a look made while the send ran: the
  // one-shot warning reached one of them; the other, which arrived before
  // that warning was given and so cannot have followed it, voided the hold.
  Deno.test(`ops race: two fails posted at once after a send ended in doubt are both refused, then one taken on a fresh read [${backend.name}]`, async () => {
    const { store, close } = await backend.open();
    try {
      const { ended, fail, clock } = await sendEndedInReview(store, "doubt");
      assert.equal(ended.status, 503);
      await twoFailsRefused(store, fail, /changed$/);
      // Told, the operator looks the nonce up again: the word stands, once
      // a send that may still run in some instance has had its lease.
      const version = (await store.getIntent("pi_0002"))!.version;
      const again = await afterTheWait(() => fail(version), clock);
      assert.equal(again.status, 200, await again.clone().text());
      assert.equal((await store.getIntent("pi_0002"))?.hold, "voided");
    } finally {
      await close();
    }
  });
}

for (const backend of BACKENDS) {
  // A rescue (same nonce) held in flight; the give-up puts the payment in
  // review; an operator settles it by hand while a fresh copy arrives. The
  // settle is the operator's word; nothing else sends, and the rescue's
  // record is refused once it ends, leaving the payment settled.
  Deno.test(`ops race: a settle by hand while a rescue is in flight and a copy arrives: one send, settled stays [${backend.name}]`, async () => {
    const { store, close } = await backend.open();
    try {
      await settlingOnOld(store);
      const clock = { now: 1_000_000 };
      const gated = gatedSender();
      const app = opsApp(store, {
        send: gated.sender.send,
        receipt: () => Promise.resolve("dropped"),
      }, clock);
      const started = gated.nextStart();
      const { delivery: rescue, intent } = await givenUpMidSend(
        app,
        clock,
        started,
      );
      const [settle, copy] = await Promise.all([
        app.request("/v1/intents/pi_0002/resolve", {
          method: "POST",
          headers,
          body: JSON.stringify({ to: "settled", version: intent.version }),
        }),
        app.request("/v1/qstash", await qstash("msg_2", "0")),
      ]);
      assert.equal(settle.status, 200, await settle.clone().text());
      assert.equal(copy.status, 200, await copy.text());
      gated.releaseAll();
      await (await rescue).text();
      assert.equal(gated.sends, 1);
      assert.equal(gated.maxInFlight, 1);
      const after = await store.getIntent("pi_0002");
      assert.equal(after?.state, "settled");
      assert.equal(after?.hold, "captured");
    } finally {
      await close();
    }
  });

  // A payment failed by hand; its letter discarded while a late copy of
  // the given-up message and a repeat of the give-up arrive: nothing sent,
  // nothing resolved again, the letter gone, and the discard's answer true.
  Deno.test(`ops race: a discard while a late copy and a repeated give-up arrive: nothing sent, the letter stays gone [${backend.name}]`, async () => {
    const { store, close } = await backend.open();
    try {
      const { app, gated } = await raceApp(store, { maxDeliveries: 2 });
      // Delivery 1 of 2 sends (held); the queue gives up meanwhile.
      const started = gated.nextStart();
      const first = app.request("/v1/qstash", await qstash("msg_1", "0"));
      await started;
      gated.releaseAll();
      await (await first).text();
      const gaveUp = await app.request(
        "/v1/qstash/failed",
        await qstashFailed("msg_1"),
      );
      assert.equal(gaveUp.status, 200, await gaveUp.clone().text());
      const { intent, deadLetter } = await (await app.request(
        "/v1/intents/pi_0002",
        { headers },
      )).json();
      assert.equal(intent.state, "needs_review");
      const failed = await app.request("/v1/intents/pi_0002/resolve", {
        method: "POST",
        headers,
        body: JSON.stringify({
          to: "failed",
          version: intent.version,
          nonceChecked: true,
        }),
      });
      // gatedSender's receipts answer pending: the fail waits for it.
      assert.equal(failed.status, 409, await failed.clone().text());
      assert.equal(gated.sends, 1);
      const [discard, late, repeat] = await Promise.all([
        app.request(
          `/v1/dead-letters/pi_0002/settle?version=${
            encodeURIComponent(deadLetter.version)
          }`,
          { method: "DELETE", headers },
        ),
        app.request("/v1/qstash", await qstash("msg_1", "1")),
        app.request("/v1/qstash/failed", await qstashFailed("msg_1")),
      ]);
      // In review, its letter is the record of why: the discard is refused.
      assert.equal(discard.status, 409, await discard.clone().text());
      await late.text();
      await repeat.text();
      assert.equal(gated.sends, 1);
      assert.notEqual(await store.getDeadLetter("pi_0002/settle"), null);
      assert.equal((await store.getIntent("pi_0002"))?.state, "needs_review");
    } finally {
      await close();
    }
  });
}

for (const backend of BACKENDS) {
  // As the three above, but the send's record failed (the store down for
  // it): its tx is on no record, known to the process alone, whose route
  // reads its receipt, and warns every fail that arrived before the
  // send-ended warning was given; the operator's look made again stands.
  Deno.test(`ops race: after a send that landed whose record failed, a fail by hand reads its tx on no record [${backend.name}]`, async () => {
    const { store, close } = await backend.open();
    try {
      const landed = await sendEndedInReview(store, "landed", {
        recordFails: true,
      });
      assert.equal(landed.chain.size, 1);
      const confirmed = await landed.fail();
      const confirmedBody = await confirmed.json();
      assert.equal(confirmed.status, 409, JSON.stringify(confirmedBody));
      assert.match(confirmedBody.type, /tx-confirmed$/);
      assert.match(confirmedBody.detail, /0xlanded \(on no record/);
      assert.deepEqual((await store.getIntent("pi_0002"))?.txHashes, []);
    } finally {
      await close();
    }
  });

  Deno.test(`ops race: after a send in doubt whose record failed, two fails posted at once are both warned send-ended, then one taken [${backend.name}]`, async () => {
    const { store, close } = await backend.open();
    try {
      const doubt = await sendEndedInReview(store, "doubt", {
        recordFails: true,
      });
      assert.equal(doubt.ended.status, 503);
      // Its record failed outright (no refusal): it may have landed, and
      // another instance's write-ahead at the same time may be under it.
      await waitedOut(() => doubt.fail(), doubt.clock);
      await twoFailsRefused(store, doubt.fail, /send-ended$/);
      const again = await doubt.fail();
      assert.equal(again.status, 200, await again.clone().text());
      assert.equal((await store.getIntent("pi_0002"))?.hold, "voided");
    } finally {
      await close();
    }
  });
}

for (const backend of BACKENDS) {
  for (
    const [how, options] of [
      // As above, but the send's answer is a refusal declared not sent:
      // nothing left, so the operator's look stands, and the fail is
      // taken at once.
      ["ended refused (not sent)", {}],
      // And the store refused that record as busy (nothing written): a
      // refusal as a lost race is, so this process knows its send ended.
      [
        "ended refused (not sent), its record refused as busy,",
        { recordBusy: true },
      ],
    ] as const
  ) {
    Deno.test(`ops race: a fail by hand posted after a send the operator's look overlapped ${how} is taken at once [${backend.name}]`, async () => {
      const { store, close } = await backend.open();
      try {
        const { ended, fail } = await sendEndedInReview(
          store,
          "refused",
          options,
        );
        assert.equal(ended.status, 503, await ended.clone().text());
        const first = await fail();
        assert.equal(first.status, 200, await first.clone().text());
        assert.equal((await store.getIntent("pi_0002"))?.hold, "voided");
      } finally {
        await close();
      }
    });
  }
}

for (const backend of BACKENDS) {
  // A rescue (same nonce) of a tx on record ends in doubt after the
  // give-up put the payment in review, its record failed; the tx on
  // record then reads mined and reverted: its nonce is spent, so no send
  // of the payment can land, and a fail is taken at once, not warned.
  Deno.test(`ops race: a fail by hand after a rescue ended in doubt, with a tx on record mined and reverted, is taken at once [${backend.name}]`, async () => {
    const { store, close } = await backend.open();
    try {
      await settlingOnOld(store);
      const clock = { now: 1_000_000 };
      let finish!: () => void;
      let began!: () => void;
      const sending = new Promise<void>((r) => began = r);
      let reverted = false;
      const app = opsApp(recordsFail(store), {
        send: () => {
          began();
          return new Promise((_, reject) =>
            finish = () => reject(new Error("socket hang up"))
          );
        },
        receipt: () =>
          reverted
            ? Promise.reject(poison(new Error("0xold reverted")))
            : Promise.resolve("dropped"),
      }, clock);
      // The rescue of 0xold, which read dropped, held; the give-up meanwhile.
      const { delivery, intent } = await givenUpMidSend(app, clock, sending);
      finish();
      assert.equal((await delivery).status, 503);
      reverted = true;
      const fail = await app.request("/v1/intents/pi_0002/resolve", {
        method: "POST",
        headers,
        body: JSON.stringify({ to: "failed", version: intent.version }),
      });
      assert.equal(fail.status, 200, await fail.clone().text());
      assert.equal((await store.getIntent("pi_0002"))?.hold, "voided");
    } finally {
      await close();
    }
  });
}

for (const backend of BACKENDS) {
  // Two fails on a look made while the send ran, whose record failed; the
  // first one's body is slow to come, and the other is answered send-ended meanwhile. The slow
  // one arrived before that warning was given, so it cannot have followed
  // it, however late its body ends: it is warned too.
  Deno.test(`ops race: a fail whose body comes after the send-ended warning was given to another, but which arrived before it, is warned too [${backend.name}]`, async () => {
    const { store, close } = await backend.open();
    try {
      const { ended, fail, failText, clock } = await sendEndedInReview(
        store,
        "doubt",
        { recordFails: true },
      );
      assert.equal(ended.status, 503);
      await waitedOut(() => fail(), clock);
      let send!: ReadableStreamDefaultController<Uint8Array>;
      let reading!: () => void;
      const read = new Promise<void>((resolve) => reading = resolve);
      const slowBody = new ReadableStream<Uint8Array>({
        start: (controller) => void (send = controller),
        pull: () => reading(),
      }, { highWaterMark: 0 });
      const slow = fail(slowBody);
      // The slow request is under way: the route reads its body, which
      // has not come.
      await read;
      const warned = await fail();
      const warnedBody = await warned.json();
      assert.equal(warned.status, 409, JSON.stringify(warnedBody));
      assert.match(warnedBody.type, /send-ended$/);
      send.enqueue(new TextEncoder().encode(failText));
      send.close();
      const late = await slow;
      const lateBody = await late.json();
      assert.equal(
        (await store.getIntent("pi_0002"))?.hold,
        "pending",
        `a fail that arrived before the warning voided the hold: ${late.status} ${
          JSON.stringify(lateBody)
        }`,
      );
      assert.equal(late.status, 409, JSON.stringify(lateBody));
      assert.match(lateBody.type, /send-ended$/);
    } finally {
      await close();
    }
  });
}
