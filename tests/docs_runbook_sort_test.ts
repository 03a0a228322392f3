/**
 * The runbook's sort of a burst of dead letters by their intents' state
 * now, run as written (bash, curl and jq) against the app served on
 * loopback: an intent whose read fails (a 503 of the service's, or an
 * answer without JSON from a proxy in front of it) is not sorted as gone,
 * since the runbook has the letters of gone intents discarded. And the
 * delivery line it shows as the log's is one the service writes.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  createRelayer,
  type DeadLetter,
  HttpSender,
  MemoryStore,
  ScriptedSender,
} from "../mod.ts";
import { signer } from "../examples/signer_stub.ts";
import { createApp } from "../webhook/app.ts";
import { suitesAvailable } from "./_postgres.ts";
import { runs } from "./_runs.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const OPS = "ops-token-for-runbook-tests";

/** Whether `name` runs here (`name --version`). */
const has = (name: string) => runs(name, ["--version"]);

const shellAvailable = suitesAvailable(
  await has("bash") && await has("curl") && await has("jq"),
  "the runbook's shell tests",
  "no bash, curl or jq on the PATH",
  "apt-get install curl jq",
);

/**
 * Runs `blocks` of runbook.md with bash in `dir`, after its first sh block
 * (which sets `R`, then pointed at `port`), as an operator pastes them.
 */
