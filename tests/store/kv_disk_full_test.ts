/**
 * KvStore on a SQLite file whose disk is full: a real tmpfs of 4 MiB,
 * filled to the last byte by a ballast file. SQLite refuses the commit
 * ("database or disk is full") and rolls it back, so nothing of the write
 * landed: the store says so, names the disk and what to do, and writes
 * again once the ballast is removed, on the same handle. What landed is
 * read on a fresh handle after the first is closed (its WAL recovered).
 *
 * @module
 */

import assert from "node:assert/strict";
import { type KvAtomic, type KvLike, KvStore } from "../../store/kv.ts";
import { isNotWritten } from "../../store/_not_written.ts";
import { createRelayer } from "../../mod.ts";
import { mountSmallDisk, smallDiskAvailable } from "../_small_disk.ts";
import {
  assertNotReadyRetried,
  countingApp,
  genericRequest,
  NOW,
  OPS,
  STACK,
} from "../webhook/_app.ts";

/** A disk-full refusal as KvStore words it. */
const DISK_FULL =
  /^Cannot write to Deno KV as the disk that holds its SQLite file is full \(SQLite: "database or disk is full"\): nothing was written\. Free space on that disk; writes resume once there is room, without a restart\b/;

/**
 * A read-only refusal as KvStore words it, quoting SQLite's own words
 * `sqlite`.
 */
function readOnly(sqlite: string): RegExp {
  const quoted = sqlite.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(
    `^Cannot write to Deno KV as its SQLite file is read-only to this process \\(SQLite: "${quoted}"\\): nothing was written\\. Make the file, its -wal and -shm files and their folder writable by this process`,
  );
}

/** Asserts that `write` is refused as read-only ({@linkcode readOnly}), marked as nothing written. */
async function refusedAsReadOnly(
  write: Promise<unknown>,
  sqlite: string,
): Promise<void> {
  await assert.rejects(write, (error: Error) => {
    assert.match(error.message, readOnly(sqlite));
    assert.equal(isNotWritten(error), true);
    return true;
  });
}

/** Deno KV's handle `kv`, each commit of it refused with an Error of `message`. */
function refusingCommits(kv: Deno.Kv, message: string): KvLike {
  return {
    getMany: (keys) => kv.getMany(keys),
    list: (selector, options) => kv.list(selector, options),
    atomic(): KvAtomic {
      const atomic = kv.atomic();
      atomic.commit = () => Promise.reject(new Error(message));
      return atomic;
    },
  };
}

async function onFullDisk(
  test: (world: {
    store: KvStore;
    file: string;
    fill: () => void;
    free: () => void;
  }) => Promise<void>,
): Promise<void> {
  const disk = mountSmallDisk("4m");
  if (typeof disk === "string") throw new Error(disk);
  const file = `${disk.dir}/relayer.kv`;
  const kv = await Deno.openKv(file);
  try {
    await test({
      store: new KvStore(kv),
      file,
      fill: () => disk.fill(),
      free: () => disk.free(),
    });
  } finally {
    kv.close();
    disk.close();
  }
}

Deno.test({
  name:
    "KvStore on a full disk: a refused write says nothing was written, names the full disk, lands nothing, and the same handle writes once there is room",
  ignore: !smallDiskAvailable,
  fn: () =>
    onFullDisk(async ({ store, file, fill, free }) => {
      const settling = await store.createIntent({
        id: "pi_1",
        state: "settling",
        hold: "pending",
        settlingSince: 0,
      });
      fill();
      const refusals: unknown[] = [];
      for (
        const write of [
          () => store.createIntent({ id: "pi_2", state: "authorized" }),
          () =>
            store.transition("pi_1", {
              from: "settling",
              to: "needs_review",
              version: settling.version,
              at: 1,
            }),
        ]
      ) {
        await assert.rejects(write(), (error: Error) => {
          refusals.push(error);
          assert.match(error.message, DISK_FULL);
          assert.equal(isNotWritten(error), true, "marked: nothing written");
          assert.doesNotMatch(error.message, STACK);
          return true;
        });
      }
      assert.equal(refusals.length, 2);
      // Nothing landed, as a fresh handle on the file reads it.
      const other = await Deno.openKv(file);
      try {
        const fresh = new KvStore(other);
        assert.equal(await fresh.getIntent("pi_2"), null);
        assert.equal((await fresh.getIntent("pi_1"))?.state, "settling");
      } finally {
        other.close();
      }
      free();
      // The same handle, no restart: the writes go through.
      assert.equal(
        (await store.createIntent({ id: "pi_2", state: "authorized" })).state,
        "authorized",
      );
      assert.equal(
        (await store.transition("pi_1", {
          from: "settling",
          to: "needs_review",
          version: settling.version,
          at: 1,
        })).state,
        "needs_review",
      );
    }),
});

