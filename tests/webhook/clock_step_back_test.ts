/**
 * Clocks (review): the Pub/Sub route paces its work on Google's keys by
 * the app's clock: the refetch of the keys for an unknown `kid` (at most
 * once a minute), `googleJwks()`'s cache and its pause after a failed
 * fetch, and the log line about keys that cannot be had (at most once a
 * minute). A clock stepped back (NTP correcting a clock that ran fast)
 * leaves each of those times in the future. Counted as "less than a
 * minute ago", the pause then lasted the step and a minute: a push signed
 * by a key Google rotated in meanwhile was refused (401) that long, and
 * keys that could not be had were not fetched again that long (every push
 * 503). `/readyz` and the refusal log already read a time from before a
 * step back as lapsed (`at >= last.at && …`); these now do too.
 *
 * @module
 */
import assert from "node:assert/strict";
import { MemoryStore, ScriptedSender } from "../../mod.ts";
import { pubsubVerifier } from "../../webhook/_auth.ts";
import { createApp, type WebhookApp } from "../../webhook/app.ts";
import { googleJwks } from "../../webhook/google_jwks.ts";
import { stepBackPace } from "../../webhook/_step_back.ts";
import {
  envelope,
  fakeGoogle,
  type Google,
  PUBSUB,
  QSTASH,
  taking,
} from "./_signing.ts";

const STEP_BACK_MS = 10 * 60_000;

Deno.test("pubsubVerifier() refetches Google's keys for a rotated-in kid after the clock stepped back past its last refetch", async () => {
  const google = await fakeGoogle();
  let clock = 1_800_000_000_000;
  // What Google lists now, and a cache of it, as googleJwks() keeps:
  // served until a refresh.
  let published: JsonWebKey[] = [google.jwks[0]!];
  let cached: JsonWebKey[] | undefined;
  let refreshes = 0;
  const verify = taking(pubsubVerifier({
    ...PUBSUB,
    jwks: (options = {}) => {
      if (options.refresh) refreshes++;
      if (options.refresh || cached === undefined) cached = published;
      return Promise.resolve(cached);
    },
  }, () => clock));
  // A push of a kid Google does not list (yet): the minute's refetch spent.
  const early = await google.token({}, { kid: "rotated-in" });
  assert.equal(await verify(`Bearer ${early}`), false);
  assert.equal(refreshes, 1);
  // NTP steps the clock 10 minutes back; 2 minutes later (real time),
  // Google lists the rotated-in key and pushes with it.
  clock -= STEP_BACK_MS;
  clock += 2 * 60_000;
  published = [
    google.jwks[0]!,
    { ...google.jwks[0]!, kid: "rotated-in" } as JsonWebKey,
  ];
  const token = await google.token({}, { kid: "rotated-in" });
  assert.equal(
    await verify(`Bearer ${token}`),
    true,
    "a push of the rotated-in key refused: the refetch waited out the clock's step",
  );
  assert.equal(refreshes, 2);
});

Deno.test("googleJwks() fetches again after a failure with no keys once the clock stepped back, not after the step and 5 s", async () => {
  let clock = 1_800_000_000_000;
  let fetches = 0;
  const keys = googleJwks({
    fetch: () => {
      fetches++;
      return Promise.resolve(
        fetches === 1
          ? new Response(null, { status: 500 })
          : Response.json({ keys: [{ kty: "RSA", kid: "k" }] }),
      );
    },
    now: () => clock,
  });
  await assert.rejects(keys(), /answered 500/);
  clock -= STEP_BACK_MS;
  clock += 10_000; // 10 s later by real time
  assert.equal((await keys()).length, 1);
  assert.equal(fetches, 2);
});

