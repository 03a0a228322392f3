import assert from "node:assert/strict";
import { notSent, poison, ScriptedSender } from "../../mod.ts";
import { BACKENDS } from "../_stores.ts";
import { genericRequest, makeApp, OPS } from "./_app.ts";

// Through the webhook, on every store: ids apart by case are two intents,
// an id outside the rule (accented, in either normal form) is refused
// before any store sees it, and a Sender's error with U+0000 and a lone
// surrogate reads back the same from the dead-letter list.

const ops = { authorization: `Bearer ${OPS}` };

/** What the app on `store` answers to the same requests. */
async function answers(open: (typeof BACKENDS)[number]) {
  const { store, close } = await open.open();
  try {
    await store.createIntent({
      id: "pi_1",
      state: "authorized",
      hold: "pending",
    });
    const { app } = await makeApp({
      deps: {
        store,
        sender: new ScriptedSender({
          pi_1: {
            sends: [{
              error: poison(notSent(new Error("bad \0 \uD83D nonce"))),
            }],
          },
        }),
      },
    });
    const created: number[] = [];
    for (const id of ["PI_2", "pi_2", "caf\u00e9", "cafe\u0301"]) {
      const answer = await app.request("/v1/intents", {
        method: "POST",
        headers: { ...ops, "content-type": "application/json" },
        body: JSON.stringify({ id, state: "authorized", hold: "pending" }),
      });
      await answer.body?.cancel();
      created.push(answer.status);
    }
    const read = async (path: string) => {
      const answer = await app.request(path, { headers: ops });
      return { status: answer.status, body: await answer.json() };
    };
    const delivered = await app.request(
      "/v1/deliveries",
      await genericRequest(
        JSON.stringify({
          job: { intentId: "pi_1", kind: "settle" },
          delivery: 1,
        }),
      ),
    );
    await delivered.body?.cancel();
    const letters = await read("/v1/dead-letters");
    // A NUL or a lone surrogate's bytes in an id or cursor of the ops routes.
    const odd: number[] = [];
    for (
      const [method, path] of [
        ["GET", "/v1/intents/pi%00"],
        ["GET", "/v1/dead-letters?cursor=1%7Cpi_1%00%2Fsettle"],
        ["GET", "/v1/dead-letters?cursor=1%7Cpi_1%ED%A0%80"],
        ["POST", "/v1/dead-letters/pi_1%00/settle/redrive"],
        ["POST", "/v1/dead-letters/local/m%00/unreadable/redrive"],
        ["DELETE", "/v1/dead-letters/pi_1%00/settle"],
        ["DELETE", "/v1/dead-letters/pi_1%ED%A0%80/settle"],
      ] as const
    ) {
      const answer = await app.request(path, { method, headers: ops });
      await answer.body?.cancel();
      odd.push(answer.status);
    }
    return {
      created,
      odd,
      upper: (await read("/v1/intents/PI_2")).body.intent?.id,
      lower: (await read("/v1/intents/pi_2")).body.intent?.id,
      delivered: delivered.status,
      letters: letters.body.items.map((
        item: { jobId: string; lastError: string; reason: string },
      ) => [item.jobId, item.lastError, item.reason]),
      intent: (await read("/v1/intents/pi_1")).body.intent?.lastBroadcast,
    };
  } finally {
    await close();
  }
}

Deno.test("the webhook answers alike on every store for ids apart by case or normal form and for a Sender's error with U+0000 and a lone surrogate", async (t) => {
  const seen: [string, Awaited<ReturnType<typeof answers>>][] = [];
  for (const backend of BACKENDS) {
    await t.step(backend.name, async () => {
      seen.push([backend.name, await answers(backend)]);
    });
  }
  const [, first] = seen[0]!;
  const rest = seen.slice(1);
  assert.deepEqual(first.created, [201, 201, 400, 400]);
  assert.deepEqual([first.upper, first.lower], ["PI_2", "pi_2"]);
  assert.equal(first.letters.length, 1);
  assert.deepEqual(first.odd, [400, 400, 200, 400, 400, 400, 400]);
  assert.match(first.letters[0][1], /bad \uFFFD \uFFFD nonce/);
  for (const [name, value] of rest) {
    assert.deepEqual(value, first, name);
  }
});
