/**
 * `POST /v1/deliveries` leaves a bridge's give-up 1 KiB past
 * `MAX_BODY_BYTES`, and no more: a give-up of `MAX_BODY_BYTES` + 1024 bytes
 * is taken, one byte more is refused 413, and a refusal for the size, found
 * from `Content-Length` or as a chunked body is read, names the delivery's
 * limit, `MAX_BODY_BYTES`, not the give-up's room past it. Within that room,
 * a signed body that carries `gaveUp` is read as a give-up, its faults 400.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { NewIntent } from "../../mod.ts";
import { genericRequest, makeApp, NOW } from "./_app.ts";

const LIMIT = 1024;
const ROOM = 1024;

const settling: NewIntent = {
  id: "pi_0002",
  state: "settling",
  hold: "pending",
  settlingSince: 0,
  lastBroadcast: { outcome: "unknown", at: 0, error: "timeout" },
};

/** A give-up of the settling intent's job, `bytes` long (JSON whitespace). */
function giveUp(bytes: number): string {
  const body = JSON.stringify({
    job: { intentId: "pi_0002", kind: "settle" },
    gaveUp: { deliveries: 3, messageId: "m_1" },
  });
  return body + " ".repeat(bytes - body.length);
}

Deno.test("POST /v1/deliveries takes a give-up of MAX_BODY_BYTES + 1024 bytes, and refuses one byte more 413 naming MAX_BODY_BYTES", async () => {
  const { app, store } = await makeApp({
    intents: [settling],
    deps: { maxBodyBytes: LIMIT },
  });
  const over = await app.request(
    "/v1/deliveries",
    await genericRequest(giveUp(LIMIT + ROOM + 1)),
  );
  assert.equal(over.status, 413);
  assert.equal(
    (await over.json()).detail,
    `A request body may be at most ${LIMIT} bytes.`,
  );
  assert.equal((await store.getIntent("pi_0002"))?.state, "settling");
  const fits = await app.request(
    "/v1/deliveries",
    await genericRequest(giveUp(LIMIT + ROOM)),
  );
  assert.equal(fits.status, 200, await fits.clone().text());
  await fits.body?.cancel();
  assert.equal((await store.getIntent("pi_0002"))?.state, "needs_review");
});

Deno.test("POST /v1/deliveries refused for its size past the give-up's room, by Content-Length or as a chunked body is read, names MAX_BODY_BYTES", async () => {
  const { app } = await makeApp({ deps: { maxBodyBytes: LIMIT } });
  const body = "x".repeat(4 * LIMIT);
  for (const framing of ["length", "chunked"] as const) {
    const res = await app.request("/v1/deliveries", {
      method: "POST",
      body: framing === "length" ? body : new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode(body));
          controller.close();
        },
      }),
      headers: {
        "x-signature": `t=${NOW / 1000},v1=${"0".repeat(64)}`,
        ...(framing === "length"
          ? { "content-length": String(body.length) }
          : { "transfer-encoding": "chunked" }),
      },
    });
    assert.equal(res.status, 413, framing);
    assert.equal(
      (await res.json()).detail,
      `A request body may be at most ${LIMIT} bytes.`,
      framing,
    );
  }
});

Deno.test("POST /v1/deliveries past MAX_BODY_BYTES, within a give-up's room, refuses 413, as a body over the limit, what is unsigned, not JSON or without gaveUp, a t out of time 401 first", async () => {
  const { app } = await makeApp({ deps: { maxBodyBytes: LIMIT } });
  const tooLarge = `A request body may be at most ${LIMIT} bytes.`;
  const bytes = LIMIT + ROOM / 2;
  // Signed, but no JSON: its size, not its shape, is what is wrong.
  const notJson = await app.request(
    "/v1/deliveries",
    await genericRequest("x".repeat(bytes)),
  );
  assert.equal(notJson.status, 413);
  assert.equal((await notJson.json()).detail, tooLarge);
  // A give-up whose signature is not the body's: its size.
  const badSignature = await app.request(
    "/v1/deliveries",
    await genericRequest(giveUp(bytes), {
      signature: `t=${NOW / 1000},v1=${"0".repeat(64)}`,
    }),
  );
  assert.equal(badSignature.status, 413);
  assert.equal((await badSignature.json()).detail, tooLarge);
  // A t an hour ahead: the clock is said first, as within the limit.
  const stale = await app.request(
    "/v1/deliveries",
    await genericRequest(giveUp(bytes), {
      signature: `t=${NOW / 1000 + 3600},v1=${"0".repeat(64)}`,
    }),
  );
  assert.equal(stale.status, 401);
  assert.match(
    (await stale.json()).detail,
    /^The X-Signature timestamp is more than 5 minutes old, or more than 30 seconds ahead/,
  );
});

Deno.test("POST /v1/deliveries past MAX_BODY_BYTES, within a give-up's room, reads a signed body that carries gaveUp as a give-up: its faults are 400 as within the limit, not 413", async () => {
  const { app, store } = await makeApp({
    intents: [settling],
    deps: { maxBodyBytes: LIMIT },
  });
  const bytes = LIMIT + ROOM / 2;
  const padded = (value: unknown) => {
    const body = JSON.stringify(value);
    return body + " ".repeat(bytes - body.length);
  };
  const job = { intentId: "pi_0002", kind: "settle" };
  for (
    const [body, detail] of [
      [
        padded({ job, gaveUp: 5 }),
        /^'gaveUp' must be an object: current value is 5\./,
      ],
      [
        padded({ gaveUp: { deliveries: 3, messageId: "m_1" } }),
        /^'job' is missing: /,
      ],
      [
        padded({
          job,
          delivery: 3,
          gaveUp: { deliveries: 3, messageId: "m_1" },
        }),
        /^'delivery' and 'gaveUp' cannot both be given/,
      ],
    ] as const
  ) {
    const res = await app.request(
      "/v1/deliveries",
      await genericRequest(body),
    );
    assert.equal(res.status, 400);
    assert.match((await res.json()).detail, detail);
  }
  assert.equal((await store.getIntent("pi_0002"))?.state, "settling");
});
