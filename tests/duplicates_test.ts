/**
 * Duplicates under load, over real sockets: the real service (`openService`
 * from main.ts: KvStore on a SQLite temp file, or PostgresStore on a fresh
 * database of the run's PostgreSQL server; HttpSender) served with
 * `Deno.serve` on port 0, and a signer stub on loopback that holds every
 * `/send` for a few milliseconds and watches for two sends of one intent
 * at once. Each round delivers 10 concurrent copies of every job (40 in
 * flight): 20 authorized intents (half with a queue delivery number, half
 * counted by the store) and 20 created intents (counted by the store),
 * until every settle job is acked, then one round of late duplicates.
 *
 * `STUCK_AFTER` is 0, so every copy that sees a broadcast in flight wants
 * to rescue it at once: only the per-intent lease keeps those sends apart.
 * The store-counted jobs make the delivery counter race with itself: only
 * its compare-and-set keeps the count exact. A second test runs the same
 * load against a store that grants every lease and counts without a
 * compare-and-set, and requires the checks to fail there.
 *
 * Set `DUPLICATES_REPORT=1` to print the figures.
 *
 * @module
 */
import assert from "node:assert/strict";
import { openService } from "../main.ts";
import { HttpSender } from "../relayer/http_sender.ts";
import { KvStore } from "../store/kv.ts";
import type {
  Admission,
  Broadcast,
  Intent,
  Transition,
} from "../store/store.ts";
import { hmacSigner } from "../webhook/_auth.ts";
import { createApp } from "../webhook/app.ts";
import { loadConfig } from "../webhook/config.ts";
import { timeout } from "./_timeout.ts";
import { freshDatabase, postgresAvailable } from "./_postgres.ts";

const SECRET = "duplicates-secret-0123456789";
const OPS_TOKEN = "duplicates-ops-0123456789";
const sign = hmacSigner(SECRET);

const SETTLE_NUMBERED = 10; // authorized, the queue numbers deliveries
const SETTLE_COUNTED = 10; // authorized, the store counts deliveries
const CREATED_COUNTED = 20; // never authorized, the store counts deliveries
const COPIES = 10;
const CONCURRENCY = 40;
const MAX_ROUNDS = 10;
const SEND_HOLD_MS = 15;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A signer that holds each `/send` and notices two sends of one intent at once. */
class OverlapStub {
  readonly inFlight = new Map<string, number>();
  readonly sends = new Map<string, number>();
  readonly overlaps: string[] = [];
  readonly hashes = new Map<string, string>();
  readonly confirmed = new Set<string>();
  #reads = new Map<string, number>();
  #next = 0;

