import assert from "node:assert/strict";
import {
  createRelayer,
  MemoryStore,
  notSent,
  poison,
  type Sender,
  type Store,
} from "../../mod.ts";
import { BACKENDS } from "../_stores.ts";

// Text the world sends (a Sender's error, a signer's tx hash, an unreadable
// message's detail) is stored alike on every store: PostgreSQL text holds
// no U+0000 and its UTF-8 no lone surrogate, which Deno KV and memory keep.

const job = { intentId: "pi_1", kind: "settle" } as const;

/** The reason and last error of the letter the relayer keeps of an unreadable local message. */
async function unreadableLetter(store: Store, raw: string, detail: string) {
  const relayer = await relaying(store, () => Promise.reject(new Error()));
  const jobId = await relayer.keepUnreadable({
    queue: "local",
    id: "m-1",
    raw,
    detail,
  });
  const letter = await store.getDeadLetter(jobId);
  return { reason: letter?.reason, lastError: letter?.lastError };
}

/** A relayer on `store`, `pi_1` authorized, whose Sender answers with `send`. */
async function relaying(store: Store, send: Sender["send"]) {
  await store.createIntent({
    id: "pi_1",
    state: "authorized",
    hold: "pending",
  });
  return createRelayer({
    store,
    sender: { send, receipt: () => Promise.resolve("pending" as const) },
    now: () => 1_000,
    random: () => 0.5,
  });
}

/** What a store kept of `pi_1` and its dead letter, to compare stores by. */
async function kept(store: Store) {
  const intent = await store.getIntent("pi_1");
  const letter = await store.getDeadLetter("pi_1/settle");
  return {
    state: intent?.state,
    hold: intent?.hold,
    lastBroadcast: intent?.lastBroadcast,
    txHashes: intent?.txHashes,
    lastError: letter?.lastError,
    reason: letter?.reason,
  };
}

/** Runs `scenario` on every store and checks each kept the same. */
async function alike<T>(
  t: Deno.TestContext,
  scenario: (store: Store) => Promise<T>,
): Promise<Record<string, T>> {
  const seen: Record<string, T> = {};
  for (const backend of BACKENDS) {
    await t.step(backend.name, async () => {
      const { store, close } = await backend.open();
      try {
        seen[backend.name] = await scenario(store);
      } finally {
        await close();
      }
    });
  }
  const [first, ...rest] = Object.entries(seen);
  for (const [name, value] of rest) {
    assert.deepEqual(value, first![1], `${name} against ${first![0]}`);
  }
  return seen;
}

const TEXTS = [
  ["U+0000", "\0"],
  ["a lone high surrogate", "\uD83D"],
  ["a lone low surrogate", "\uDE00"],
] as const;

for (const [what, char] of TEXTS) {
  const message = `nonce too low: ${char} at 7`;
  Deno.test(`a Sender's declared poison with ${what} in its error fails the intent alike on every store`, async (t) => {
    const seen = await alike(t, async (store) => {
      const relayer = await relaying(
        store,
        () => Promise.reject(poison(notSent(new Error(message)))),
      );
      const outcome = await relayer.deliver(job, 1);
      return { action: outcome.action, ...await kept(store) };
    });
    for (const [name, value] of Object.entries(seen)) {
      assert.equal(value.action, "poison", name);
      assert.equal(value.state, "failed", name);
      assert.ok(value.lastError!.isWellFormed(), name);
      assert.doesNotMatch(value.lastError!, /\0/, name);
    }
  });

  Deno.test(`a Sender's unknown send with ${what} in its error is recorded alike on every store`, async (t) => {
    await alike(t, async (store) => {
      const relayer = await relaying(
        store,
        () => Promise.reject(new Error(message)),
      );
      const outcome = await relayer.deliver(job, 1);
      return { action: outcome.action, ...await kept(store) };
    });
  });

  Deno.test(`a Sender's tx hash with ${what} is taken alike on every store`, async (t) => {
    const seen = await alike(t, async (store) => {
      const relayer = await relaying(
        store,
        () => Promise.resolve({ txHash: `0xab${char}cd` }),
      );
      const outcome = await relayer.deliver(job, 1);
      return { action: outcome.action, ...await kept(store) };
    });
    for (const [name, value] of Object.entries(seen)) {
      // Not recorded as sent under a hash no store can keep as it came.
      assert.equal(value.lastBroadcast?.outcome, "unknown", name);
      assert.deepEqual(value.txHashes, [], name);
    }
  });

  Deno.test(`an unreadable message's detail with ${what} is kept alike on every store`, async (t) => {
    await alike(t, async (store) => {
      return await unreadableLetter(store, message, `not JSON: ${message}`);
    });
  });
}

Deno.test("an unreadable message's detail cut at 300 characters inside an emoji is kept alike on every store", async (t) => {
  const detail = `${"x".repeat(299)}😀 and more`;
  const seen = await alike(t, async (store) => {
    return await unreadableLetter(store, "{", detail);
  });
  for (const [name, value] of Object.entries(seen)) {
    assert.ok(value.lastError!.isWellFormed(), name);
    assert.ok(value.reason!.isWellFormed(), name);
    // Cut before the emoji, not at its half kept as U+FFFD.
    assert.equal(value.lastError, "x".repeat(299), name);
  }
});