Deno.test("googleJwks() reads keys cached before the clock stepped back as expired once their max-age has passed by real time", async () => {
  let clock = 1_800_000_000_000;
  let fetches = 0;
  const keys = googleJwks({
    fetch: () => {
      fetches++;
      return Promise.resolve(
        Response.json({ keys: [{ kty: "RSA", kid: `k${fetches}` }] }, {
          headers: { "cache-control": "max-age=60" },
        }),
      );
    },
    now: () => clock,
  });
  await keys();
  // A step back of 10 minutes, then 2 minutes: past the minute's max-age.
  clock -= STEP_BACK_MS;
  clock += 2 * 60_000;
  const [key] = await keys();
  assert.equal((key as { kid?: string }).kid, "k2");
  assert.equal(fetches, 2);
});

/** An app on `now` whose Google keys cannot be had, and the lines it logs. */
function keysBlocked(now: () => number) {
  const lines: string[] = [];
  const app = createApp({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    now,
    log: (line) => lines.push(line),
    pubsub: {
      ...PUBSUB,
      jwks: () => Promise.reject(new Error("egress to Google blocked")),
    },
  });
  return { app, lines };
}

Deno.test("createApp() logs that Google's keys cannot be had again after the clock stepped back, not only once it caught up", async () => {
  let clock = 1_800_000_000_000;
  const { app, lines } = keysBlocked(() => clock);
  const google = await fakeGoogle();
  const push = async () => {
    const res = await app.request("/v1/pubsub", {
      method: "POST",
      headers: {
        authorization: `Bearer ${await google.token()}`,
        "content-type": "application/json",
      },
      body: envelope({ intentId: "pi_0001", kind: "settle" }),
    });
    await res.body?.cancel();
    return res.status;
  };
  const said = () =>
    lines.filter((line) => line.includes("cannot verify Pub/Sub pushes"))
      .length;
  assert.equal(await push(), 503);
  assert.equal(said(), 1);
  clock -= STEP_BACK_MS;
  clock += 2 * 60_000; // two minutes later by real time
  assert.equal(await push(), 503);
  assert.equal(said(), 2, "silent for the step and a minute");
});

/**
 * A clock that flaps (time sources a step apart, read in turn: a
 * hypervisor's sync and NTP fighting) steps back at every other read, or,
 * with three, at two reads of three. A step back may end a wait at once,
 * but not at every read: the fetches and lines stay a few, not one per
 * push.
 */
/**
 * What the flap tests add to their names when `performance.now()` is the
 * app's clock, as on workerd.
 */
const ON_WORKERD =
  ", with performance.now() reading the wall clock, as on workerd (Cloudflare Workers)";

/**
 * Makes `performance.now()` read `clock()` until disposed, as it is on
 * workerd: there `performance.timeOrigin` is 0 and `performance.now()`
 * reads `Date.now()` (seen on workerd 1.20260730.1, miniflare 4.20260730.0), so a step of the wall
 * clock moves it too, and a clock that flaps flaps it.
 */
function wallMono(clock: () => number): Disposable {
  Object.defineProperty(performance, "now", {
    value: clock,
    configurable: true,
    writable: true,
  });
  return {
    [Symbol.dispose]: () => {
      delete (performance as { now?: unknown }).now;
    },
  };
}

/** A Pub/Sub verifier on `now` whose keys are Google's first, and how many times it asked for them refreshed. */
function countedVerifier(google: Google, now: () => number) {
  let refreshes = 0;
  const verify = taking(pubsubVerifier({
    ...PUBSUB,
    jwks: (options = {}) => {
      if (options.refresh) refreshes++;
      return Promise.resolve([google.jwks[0]!]);
    },
  }, now));
  return { verify, refreshes: () => refreshes };
}

/** Pushes a settle of `pi_0001` signed by `token` to `app`'s Pub/Sub route; its status. */
async function pushSettle(app: WebhookApp, token: string): Promise<number> {
  const res = await app.request("/v1/pubsub", {
    method: "POST",
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
    },
    body: envelope({ intentId: "pi_0001", kind: "settle" }),
  });
  await res.body?.cancel();
  return res.status;
}

const FLAP_PUSHES = 40;