  handler = async (request: Request): Promise<Response> => {
    const url = new URL(request.url);
    if (request.method === "POST" && url.pathname === "/send") {
      const { intentId } = await request.json() as { intentId: string };
      const busy = this.inFlight.get(intentId) ?? 0;
      if (busy > 0) this.overlaps.push(intentId);
      this.inFlight.set(intentId, busy + 1);
      this.sends.set(intentId, (this.sends.get(intentId) ?? 0) + 1);
      try {
        await sleep(SEND_HOLD_MS);
      } finally {
        this.inFlight.set(intentId, this.inFlight.get(intentId)! - 1);
      }
      const txHash = `0x${(++this.#next).toString(16).padStart(12, "0")}`;
      this.hashes.set(txHash, intentId);
      return Response.json({ txHash });
    }
    const receipt = /^\/receipt\/(.+)$/.exec(url.pathname);
    if (request.method === "GET" && receipt) {
      const txHash = decodeURIComponent(receipt[1]!);
      const intentId = this.hashes.get(txHash);
      if (intentId === undefined) {
        return Response.json({ error: "no such tx" }, { status: 404 });
      }
      // The chain confirms the intent's nonce from its second receipt read on.
      const reads = (this.#reads.get(intentId) ?? 0) + 1;
      this.#reads.set(intentId, reads);
      if (reads >= 2) this.confirmed.add(txHash);
      return Response.json({ status: reads >= 2 ? "confirmed" : "pending" });
    }
    return Response.json({ error: "not found" }, { status: 404 });
  };
}

interface Answer {
  readonly status: number;
  readonly outcome?: string;
  readonly delivery?: number;
  readonly reason?: string;
}

interface IntentView {
  readonly intent: {
    readonly state: string;
    readonly hold: string | null;
    readonly lastBroadcast: { outcome: string; txHash?: string } | null;
  };
  readonly deliveries: number;
}

/** What a run saw: per job, every answer; per intent, the final view. */
interface Figures {
  readonly rounds: number;
  readonly requests: number;
  readonly answers: ReadonlyMap<string, Answer[]>;
  readonly sent: ReadonlyMap<string, number>;
  readonly finals: ReadonlyMap<string, IntentView>;
  readonly overlaps: readonly string[];
  readonly sends: ReadonlyMap<string, number>;
  readonly confirmed: ReadonlySet<string>;
}

interface Plan {
  readonly id: string;
  readonly state: "authorized" | "created";
  readonly numbered: boolean;
}

function plans(): Plan[] {
  const pad = (n: number) => String(n).padStart(2, "0");
  return [
    ...Array.from({ length: SETTLE_NUMBERED }, (_, i) => ({
      id: `pi_numbered_${pad(i + 1)}`,
      state: "authorized" as const,
      numbered: true,
    })),
    ...Array.from({ length: SETTLE_COUNTED }, (_, i) => ({
      id: `pi_counted_${pad(i + 1)}`,
      state: "authorized" as const,
      numbered: false,
    })),
    ...Array.from({ length: CREATED_COUNTED }, (_, i) => ({
      id: `pi_created_${pad(i + 1)}`,
      state: "created" as const,
      numbered: false,
    })),
  ];
}

/** Runs `tasks` with at most `limit` at once. */
async function pool(
  tasks: (() => Promise<void>)[],
  limit: number,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, tasks.length) }, async () => {
      while (next < tasks.length) await tasks[next++]!();
    }),
  );
}

/** Drives the load against `base` and reads the outcome back. */
async function drive(base: string, stub: OverlapStub): Promise<Figures> {
  const ops = { authorization: `Bearer ${OPS_TOKEN}` };
  const all = plans();
  for (const plan of all) {
    const res = await fetch(`${base}/v1/intents`, {
      method: "POST",
      headers: ops,
      body: JSON.stringify({ id: plan.id, state: plan.state }),
    });
    assert.equal(res.status, 201, await res.text());
  }

  const answers = new Map<string, Answer[]>(all.map((p) => [p.id, []]));
  const sent = new Map<string, number>(all.map((p) => [p.id, 0]));
  const acked = new Set<string>();
  const settleJobs = all.filter((p) => p.state === "authorized");
  let requests = 0;
  let rounds = 0;
  let late = false;
  while (rounds < MAX_ROUNDS) {
    const round = ++rounds;
    const tasks: (() => Promise<void>)[] = [];
    // The copies of one delivery sit next to each other: they run at once.
    for (const plan of all) {
      for (let copy = 0; copy < COPIES; copy++) {
        // Each copy is signed afresh, as a queue's redelivery is: the same
        // signed request twice is a replay, refused with 401 (DESIGN §15).
        // Round and copy make every body, so every signature, its own (two
        // rounds may fall in one second of the signature's clock).
        const body = JSON.stringify({
          job: { intentId: plan.id, kind: "settle" },
          ...(plan.numbered ? { delivery: round } : {}),
          round,
          copy,
        });
        const signature = sign(body, Math.floor(Date.now() / 1000));
        tasks.push(async () => {
          requests++;
          sent.set(plan.id, sent.get(plan.id)! + 1);
          const res = await fetch(`${base}/v1/deliveries`, {
            method: "POST",
            body,
            headers: {
              "content-type": "application/json",
              "x-signature": signature,
            },
          });
          const answer = { status: res.status, ...await res.json() };
          answers.get(plan.id)!.push(answer);
          if (res.status === 200) acked.add(plan.id);
        });
      }
    }
    await pool(tasks, CONCURRENCY);
    if (late) break;
    // Once every settle job is acked, one more round: late duplicates.
    late = settleJobs.every((p) => acked.has(p.id));
  }

  const finals = new Map<string, IntentView>();
  for (const plan of all) {
    const res = await fetch(`${base}/v1/intents/${plan.id}`, { headers: ops });
    assert.equal(res.status, 200);
    finals.set(plan.id, await res.json());
  }
  return {
    rounds,
    requests,
    answers,
    sent,
    finals,
    overlaps: stub.overlaps,
    sends: stub.sends,
    confirmed: stub.confirmed,
  };
}