Deno.test("an unreadable message's reason cut at 300 characters inside an emoji keeps no half of it", async (t) => {
  const prefix = "unreadable local queue message: ";
  const seen = await alike(t, async (store) => {
    return await unreadableLetter(
      store,
      "{",
      `${"x".repeat(299 - prefix.length)}😀 and more`,
    );
  });
  for (const [name, value] of Object.entries(seen)) {
    // Cut before the emoji, not at its half kept as U+FFFD.
    assert.equal(
      value.reason,
      `${prefix}${"x".repeat(299 - prefix.length)}`,
      name,
    );
  }
});

/**
 * A memory store that keeps, as JSON, what each of its calls was handed:
 * what a store of one's own would be given.
 */
function recording() {
  const handed: string[] = [];
  const memory = new MemoryStore();
  const store = new Proxy(memory, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      return typeof value === "function"
        ? (...args: unknown[]) => {
          handed.push(JSON.stringify(args));
          return value.apply(target, args);
        }
        : value;
    },
  });
  return { store, handed };
}

/** JSON's escape of U+0000 or of a surrogate, which a lone one is written as. */
const UNKEPT_JSON = /\\u0000|\\ud[89a-f][0-9a-f]{2}/i;

for (const [what, char] of TEXTS) {
  Deno.test(`a store of one's own is handed text with ${what} as U+FFFD, as the stores here keep it`, async () => {
    const cases: [string, Sender["send"]][] = [
      [
        "declared poison",
        () => Promise.reject(poison(notSent(new Error(`nonce: ${char}`)))),
      ],
      ["unknown send", () => Promise.reject(new Error(`reset: ${char}`))],
      [
        "long error",
        () => Promise.reject(new Error(`reset: ${char}${"e".repeat(2_000)}`)),
      ],
    ];
    for (const [name, send] of cases) {
      const { store, handed } = recording();
      const relayer = await relaying(store, send);
      await relayer.deliver(job, 1);
      await relayer.giveUp(job, {
        deliveries: 9,
        queue: { queue: "generic", messageId: "m-1" },
      });
      await relayer.keepUnreadable({
        queue: "local",
        id: "m-1",
        raw: "{",
        detail: `not JSON: ${char}`,
      });
      assert.ok(await store.getDeadLetter("pi_1/settle"), name);
      for (const args of handed) {
        assert.doesNotMatch(args, UNKEPT_JSON, name);
      }
    }
  });
}

Deno.test("a Sender's 1 MB error is cut before it is stored, alike on every store", async (t) => {
  const seen = await alike(t, async (store) => {
    const relayer = await relaying(
      store,
      () => Promise.reject(poison(notSent(new Error("e".repeat(1 << 20))))),
    );
    const outcome = await relayer.deliver(job, 1);
    return { action: outcome.action, ...await kept(store) };
  });
  for (const [name, value] of Object.entries(seen)) {
    assert.equal(value.state, "failed", name);
    assert.ok(value.lastError!.length < 2_000, name);
    assert.ok(value.lastBroadcast!.error!.length < 2_000, name);
  }
});

for (const [what, char] of TEXTS) {
  Deno.test(`a queue's message id with ${what} is delivered and given up on alike on every store`, async (t) => {
    const seen = await alike(t, async (store) => {
      const relayer = await relaying(
        store,
        () => Promise.reject(new Error("node down")),
      );
      const ids = { queue: "cloudflare", dlqId: `m${char}1` } as const;
      const first = await relayer.deliver(job, 1, { message: ids });
      const gaveUp = await relayer.giveUp(job, { deliveries: 4, queue: ids });
      // A late copy of the message given up on sends nothing.
      const late = await relayer.deliver(job, 2, { message: ids });
      const letter = await store.getDeadLetter("pi_1/settle");
      return {
        first: first.action,
        gaveUp: gaveUp.action,
        late: late.action,
        queue: letter?.queue,
        ...await kept(store),
      };
    });
    for (const [name, value] of Object.entries(seen)) {
      assert.equal(value.gaveUp, "poison", name);
      assert.equal(value.state, "needs_review", name);
    }
  });
}

Deno.test("a queue's message ids apart by normal form or case are two messages on every store", async (t) => {
  const ids = ["caf\u00e9", "cafe\u0301", "CAF\u00c9"];
  const seen = await alike(t, async (store) => {
    const relayer = await relaying(
      store,
      () => Promise.reject(new Error("node down")),
    );
    const given = { queue: "cloudflare", dlqId: ids[0]! } as const;
    await relayer.deliver(job, 1, { message: given });
    const gaveUp = await relayer.giveUp(job, { deliveries: 4, queue: given });
    // The give-up's mark names its own id alone.
    const marks = [];
    for (const dlqId of ids) {
      marks.push(await store.deliveries(`gaveup/cloudflare/dlq/${dlqId}`));
    }
    return { gaveUp: gaveUp.action, marks, ...await kept(store) };
  });
  for (const [name, value] of Object.entries(seen)) {
    assert.deepEqual(value.marks, [1, 0, 0], name);
  }
});