Deno.test({
  name:
    "createApp() over KvStore on a full disk: an operator's writes answer 503 with nothing changed, a delivery 503 for the queue to retry, /readyz not ready; all recover once there is room",
  ignore: !smallDiskAvailable,
  fn: () =>
    onFullDisk(async ({ store, fill, free }) => {
      await store.createIntent({
        id: "pi_0001",
        state: "authorized",
        hold: "pending",
      });
      const settling = await store.createIntent({
        id: "pi_0002",
        state: "settling",
        hold: "pending",
        settlingSince: 0,
      });
      const review = await store.transition("pi_0002", {
        from: "settling",
        to: "needs_review",
        version: settling.version,
        at: 1,
      });
      let clock = NOW;
      const { app, lines, sent } = countingApp(store, () => clock);
      const headers = {
        authorization: `Bearer ${OPS}`,
        "content-type": "application/json",
      };
      fill();
      await assertNotReadyRetried(app);
      assert.equal(sent(), 0, "nothing sent: its write ahead was refused");
      for (
        const [path, body] of [
          ["/v1/intents", '{"id":"pi_0003","state":"authorized"}'],
          [
            "/v1/intents/pi_0002/resolve",
            JSON.stringify({ to: "settled", version: review.version }),
          ],
        ]
      ) {
        const res = await app.request(path!, {
          method: "POST",
          headers,
          body: body!,
        });
        assert.equal(res.status, 503, path);
        const problem = await res.json();
        assert.equal(problem.type, "urn:relayer:problem:store-failed");
        assert.match(
          problem.detail,
          /was not written \(the relayer's log says why\): nothing changed; try again\.$/,
          path,
        );
      }
      for (const line of lines) assert.doesNotMatch(line, STACK);
      assert.ok(
        lines.some((line) =>
          /creation of intent pi_0003 failed: .*disk that holds its SQLite file is full.*Free space on that disk/
            .test(line)
        ),
        lines.join("\n"),
      );
      assert.equal(await store.getIntent("pi_0003"), null);
      assert.equal((await store.getIntent("pi_0002"))?.state, "needs_review");

      free();
      clock += 2_000; // past /readyz's one-second cache
      const again = await app.request("/readyz");
      assert.equal(again.status, 200);
      await again.body?.cancel();
      const redelivered = await app.request(
        "/v1/deliveries",
        await genericRequest(
          JSON.stringify({
            job: { intentId: "pi_0001", kind: "settle" },
            delivery: 2,
          }),
          { timeS: Math.floor(clock / 1000) },
        ),
      );
      assert.equal(redelivered.status, 503);
      assert.match(
        (await redelivered.json()).reason,
        /^sent 0x(?:ab){32}, waiting for confirmation$/,
      );
      assert.equal(sent(), 1);
    }),
});

Deno.test({
  name:
    "KvStore on a SQLite file Deno KV opened read-only (a volume mounted read-only): a write says nothing was written and what to make writable",
  ignore: !smallDiskAvailable,
  fn: async () => {
    const disk = mountSmallDisk("4m");
    if (typeof disk === "string") throw new Error(disk);
    const readOnly = Deno.makeTempDirSync({ prefix: "relayer_read_only_" });
    const writer = await Deno.openKv(`${disk.dir}/relayer.kv`);
    let reader: Deno.Kv | undefined;
    try {
      await new KvStore(writer).createIntent({ id: "pi_1", state: "created" });
      // The same files through a read-only bind mount, the writer's WAL
      // still there: Deno KV opens them read-only.
      for (
        const args of [
          ["--bind", disk.dir, readOnly],
          ["-o", "remount,bind,ro", readOnly],
        ]
      ) {
        const out = new Deno.Command("mount", { args, stderr: "piped" })
          .outputSync();
        assert.ok(out.success, new TextDecoder().decode(out.stderr));
      }
      reader = await Deno.openKv(`${readOnly}/relayer.kv`);
      const store = new KvStore(reader);
      assert.equal((await store.getIntent("pi_1"))?.state, "created");
      await refusedAsReadOnly(
        store.createIntent({ id: "pi_2", state: "created" }),
        "Can not write to a read-only database.",
      );
      assert.equal(await new KvStore(writer).getIntent("pi_2"), null);
    } finally {
      reader?.close();
      writer.close();
      new Deno.Command("umount", { args: ["-l", readOnly] }).outputSync();
      Deno.removeSync(readOnly);
      disk.close();
    }
  },
});

Deno.test({
  name:
    "a relayer over KvStore whose disk fills while a send is in flight: nothing is sent again but the rescue with the same nonce, the hold is never voided, and the payment ends in review",
  ignore: !smallDiskAvailable,
  fn: () =>
    onFullDisk(async ({ store, fill, free }) => {
      await store.createIntent({
        id: "pi_0001",
        state: "authorized",
        hold: "pending",
      });
      const sends: { replace: boolean }[] = [];
      let clock = 1_000_000;
      const relayer = createRelayer({
        store,
        now: () => clock,
        random: () => 0,
        policy: { maxDeliveries: 3 },
        sender: {
          send(_intent, options) {
            sends.push({ replace: options.replace });
            // The disk fills while the tx is on its way: its record fails.
            if (sends.length === 1) fill();
            return Promise.resolve({ txHash: `0x${"ab".repeat(32)}` });
          },
          receipt: () => Promise.resolve("pending"),
        },
      });
      const job = { intentId: "pi_0001", kind: "settle" } as const;
      const first = await relayer.deliver(job, 1);
      assert.equal(first.action, "retry");
      assert.match(first.reason, /but its record failed: .*disk .* is full/);
      // The queue comes back while the disk is still full, then gives up.
      for (const n of [2, 3]) {
        const outcome = await relayer.deliver(job, n).catch((e) => e);
        assert.ok(
          outcome instanceof Error || outcome.action === "retry",
          String(outcome?.reason ?? outcome),
        );
      }
      const gaveUp = await relayer.giveUp(job, {
        deliveries: 3,
        queue: { queue: "qstash", messageId: "msg_1" },
      }).catch((e) => e);
      assert.ok(
        gaveUp instanceof Error || gaveUp.action === "retry",
        "no resolution while the disk is full",
      );
      const held = await store.getIntent("pi_0001");
      assert.equal(held?.state, "settling");
      assert.equal(held?.hold, "pending");
      assert.notEqual(held?.broadcasting, null, "the write ahead stands");
      free();
      // Past the lease and stuckAfter: the give-up, repeated, resolves.
      clock += 400_000;
      const resolved = await relayer.giveUp(job, {
        deliveries: 3,
        queue: { queue: "qstash", messageId: "msg_1" },
      });
      assert.equal(resolved.action, "poison");
      const after = await store.getIntent("pi_0001");
      assert.equal(after?.state, "needs_review");
      assert.equal(
        after?.hold,
        "pending",
        "never voided: the tx may have left",
      );
      assert.deepEqual(
        sends.slice(1),
        sends.slice(1).map(() => ({ replace: true })),
        "any send after the first is the rescue, same nonce",
      );
    }),
});

Deno.test({
  name:
    "KvStore on a full disk answers a group of waiting writes at once: every write gets the refusal from the group's one commit, none halved into more",
  ignore: !smallDiskAvailable,
  fn: async () => {
    const disk = mountSmallDisk("4m");
    if (typeof disk === "string") throw new Error(disk);
    const kv = await Deno.openKv(`${disk.dir}/relayer.kv`);
    let commits = 0;
    const counted = new Proxy(kv, {
      get(target, key) {
        if (key !== "atomic") {
          const value = Reflect.get(target, key, target);
          return typeof value === "function" ? value.bind(target) : value;
        }
        return () => {
          const atomic = target.atomic();
          const commit = atomic.commit.bind(atomic);
          atomic.commit = () => (commits++, commit());
          return atomic;
        };
      },
    });
    try {
      const store = new KvStore(counted);
      disk.fill();
      const answers = await Promise.allSettled(
        Array.from(
          { length: 20 },
          (_, i) => store.createIntent({ id: `pi_${i}`, state: "created" }),
        ),
      );
      for (const answer of answers) {
        assert.equal(answer.status, "rejected");
        const reason = (answer as PromiseRejectedResult).reason;
        assert.match(reason.message, DISK_FULL);
        assert.equal(isNotWritten(reason), true);
      }
      // The first alone, the other 19 as one group.
      assert.equal(commits, 2);
    } finally {
      kv.close();
      disk.close();
    }
  },
});

Deno.test("KvStore whose commit SQLite refuses with SQLite's own read-only error (SQLITE_READONLY, 'attempt to write a readonly database', not Deno KV's 'Can not write to a read-only database.') says nothing was written and what to make writable", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    // Deno KV's handle, its commits answered as SQLite answers a write
    // to a file it cannot write.
    const sqlite = "attempt to write a readonly database";
    const store = new KvStore(refusingCommits(kv, sqlite));
    await refusedAsReadOnly(
      store.createIntent({ id: "pi_1", state: "created" }),
      sqlite,
    );
    assert.equal(await new KvStore(kv).getIntent("pi_1"), null);
  } finally {
    kv.close();
  }
});

Deno.test("KvStore words as a full disk only SQLite's own 'database or disk is full', not an error that quotes it after other words", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const quoting = "commit failed: database or disk is full";
    await assert.rejects(
      new KvStore(refusingCommits(kv, quoting)).createIntent({
        id: "pi_1",
        state: "created",
      }),
      (error: Error) => {
        assert.equal(error.message, quoting);
        assert.equal(isNotWritten(error), false);
        return true;
      },
    );
  } finally {
    kv.close();
  }
});