/** Every check, as a list of what is wrong (empty: all good). */
function problems(figures: Figures): string[] {
  const found: string[] = [];
  if (figures.overlaps.length > 0) {
    found.push(
      `overlap: two /send at once for ${
        [...new Set(figures.overlaps)].join(", ")
      }`,
    );
  }
  for (const plan of plans()) {
    const { id } = plan;
    const answers = figures.answers.get(id)!;
    const view = figures.finals.get(id)!;
    const sent = figures.sent.get(id)!;
    const odd = answers.filter((a) => a.status !== 200 && a.status !== 503);
    if (odd.length > 0) {
      found.push(`${id}: answers ${odd.map((a) => a.status).join(", ")}`);
    }

    // Counted by the store: exact, and every number handed out once.
    if (!plan.numbered) {
      if (view.deliveries !== sent) {
        found.push(
          `count: ${id} shows ${view.deliveries} deliveries, ${sent} sent`,
        );
      }
      const numbers = answers.map((a) => a.delivery).filter((n) =>
        n !== undefined
      ).sort((a, b) => a - b);
      const expected = Array.from({ length: sent }, (_, i) => i + 1);
      if (JSON.stringify(numbers) !== JSON.stringify(expected)) {
        found.push(`count: ${id} delivery numbers are not exactly 1..${sent}`);
      }
    } else if (view.deliveries !== 0) {
      found.push(`count: ${id} was counted although the queue numbered it`);
    }

    if (plan.state === "created") {
      if (view.intent.state !== "created") {
        found.push(`${id}: created, now ${view.intent.state}`);
      }
      if ((figures.sends.get(id) ?? 0) > 0) {
        found.push(`${id}: created, yet the signer got a /send`);
      }
      if (answers.some((a) => a.reason !== "not authorized yet")) {
        found.push(
          `${id}: a created intent answered something else than "not authorized yet"`,
        );
      }
      continue;
    }

    // One broadcast answer per /send the signer saw: none lost, none invented.
    const broadcasts = answers.filter((a) =>
      /^(sent \S+, waiting for confirmation|send: )/.test(a.reason ?? "")
    ).length;
    const sends = figures.sends.get(id) ?? 0;
    if (sends === 0 || broadcasts !== sends) {
      found.push(
        `${id}: the signer saw ${sends} /send, the relayer reported ${broadcasts} broadcasts`,
      );
    }
    // Settled once, on the transaction the signer confirmed.
    const settles = answers.filter((a) =>
      /^\S+ confirmed, intent settled$/.test(a.reason ?? "")
    );
    if (settles.length !== 1) {
      found.push(`${id}: settled by ${settles.length} deliveries`);
    }
    const { intent } = view;
    const txHash = intent.lastBroadcast?.txHash;
    if (
      intent.state !== "settled" || intent.hold !== "captured" ||
      intent.lastBroadcast?.outcome !== "sent" || txHash === undefined ||
      !figures.confirmed.has(txHash) ||
      settles[0]?.reason !== `${txHash} confirmed, intent settled`
    ) {
      found.push(
        `${id}: ended ${intent.state}, hold ${intent.hold}, last tx ${txHash}`,
      );
    }
    // A late duplicate after the ack changes nothing.
    const last = answers.slice(-COPIES);
    if (
      last.some((a) =>
        a.status !== 200 || a.reason !== "intent already settled"
      )
    ) {
      found.push(
        `${id}: a late duplicate did not answer "intent already settled"`,
      );
    }
  }
  return found;
}

