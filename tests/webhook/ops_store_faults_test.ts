/**
 * The operator's routes under a store fault, on every store: a resolution
 * (fail with the hold voided, settle with it captured) and a redrive
 * answer 200 or 202 when the store answers, 409 when it refuses, and 503
 * with `Retry-After` when it fails, whether before the write or with the
 * write landed and its answer lost; the retry then finds what landed.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  BusyError,
  ConflictError,
  type Job,
  ScriptedSender,
  type Store,
} from "../../mod.ts";
import { createApp } from "../../webhook/app.ts";
import { BACKENDS } from "../_stores.ts";

const OPS = "ops-token-for-ops-store-faults";
const ops = { authorization: `Bearer ${OPS}` };

/** A fault of one store method: thrown before it runs, or after it landed. */
interface Fault {
  readonly method: keyof Store;
  readonly error: () => Error;
  readonly landed: boolean;
}

/** `store` with `fault` on its method, every other call as it is. */
function faulty(store: Store, fault: Fault): Store {
  return new Proxy(store, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (typeof value !== "function") return value;
      if (key !== fault.method) return value.bind(target);
      return async (...args: unknown[]) => {
        if (!fault.landed) throw fault.error();
        await value.apply(target, args);
        throw fault.error();
      };
    },
  });
}

const down = () => new Error("connection reset");

for (const backend of BACKENDS) {
  Deno.test(`POST /v1/intents/:id/resolve under a store fault answers 503 (nothing moved, or the write landed), 409 for a refusal, 200 when only the letter's read fails [${backend.name}]`, async () => {
    const cases: Array<[string, Fault | null, number, boolean]> = [
      ["answered", null, 200, true],
      [
        "read fails",
        { method: "getIntent", error: down, landed: false },
        503,
        false,
      ],
      [
        "write fails",
        { method: "transition", error: down, landed: false },
        503,
        false,
      ],
      [
        "write lands, answer lost",
        { method: "transition", error: down, landed: true },
        503,
        true,
      ],
      [
        "write busy",
        {
          method: "transition",
          error: () => new BusyError("busy"),
          landed: false,
        },
        503,
        false,
      ],
      [
        "write refused",
        {
          method: "transition",
          error: () => new ConflictError("refused by the store"),
          landed: false,
        },
        409,
        false,
      ],
      [
        "letter read fails",
        { method: "getDeadLetter", error: down, landed: false },
        200,
        true,
      ],
    ];
    for (const [name, fault, status, moved] of cases) {
      for (const to of ["failed", "settled"] as const) {
        const { store, close } = await backend.open();
        try {
          const read = await store.createIntent({
            id: "pi_1",
            state: "needs_review",
            hold: "pending",
            settlingSince: 0,
            lastBroadcast: { outcome: "not_sent", at: 0, error: "refused" },
            mayHaveSent: false,
          });
          const app = createApp({
            store: fault === null ? store : faulty(store, fault),
            sender: new ScriptedSender({}),
            opsToken: OPS,
          });
          const res = await app.request("/v1/intents/pi_1/resolve", {
            method: "POST",
            headers: ops,
            body: JSON.stringify({ to, version: read.version }),
          });
          const text = await res.text();
          assert.equal(res.status, status, `${name}, ${to}: ${text}`);
          assert.equal(
            res.headers.get("retry-after"),
            status === 503 ? "5" : null,
            `${name}, ${to}`,
          );
          const now = (await store.getIntent("pi_1"))!;
          assert.equal(
            now.state,
            moved ? to : "needs_review",
            `${name}, ${to}`,
          );
          assert.equal(
            now.hold,
            moved ? (to === "failed" ? "voided" : "captured") : "pending",
            `${name}, ${to}`,
          );
          if (fault?.landed) {
            // Sent again on the version read: the payment is resolved.
            const again = await createApp({
              store,
              sender: new ScriptedSender({}),
              opsToken: OPS,
            }).request("/v1/intents/pi_1/resolve", {
              method: "POST",
              headers: ops,
              body: JSON.stringify({ to, version: read.version }),
            });
            const body = await again.json();
            assert.equal(again.status, 409, JSON.stringify(body));
            assert.match(body.type, /not-in-review$/);
          }
        } finally {
          await close();
        }
      }
    }
  });

  Deno.test(`POST /v1/dead-letters/:intentId/:kind/redrive under a store fault answers 503 redrive-failed and keeps the letter, or finds it gone on the retry if the removal landed; one deduplication id throughout [${backend.name}]`, async () => {
    const cases: Array<[string, Fault]> = [
      ["letter read fails", {
        method: "getDeadLetter",
        error: down,
        landed: false,
      }],
      ["intent read fails", {
        method: "getIntent",
        error: down,
        landed: false,
      }],
      ["mark fails", { method: "admit", error: down, landed: false }],
      ["removal fails", { method: "redrive", error: down, landed: false }],
      ["removal busy", {
        method: "redrive",
        error: () => new BusyError("busy"),
        landed: false,
      }],
      ["removal lands, answer lost", {
        method: "redrive",
        error: down,
        landed: true,
      }],
    ];
    for (const [name, fault] of cases) {
      const { store, close } = await backend.open();
      try {
        await store.createIntent({
          id: "pi_1",
          state: "authorized",
          hold: "pending",
        });
        await store.putDeadLetter({
          jobId: "pi_1/settle",
          intentId: "pi_1",
          deliveries: 3,
          cause: "exhausted",
          reason: "the qstash queue gave up after 3 deliveries",
          resolution: "job dropped, intent still authorized",
          lastError: "the qstash queue gave up",
          poisonedAt: 0,
          queue: { queue: "qstash", messageId: "msg_1" },
        });
        const published: string[] = [];
        const appOn = (s: Store) =>
          createApp({
            store: s,
            sender: new ScriptedSender({}),
            opsToken: OPS,
            redriveTo: {
              publish: (_job: Job, deduplicationId: string) =>
                Promise.resolve(void published.push(deduplicationId)),
            },
          });
        const redrive = (s: Store) =>
          appOn(s).request("/v1/dead-letters/pi_1/settle/redrive", {
            method: "POST",
            headers: ops,
          });
        const res = await redrive(faulty(store, fault));
        const body = await res.json();
        assert.equal(res.status, 503, `${name}: ${JSON.stringify(body)}`);
        assert.match(body.type, /redrive-failed$/, name);
        assert.equal(res.headers.get("retry-after"), "5", name);
        assert.equal(
          await store.getDeadLetter("pi_1/settle") === null,
          fault.landed,
          name,
        );
        const retry = await redrive(store);
        assert.equal(retry.status, fault.landed ? 404 : 202, name);
        assert.equal(await store.getDeadLetter("pi_1/settle"), null, name);
        // A publish before the fault and the retry's: one job on QStash.
        assert.ok(published.length >= 1, name);
        assert.equal(new Set(published).size, 1, `${name}: ${published}`);
      } finally {
        await close();
      }
    }
  });
}