/** The clock's reading at push `push`, flapping among `sources` a step apart. */
function flapped(ahead: number, sources: number, push: number): number {
  return ahead - (push % sources) * STEP_BACK_MS + push * 100;
}

for (const workerd of [false, true]) {
  Deno.test(`pubsubVerifier() under a clock that flaps a step back and forth at each push refetches for made-up kids at most a few times, not at every push${workerd ? ON_WORKERD : ""}`, async () => {
    const google = await fakeGoogle();
    for (const sources of [2, 3]) {
      const ahead = 1_800_000_000_000;
      let clock = ahead;
      using _mono = workerd ? wallMono(() => clock) : undefined;
      const { verify, refreshes } = countedVerifier(google, () => clock);
      // A forger's pushes: claims of this route (read unverified), a made-up kid.
      const forged = await google.token({}, { kid: "made-up" });
      for (let push = 0; push < FLAP_PUSHES; push++) {
        clock = flapped(ahead, sources, push);
        assert.equal(await verify(`Bearer ${forged}`), false);
      }
      assert.ok(
        refreshes() <= 3,
        `${refreshes()} refetches for ${FLAP_PUSHES} pushes (${sources} sources)`,
      );
    }
  });
}

for (const workerd of [false, true]) {
  Deno.test(`googleJwks() under a clock that flaps a step back and forth at each call, while Google fails, fetches at most a few times, not at every call${workerd ? ON_WORKERD : ""}`, async () => {
    for (
      const [sources, cachedFirst] of [[2, false], [2, true], [3, false], [
        3,
        true,
      ]] as const
    ) {
      const ahead = 1_800_000_000_000;
      let clock = ahead;
      using _mono = workerd ? wallMono(() => clock) : undefined;
      let fetches = 0;
      const keys = googleJwks({
        fetch: () => {
          fetches++;
          return Promise.resolve(
            cachedFirst && fetches === 1
              ? Response.json({ keys: [{ kty: "RSA", kid: "k" }] }, {
                headers: { "cache-control": "max-age=60" },
              })
              : new Response(null, { status: 500 }),
          );
        },
        now: () => clock,
      });
      for (let call = 0; call < FLAP_PUSHES; call++) {
        clock = flapped(ahead, sources, call);
        // 61 s on, by both readings: keys cached first have lapsed.
        if (cachedFirst && call > 0) clock += 61_000;
        await keys().catch(() => {});
      }
      assert.ok(
        fetches <= 4,
        `${fetches} fetches for ${FLAP_PUSHES} calls (${sources} sources, keys cached first: ${cachedFirst})`,
      );
    }
  });
}

for (const workerd of [false, true]) {
  Deno.test(`createApp() under a clock that flaps a step back and forth at each push logs that Google's keys cannot be had at most a few times, not at every push${workerd ? ON_WORKERD : ""}`, async () => {
    for (const sources of [2, 3]) {
      const ahead = 1_800_000_000_000;
      let clock = ahead;
      using _mono = workerd ? wallMono(() => clock) : undefined;
      const { app, lines } = keysBlocked(() => clock);
      const google = await fakeGoogle();
      const token = await google.token();
      for (let push = 0; push < FLAP_PUSHES; push++) {
        clock = flapped(ahead, sources, push);
        assert.equal(await pushSettle(app, token), 503);
      }
      const said = lines.filter((line) =>
        line.includes("cannot verify Pub/Sub pushes")
      )
        .length;
      assert.ok(
        said <= 3,
        `${said} lines for ${FLAP_PUSHES} pushes (${sources} sources)`,
      );
    }
  });
}

