/**
 * Free text a store keeps (a broadcast's error, a dead letter's reason,
 * resolution and last error) reads back alike on every store when it holds
 * U+0000 or a lone UTF-16 surrogate: PostgreSQL keeps each as U+FFFD (its
 * text holds no NUL, its UTF-8 no surrogate), so the memory store and
 * Deno KV do too. A key with a lone surrogate, which Deno KV and
 * PostgreSQL would keep as another id's (U+FFFD), is refused on every one.
 *
 * @module
 */

import assert from "node:assert/strict";
import { BusyError, type Store } from "../../mod.ts";
import { deadLetter } from "../../testing/_fixtures.ts";
import { BACKENDS } from "../_stores.ts";

const ODD = "a\0b\uD83Dc\uDE00d😀";
const KEPT = "a\uFFFDb\uFFFDc\uFFFDd😀";

/** What `store` hands back and reads back of free text holding {@linkcode ODD}. */
async function keptText(store: Store) {
  const imported = await store.createIntent({
    id: "pi_1",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
    lastBroadcast: { outcome: "unknown", at: 1, error: ODD },
  });
  const created = await store.createIntent({
    id: "pi_2",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
    broadcasting: 0,
  });
  const recorded = await store.recordBroadcast("pi_2", created.version, {
    outcome: "not_sent",
    at: 2,
    error: ODD,
  });
  await store.putDeadLetter({
    jobId: "pi_1/settle",
    intentId: "pi_1",
    deliveries: 1,
    cause: "declared",
    reason: ODD,
    resolution: ODD,
    lastError: ODD,
    poisonedAt: 3,
  });
  // A letter that rides in an intent's move, as the relayer's resolution.
  const sent = (await store.getIntent("pi_2"))!;
  await store.transition("pi_2", {
    from: "settling",
    to: "needs_review",
    version: sent.version,
    at: 4,
    deadLetter: {
      jobId: "pi_2/settle",
      intentId: "pi_2",
      deliveries: 2,
      cause: "exhausted",
      reason: ODD,
      resolution: ODD,
      lastError: ODD,
      poisonedAt: 4,
    },
  });
  const moved = await store.getDeadLetter("pi_2/settle");
  const letter = await store.getDeadLetter("pi_1/settle");
  const [, listed] = (await store.listDeadLetters()).items;
  return {
    imported: imported.lastBroadcast?.error,
    importedRead: (await store.getIntent("pi_1"))?.lastBroadcast?.error,
    recorded: recorded.lastBroadcast?.error,
    recordedRead: (await store.getIntent("pi_2"))?.lastBroadcast?.error,
    letter: [letter?.reason, letter?.resolution, letter?.lastError],
    moved: [moved?.reason, moved?.resolution, moved?.lastError],
    listed: [listed?.reason, listed?.resolution, listed?.lastError],
  };
}

for (const backend of BACKENDS) {
  Deno.test(`${backend.name} keeps U+0000 and lone surrogates in free text as U+FFFD, as every store does`, async () => {
    const { store, close } = await backend.open();
    try {
      assert.deepEqual(await keptText(store), {
        imported: KEPT,
        importedRead: KEPT,
        recorded: KEPT,
        recordedRead: KEPT,
        letter: [KEPT, KEPT, KEPT],
        moved: [KEPT, KEPT, KEPT],
        listed: [KEPT, KEPT, KEPT],
      });
    } finally {
      await close();
    }
  });

  Deno.test(`${backend.name} refuses a count, claim or job id with a lone surrogate, which another id's key would hold`, async () => {
    const { store, close } = await backend.open();
    try {
      for (
        const write of [
          () => store.admit({ count: "pi_1/\uD800", now: 1 }),
          // A lone surrogate alone, the whole of the id.
          () => store.admit({ count: "\uDC00", now: 1 }),
          () =>
            store.admit({
              claim: { key: "t\uDC00", now: 1, expiresAt: 9 },
              now: 1,
            }),
          () => store.putDeadLetter(deadLetter("local/\uD800/unreadable", 1)),
        ]
      ) {
        await assert.rejects(
          write(),
          (error) =>
            error instanceof TypeError &&
            /a lone surrogate/.test(error.message),
        );
      }
      // The id as the other stores would have kept it is free.
      assert.equal(await store.admit({ count: "pi_1/\uFFFD", now: 1 }), 1);
    } finally {
      await close();
    }
  });
}

for (const backend of BACKENDS) {
  Deno.test(`${backend.name} keeps a dead letter's odd text as U+FFFD when it is in one field alone`, async () => {
    const { store, close } = await backend.open();
    try {
      const fields = ["reason", "resolution", "lastError"] as const;
      for (const [i, field] of fields.entries()) {
        const jobId = `pi_${i}/settle`;
        await store.putDeadLetter({
          jobId,
          intentId: `pi_${i}`,
          deliveries: 1,
          cause: "declared",
          reason: "r",
          resolution: "s",
          lastError: "e",
          poisonedAt: 1,
          [field]: ODD,
        });
        const letter = await store.getDeadLetter(jobId);
        assert.deepEqual(
          [letter?.reason, letter?.resolution, letter?.lastError],
          fields.map((other) =>
            other === field
              ? KEPT
              : { reason: "r", resolution: "s", lastError: "e" }[other]
          ),
          field,
        );
      }
    } finally {
      await close();
    }
  });
}

for (const backend of BACKENDS) {
  Deno.test(`${backend.name} reads nothing under an id with a lone surrogate, not the id whose U+FFFD it would be kept as`, async () => {
    const { store, close } = await backend.open();
    try {
      await store.putDeadLetter(deadLetter("local/\uFFFD/unreadable", 1));
      await store.admit({ count: "pi_1/\uFFFD", now: 1 });
      assert.equal(await store.getDeadLetter("local/\uD800/unreadable"), null);
      assert.equal(await store.getDeadLetter("local/\uDC00/unreadable"), null);
      assert.equal(await store.deliveries("pi_1/\uD800"), 0);
      // The ids themselves are there.
      assert.ok(await store.getDeadLetter("local/\uFFFD/unreadable"));
      assert.equal(await store.deliveries("pi_1/\uFFFD"), 1);
    } finally {
      await close();
    }
  });
}

for (const backend of BACKENDS) {
  Deno.test(`${backend.name} releases no lease for an owner with a lone surrogate, not the lease of the owner whose U+FFFD it would be kept as`, async () => {
    const { store, close } = await backend.open();
    try {
      const read = await store.createIntent({
        id: "pi_1",
        state: "authorized",
        hold: "pending",
      });
      await store.putDeadLetter(deadLetter("pi_1/settle", 10), {
        intentVersion: read.version,
        lease: { owner: "drop\uFFFD", ttlMs: 1_000, now: 10, keep: true },
      });
      await store.releaseLease!("pi_1", "drop\uD800");
      await store.releaseLease!("pi_1", "drop\uDC00");
      // The lease of the owner itself still holds another owner off.
      const held = (await store.getIntent("pi_1"))!;
      await assert.rejects(
        store.transition("pi_1", {
          from: "authorized",
          to: "settling",
          version: held.version,
          at: 20,
        }, { lease: { owner: "next", ttlMs: 1_000, now: 20 } }),
        (error) => error instanceof BusyError,
      );
    } finally {
      await close();
    }
  });
}