function report(name: string, figures: Figures, ms: number): void {
  const env = { name: "env", variable: "DUPLICATES_REPORT" } as const;
  if (
    Deno.permissions.querySync(env).state !== "granted" ||
    !Deno.env.get("DUPLICATES_REPORT")
  ) return;
  const counted = [...figures.finals].filter(([id]) =>
    !id.startsWith("pi_numbered_")
  );
  const sends = [...figures.sends.values()].reduce((a, b) => a + b, 0);
  const statuses = new Map<number, number>();
  for (const list of figures.answers.values()) {
    for (const a of list) {
      statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
    }
  }
  Deno.stderr.writeSync(
    new TextEncoder().encode(
      `${name}: ${figures.requests} requests in ${figures.rounds} rounds ` +
        `(${COPIES} copies, ${CONCURRENCY} in flight), answers ${
          [...statuses].map(([s, n]) => `${s}×${n}`).join(" ")
        }, ${sends} /send, overlaps ${figures.overlaps.length}, ` +
        `store counts checked ${counted.length} jobs (${
          counted.reduce((n, [, v]) => n + v.deliveries, 0)
        } deliveries), problems ${problems(figures).length}, ${ms} ms\n`,
    ),
  );
}

/** A signer stub and a temp dir for one test; `serve` gets the stub's URL and returns the relayer's base URL. */
async function withWorld(
  run: (
    world: { dir: string; stub: OverlapStub; senderUrl: string },
  ) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "relayer_duplicates_" });
  const stub = new OverlapStub();
  const signer = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    stub.handler,
  );
  try {
    await run({
      dir,
      stub,
      senderUrl: `http://127.0.0.1:${signer.addr.port}`,
    });
  } finally {
    await signer.shutdown();
    await Deno.remove(dir, { recursive: true });
  }
}

/** Where the service keeps its state: its settings, and what to remove after. */
const STORES: readonly {
  name: string;
  ignore: boolean;
  open(
    dir: string,
  ): Promise<{ env: Record<string, string>; drop(): Promise<void> }>;
}[] = [
  {
    name: "KvStore",
    ignore: false,
    open: (dir) =>
      Promise.resolve({
        env: { KV_PATH: `${dir}/relayer.kv` },
        drop: () => Promise.resolve(),
      }),
  },
  {
    name: "PostgresStore",
    ignore: !postgresAvailable,
    async open() {
      const database = await freshDatabase();
      return { env: { DATABASE_URL: database.url }, drop: database.drop };
    },
  },
];