for (const workerd of [false, true]) {
  Deno.test(`createApp() under a clock that flaps a step back and forth probes the store for /readyz, and logs refused requests and a store that is not ready, at most a few times, not at every request${workerd ? ON_WORKERD : ""}`, async () => {
    for (const sources of [2, 3]) {
      const ahead = 1_800_000_000_000;
      let clock = ahead;
      using _mono = workerd ? wallMono(() => clock) : undefined;
      let failing = false;
      const { call: request, reads, count } = storeApp(
        () => clock,
        () => failing,
      );
      // 100 ms a call by each reading: 4 s of the clock, so about 4 probes a
      // phase as the clock reads on, and no more for its steps back.
      for (let call = 0; call < FLAP_PUSHES; call++) {
        clock = flapped(ahead, sources, call);
        // Anyone may call /readyz: one probe a second, whatever the callers.
        await request("/readyz");
        // A forged token: refused 401, a line a minute.
        assert.equal(
          await request("/v1/qstash", {
            method: "POST",
            body: "{}",
            headers: { "upstash-signature": "a.b.c" },
          }),
          401,
        );
      }
      failing = true;
      for (let call = 0; call < FLAP_PUSHES; call++) {
        clock = flapped(ahead, sources, call) + 3_600_000;
        assert.equal(await request("/readyz"), 503);
      }
      const why = `(${sources} sources)`;
      // With performance.now() the app's clock, the clock's 4 s a phase
      // are time gone by: a step back may also end the second's wait once
      // a second, and the probe after it reads the clock ahead again, so
      // about 2 a second, 8 s in all (without the pace, one per call).
      assert.ok(
        reads() <= (workerd ? 20 : 12),
        `${reads()} probes for ${2 * FLAP_PUSHES} calls ${why}`,
      );
      assert.ok(
        count("refused 401") <= 3,
        `${count("refused 401")} lines for ${FLAP_PUSHES} refusals ${why}`,
      );
      assert.ok(
        count("not ready") <= 3,
        `${count("not ready")} lines for ${FLAP_PUSHES} probes ${why}`,
      );
    }
  });
}

Deno.test("stepBackPace() allows a step back once per `ms` of the monotonic clock: reads it refuses do not push that on, and `ms` after the last it allowed, it allows again", () => {
  let mono = 0;
  const allow = stepBackPace(() => mono);
  assert.equal(allow(60_000), true);
  for (const at of [1, 30_000, 59_999]) {
    mono = at;
    assert.equal(allow(60_000), false, `at ${at}`);
  }
  mono = 60_000; // a minute after the last it allowed, not after the last read
  assert.equal(allow(60_000), true);
  mono = 60_999;
  assert.equal(allow(1_000), false);
  mono = 61_000;
  assert.equal(allow(1_000), true);
});

/**
 * Runs `body` with `performance.now()` (the monotonic clock stepBackPace
 * reads) at `mono.at`, moved only by `body`.
 */
async function onMonotonic(
  body: (mono: { at: number }) => Promise<void>,
): Promise<void> {
  const mono = { at: 1_000_000 };
  const own = Object.getOwnPropertyDescriptor(performance, "now");
  Object.defineProperty(performance, "now", {
    value: () => mono.at,
    configurable: true,
    writable: true,
  });
  try {
    await body(mono);
  } finally {
    if (own === undefined) {
      delete (performance as { now?: unknown }).now;
    } else Object.defineProperty(performance, "now", own);
  }
}

/**
 * How often `count()` moves while the clock flaps between two readings a
 * step apart (`set` takes each in turn, then `act` runs): over `calls`
 * calls, the same again with the monotonic clock still, and once it moved
 * on `ms`.
 */
async function pacedBy(
  mono: { at: number },
  ms: number,
  set: (reading: number) => void,
  act: () => Promise<unknown>,
  count: () => number,
): Promise<{ first: number; still: number; later: number }> {
  const ahead = 1_800_000_000_000;
  const flap = async () => {
    for (let call = 0; call < 10; call++) {
      set(call % 2 === 0 ? ahead : ahead - STEP_BACK_MS);
      await act();
    }
  };
  await flap();
  const first = count();
  await flap();
  const still = count();
  mono.at += ms;
  await flap();
  return { first, still, later: count() };
}