async function runbookRun(
  port: number,
  dir: string,
  ...blocks: string[]
): Promise<{ success: boolean; stdout: string; stderr: string }> {
  const top = Deno.readTextFileSync(join(ROOT, "docs/runbook.md"));
  const first = /```sh\n([\s\S]*?)```/.exec(top);
  assert.ok(first, "runbook.md has no sh block");
  assert.match(first[1]!, /^R=/m, "runbook.md's first block sets R");
  const run = await new Deno.Command("bash", {
    args: [
      "-c",
      [first[1], `R=http://127.0.0.1:${port}`, ...blocks].join("\n"),
    ],
    cwd: dir,
    env: { OPS_TOKEN: OPS },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decoder = new TextDecoder();
  return {
    success: run.success,
    stdout: decoder.decode(run.stdout),
    stderr: decoder.decode(run.stderr),
  };
}

/** The `sh` blocks of runbook.md's section `heading`, up to the next heading. */
function shBlocks(heading: string): string[] {
  const runbook = Deno.readTextFileSync(join(ROOT, "docs/runbook.md"));
  const start = runbook.indexOf(`\n## ${heading}\n`);
  assert.notEqual(start, -1, `runbook.md has no '## ${heading}'`);
  const end = runbook.indexOf("\n## ", start + 1);
  const section = runbook.slice(start, end === -1 ? undefined : end);
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

/** A store whose read of `pi_blip` fails, as in a blip of the database. */
class BlippingStore extends MemoryStore {
  override getIntent(id: string) {
    return id === "pi_blip"
      ? Promise.reject(new Error("connection terminated unexpectedly"))
      : super.getIntent(id);
  }
}

function letter(intentId: string, poisonedAt: number): DeadLetter {
  return {
    jobId: `${intentId}/settle`,
    intentId,
    deliveries: 10,
    cause: "exhausted",
    reason: "no luck after 10 deliveries",
    resolution: "job dropped, intent still authorized",
    lastError: "intent is busy with another delivery",
    poisonedAt,
  };
}

Deno.test({
  name:
    "runbook.md's sort of dead letters reads an intent whose read failed as unread, not gone, and a missing one as gone",
  ignore: !shellAvailable,
  async fn() {
    const store = new BlippingStore();
    for (const id of ["pi_kept", "pi_blip"]) {
      await store.createIntent({ id, state: "authorized", hold: "pending" });
    }
    await store.putDeadLetter(letter("pi_kept", 1));
    await store.putDeadLetter(letter("pi_blip", 2));
    await store.putDeadLetter(letter("pi_gone", 3));
    // Reads a proxy in front of the service answers itself: no JSON.
    await store.putDeadLetter(letter("pi_proxied", 4));
    await store.putDeadLetter(letter("pi_empty", 5));
    const app = createApp({
      store,
      sender: new ScriptedSender({}),
      opsToken: OPS,
      now: () => 1_000_000,
    });
    const server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen() {} },
      (request) => {
        const { pathname } = new URL(request.url);
        if (pathname.endsWith("/pi_proxied")) {
          return new Response("<html><h1>502 Bad Gateway</h1></html>", {
            status: 502,
            headers: { "content-type": "text/html" },
          });
        }
        if (pathname.endsWith("/pi_empty")) {
          return new Response(null, { status: 504 });
        }
        return app.fetch(request);
      },
    );
    const dir = await Deno.makeTempDir();
    try {
      const [sort] = shBlocks("A burst of dead letters");
      assert.ok(sort, "runbook.md's 'A burst of dead letters' has no sh block");
      const run = await runbookRun(server.addr.port, dir, sort);
      assert.ok(run.success, `the sort failed: ${run.stderr}`);
      const states = new Map(
        Deno.readTextFileSync(join(dir, "states.txt")).trim().split("\n").map(
          (line) => line.split(" ") as [string, string],
        ),
      );
      assert.equal(states.get("pi_kept"), "authorized");
      assert.equal(states.get("pi_gone"), "gone");
      assert.notEqual(states.get("pi_blip"), "gone");
      assert.equal(states.get("pi_blip"), "unread");
      assert.equal(states.get("pi_proxied"), "unread");
      assert.equal(states.get("pi_empty"), "unread");
    } finally {
      await server.shutdown();
      await Deno.remove(dir, { recursive: true });
    }
  },
});

/** A store whose listing of dead letters fails from page `failFrom` on. */
class ListFailingStore extends MemoryStore {
  constructor(readonly failFrom: 1 | 2 | null) {
    super();
  }
  override listDeadLetters(
    options?: { limit?: number; cursor?: string | null },
  ) {
    return this.failFrom === 1 || (this.failFrom === 2 && options?.cursor)
      ? Promise.reject(new Error("connection terminated unexpectedly"))
      : super.listDeadLetters(options);
  }
}

for (const failFrom of [null, 1, 2] as const) {
  Deno.test({
    name: failFrom === null
      ? "runbook.md's sort of dead letters reads every page of the listing"
      : `runbook.md's sort of dead letters stops, and says so, when the listing's ${
        failFrom === 1 ? "first" : "second"
      } page fails: no partial list is sorted as if it were every letter`,
    ignore: !shellAvailable,
    async fn() {
      const store = new ListFailingStore(failFrom);
      // 1,001 letters: the runbook's pages take 1,000, so two pages; the
      // oldest, on the second page, is a job's, the others unreadable
      // messages' (the sort reads no intent for those).
      await store.createIntent({ id: "pi_oldest", state: "settled" });
      await store.putDeadLetter(letter("pi_oldest", 0));
      for (let i = 1; i <= 1_000; i++) {
        await store.putDeadLetter({
          ...letter("", i),
          jobId: `qstash/msg_${i}/unreadable`,
          cause: "declared",
        });
      }
      const app = createApp({
        store,
        sender: new ScriptedSender({}),
        opsToken: OPS,
        now: () => 1_000_000,
      });
      const server = Deno.serve(
        { hostname: "127.0.0.1", port: 0, onListen() {} },
        app.fetch,
      );
      const dir = await Deno.makeTempDir();
      try {
        const [sort, discard] = shBlocks("A burst of dead letters");
        assert.ok(sort && discard, "runbook.md's burst section has its blocks");
        const run = await runbookRun(server.addr.port, dir, sort, discard);
        const { stdout, stderr } = run;
        if (failFrom === null) {
          assert.ok(run.success, `the sort failed: ${stderr}`);
          const letters = JSON.parse(
            Deno.readTextFileSync(join(dir, "letters.json")),
          );
          assert.equal(letters.items.length, 1_001);
          assert.equal(
            Deno.readTextFileSync(join(dir, "states.txt")),
            "pi_oldest settled\n",
          );
          assert.equal(await store.getDeadLetter("pi_oldest/settle"), null);
          return;
        }
        // Nothing sorted, nothing discarded, and the operator told why.
        assert.equal(
          stdout.trim(),
          "",
          `a partial list was sorted and acted on: ${stdout.slice(0, 300)}`,
        );
        assert.ok(await store.getDeadLetter("pi_oldest/settle"));
        assert.match(stderr, /GET \/v1\/dead-letters failed/);
        assert.match(stderr, /store-failed/);
      } finally {
        await server.shutdown();
        await Deno.remove(dir, { recursive: true });
      }
    },
  });
}

Deno.test("the delivery line runbook.md shows under 'What to read' has the reason HttpSender gives for the stand-in signer's refused RPC", async () => {
  const runbook = Deno.readTextFileSync(join(ROOT, "docs/runbook.md"));
  const start = runbook.indexOf("\n## What to read\n");
  assert.notEqual(start, -1, "runbook.md has no '## What to read'");
  const section = runbook.slice(start, runbook.indexOf("\n## ", start + 1))
    .replace(/\n\s*/g, " ");
  const shown = /`queue {3}(pi_\w+)\/settle +#1 {2}retry {8}\((.*?)\)`/.exec(
    section,
  );
  assert.ok(shown, "runbook.md shows no local queue's delivery line");
  // The local queue runs in main.ts, whose Sender is HttpSender; the stub
  // (deno task signer) answers a pi_…_timeout intent's send as an RPC
  // node refusing the connection.
  const intentId = `${shown[1]}_timeout`;
  const store = new MemoryStore();
  await store.createIntent({
    id: intentId,
    state: "authorized",
    hold: "pending",
  });
  const relayer = createRelayer({
    store,
    sender: new HttpSender({
      url: "http://signer.invalid",
      fetch: (input, init) => Promise.resolve(signer(new Request(input, init))),
    }),
  });
  const outcome = await relayer.deliver({ intentId, kind: "settle" }, 1);
  assert.equal(outcome.action, "retry");
  assert.equal(shown[2], outcome.reason);
});

Deno.test({
  name:
    "runbook.md's discard and redrive loops, run as written, put a refusal's detail on its intent's line, where they printed its status alone",
  ignore: !shellAvailable,
  async fn() {
    const store = new MemoryStore();
    // Sorted as authorized, settled since: its redrive is refused (409).
    await store.createIntent({ id: "pi_moved", state: "settled" });
    await store.createIntent({
      id: "pi_ready",
      state: "authorized",
      hold: "pending",
    });
    // Sorted as gone, created since: its discard is refused (409).
    await store.createIntent({
      id: "pi_back",
      state: "authorized",
      hold: "pending",
    });
    for (
      const [id, at] of [["pi_moved", 1], ["pi_ready", 2], [
        "pi_back",
        3,
      ]] as const
    ) {
      await store.putDeadLetter(letter(id, at));
    }
    const published: unknown[] = [];
    const app = createApp({
      store,
      sender: new ScriptedSender({}),
      opsToken: OPS,
      now: () => 1_000_000,
      redriveTo: {
        publish: (job) => {
          published.push(job);
          return Promise.resolve();
        },
      },
    });
    const server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen() {} },
      app.fetch,
    );
    const dir = await Deno.makeTempDir();
    try {
      const [, discard, redrive] = shBlocks("A burst of dead letters");
      assert.ok(
        discard && redrive,
        "runbook.md's burst section has its blocks",
      );
      const listing = await (await app.request("/v1/dead-letters", {
        headers: { authorization: `Bearer ${OPS}` },
      })).text();
      Deno.writeTextFileSync(join(dir, "letters.json"), listing);
      Deno.writeTextFileSync(
        join(dir, "states.txt"),
        "pi_back gone\npi_moved authorized\npi_ready authorized\n",
      );
      const { stdout } = await runbookRun(
        server.addr.port,
        dir,
        discard,
        redrive,
      );
      const lines = stdout.trimEnd().split("\n");
      assert.equal(lines.length, 3, stdout);
      assert.match(lines[0]!, /^409 pi_back: \S.*/);
      assert.match(lines[1]!, /^409 pi_moved: .*settled/);
      assert.equal(lines[2], "202 pi_ready");
      assert.equal(published.length, 1);
    } finally {
      await server.shutdown();
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name:
    "runbook.md's queueing again of the jobs a store outage held up, run as written, puts each answer on its intent's line, a refusal's detail too",
  ignore: !shellAvailable,
  async fn() {
    const store = new MemoryStore();
    await store.createIntent({
      id: "pi_held",
      state: "authorized",
      hold: "pending",
    });
    const app = createApp({
      store,
      sender: new ScriptedSender({}),
      opsToken: OPS,
      now: () => 1_000_000,
      enqueue: () => Promise.resolve(),
    });
    const server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen() {} },
      app.fetch,
    );
    const dir = await Deno.makeTempDir();
    try {
      const runbook = Deno.readTextFileSync(join(ROOT, "docs/runbook.md"));
      const line =
        /`(grep 'failed unexpectedly' relayer\.log [^`]*\/v1\/jobs[^`]*)`/
          .exec(runbook);
      assert.ok(line, "runbook.md queues the held-up jobs again");
      Deno.writeTextFileSync(
        join(dir, "relayer.log"),
        "worker  pi_held/settle  failed unexpectedly\n" +
          "worker  pi_gone/settle  failed unexpectedly\n",
      );
      const { stdout } = await runbookRun(server.addr.port, dir, line[1]!);
      const lines = stdout.trimEnd().split("\n");
      assert.equal(lines.length, 2, lines.join("\n"));
      assert.match(lines[0]!, /^pi_gone \{.*"status":404,"detail":"\S/);
      assert.match(lines[1]!, /^pi_held \{.*"enqueued":true\}$/);
    } finally {
      await server.shutdown();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