for (const backend of STORES) {
  Deno.test({
    name:
      `duplicate deliveries under load never overlap a send, and keep counts and states exact [${backend.name}]`,
    ignore: backend.ignore,
    fn: timeout(120_000, async () => {
      await withWorld(async ({ dir, stub, senderUrl }) => {
        const storage = await backend.open(dir);
        const service = await openService(
          loadConfig({
            WEBHOOK_SECRET: SECRET,
            OPS_TOKEN,
            SENDER_URL: senderUrl,
            SENDER_TIMEOUT: "5s",
            LEASE: "10s",
            ...storage.env,
            MAX_DELIVERIES: "1000",
            STUCK_AFTER: "0",
          }),
          { log: () => {} },
        );
        const server = Deno.serve(
          { hostname: "127.0.0.1", port: 0, onListen() {} },
          service.app.fetch,
        );
        try {
          const started = performance.now();
          const figures = await drive(
            `http://127.0.0.1:${server.addr.port}`,
            stub,
          );
          report(
            backend.name,
            figures,
            Math.round(performance.now() - started),
          );
          assert.deepEqual(problems(figures), []);
          assert.equal(figures.overlaps.length, 0);
          assert.ok(figures.rounds >= 3, "at least two rounds and a late one");
          assert.ok(
            figures.requests >= 3 * COPIES * plans().length,
            `${figures.requests} requests`,
          );
        } finally {
          await server.shutdown();
          await service.close();
          await storage.drop();
        }
      });
    }),
  });
}

/**
 * The broken twin: a KvStore that ignores every lease, and counts a
 * delivery by a read and a blind write (no compare-and-set). It also
 * reads an intent without its send in flight (`broadcasting`): the
 * relayer answers busy on its own when it sees one begun less than a
 * lease ago, so only a store that hides it leaves the lease as the guard.
 */
class CarelessStore extends KvStore {
  #kv: Deno.Kv;
  constructor(kv: Deno.Kv) {
    super(kv);
    this.#kv = kv;
  }
  override async getIntent(id: string): Promise<Intent | null> {
    const intent = await super.getIntent(id);
    return intent === null ? null : { ...intent, broadcasting: null };
  }
  override beginBroadcast(
    id: string,
    version: string,
    at: number,
  ): Promise<Intent> {
    return super.beginBroadcast(id, version, at);
  }
  override recordBroadcast(
    id: string,
    version: string,
    broadcast: Broadcast,
  ): Promise<Intent> {
    return super.recordBroadcast(id, version, broadcast);
  }
  override transition(id: string, change: Transition): Promise<Intent> {
    return super.transition(id, change);
  }
  override async admit(admission: Admission): Promise<number | null> {
    if (admission.count === undefined) return await super.admit(admission);
    const key = ["relayer", "deliveries", admission.count];
    const n = ((await this.#kv.get<{ n: number }>(key)).value?.n ?? 0) + 1;
    await this.#kv.set(key, { n, expiresAt: admission.now + 1e9 });
    return n;
  }
}

Deno.test(
  "the duplicate checks fail on a store that ignores leases and counts without compare-and-set",
  timeout(120_000, async () => {
    await withWorld(async ({ dir, stub, senderUrl }) => {
      const kv = await Deno.openKv(`${dir}/careless.kv`);
      const app = createApp({
        store: new CarelessStore(kv),
        sender: new HttpSender({ url: senderUrl, timeoutMs: 5000 }),
        policy: { maxDeliveries: 1000, stuckAfterMs: 0 },
        leaseMs: 10_000,
        webhookSecret: SECRET,
        opsToken: OPS_TOKEN,
      });
      const server = Deno.serve(
        { hostname: "127.0.0.1", port: 0, onListen() {} },
        app.fetch,
      );
      try {
        const started = performance.now();
        const figures = await drive(
          `http://127.0.0.1:${server.addr.port}`,
          stub,
        );
        report("careless", figures, Math.round(performance.now() - started));
        const found = problems(figures);
        // Without the lease, copies send behind each other's backs: seen as
        // sends that overlap in time, or as more sends than the relayer
        // recorded (a send behind another's write-ahead), whichever the
        // machine's timing shows.
        assert.ok(
          found.some((p) =>
            p.startsWith("overlap:") || /the signer saw \d+ \/send/.test(p)
          ),
          `no extra or overlapping send seen: ${found.join("; ")}`,
        );
        assert.ok(
          found.some((p) => p.startsWith("count:")),
          `no count went wrong: ${found.join("; ")}`,
        );
      } finally {
        await server.shutdown();
        kv.close();
      }
    });
  }),
);