/** Asserts a pace: some at first, none more while the monotonic clock stands, more once it moved on. */
function assertPaced(
  what: string,
  { first, still, later }: { first: number; still: number; later: number },
) {
  assert.ok(first >= 1, `${what}: none at first`);
  assert.equal(still, first, `${what}: more while the monotonic clock stood`);
  assert.ok(
    later > still,
    `${what}: none more once the monotonic clock moved on its interval (${first}, ${still}, ${later})`,
  );
}

/** An app on `now` over a store that counts its reads, each failing while `failing()`; its calls (their status) and log lines. */
function storeApp(now: () => number, failing: () => boolean) {
  const lines: string[] = [];
  let reads = 0;
  class Counted extends MemoryStore {
    override getIntent(id: string) {
      reads++;
      return failing()
        ? Promise.reject(new Error("store down"))
        : super.getIntent(id);
    }
  }
  const app = createApp({
    store: new Counted(),
    sender: new ScriptedSender({}),
    now,
    log: (line) => lines.push(line),
    qstash: QSTASH,
  });
  return {
    call: async (path: string, init?: RequestInit) => {
      const res = await app.request(path, init);
      await res.body?.cancel();
      return res.status;
    },
    reads: () => reads,
    count: (part: string) => lines.filter((line) => line.includes(part)).length,
  };
}

Deno.test("under a clock that flaps a step back and forth, each paced wait still ends again once its length of the monotonic clock has passed", async () => {
  await onMonotonic(async (mono) => {
    // The refetch for a kid Google does not list: once a minute.
    const google = await fakeGoogle();
    let clock = 0;
    const { verify, refreshes } = countedVerifier(google, () => clock);
    const forged = await google.token({}, { kid: "made-up" });
    assertPaced(
      "refetches for a made-up kid",
      await pacedBy(mono, 60_000, (at) => clock = at, async () => {
        assert.equal(await verify(`Bearer ${forged}`), false);
      }, refreshes),
    );
    // googleJwks()'s pause after a failure with no keys.
    let fetches = 0;
    const keys = googleJwks({
      fetch: () => {
        fetches++;
        return Promise.resolve(new Response(null, { status: 500 }));
      },
      now: () => clock,
    });
    assertPaced(
      "fetches of keys that cannot be had",
      await pacedBy(mono, 60_000, (at) => clock = at, async () => {
        await keys().catch(() => {});
      }, () => fetches),
    );
    // The line saying Google's keys cannot be had: once a minute.
    const { app: blocked, lines: blockedLines } = keysBlocked(() => clock);
    const token = await google.token();
    assertPaced(
      "lines that Google's keys cannot be had",
      await pacedBy(
        mono,
        60_000,
        (at) => clock = at,
        async () => {
          await pushSettle(blocked, token);
        },
        () =>
          blockedLines.filter((line) =>
            line.includes("cannot verify Pub/Sub pushes")
          ).length,
      ),
    );
    // /readyz's probe (once a second) and the refusal log (once a minute).
    const up = storeApp(() => clock, () => false);
    assertPaced(
      "store probes for /readyz",
      await pacedBy(
        mono,
        1_000,
        (at) => clock = at,
        () => up.call("/readyz"),
        () => up.reads(),
      ),
    );
    assertPaced(
      "lines of a refused request",
      await pacedBy(
        mono,
        60_000,
        (at) => clock = at,
        () =>
          up.call("/v1/qstash", {
            method: "POST",
            body: "{}",
            headers: { "upstash-signature": "a.b.c" },
          }),
        () => up.count("refused 401"),
      ),
    );
    // The "not ready" line of a store down (once a minute), on an app
    // whose first probe fails.
    const down = storeApp(() => clock, () => true);
    assertPaced(
      "lines of a store not ready",
      await pacedBy(
        mono,
        60_000,
        (at) => clock = at,
        () => down.call("/readyz"),
        () => down.count("not ready"),
      ),
    );
  });
});
