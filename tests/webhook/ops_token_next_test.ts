/**
 * `OPS_TOKEN_NEXT` (`opsTokenNext`): a second ops token taken beside
 * `OPS_TOKEN` while the clients move to it, so a rotation refuses no call.
 * Checked by `OPS_TOKEN`'s rules, refused without it, and read by a
 * Cloudflare Worker too.
 *
 * @module
 */
import assert from "node:assert/strict";
import { MemoryStore, ScriptedSender } from "../../mod.ts";
import {
  ConfigError,
  createApp,
  loadConfig,
  routeOptions,
  workerConfig,
} from "../../webhook/app.ts";
import { readableSetting } from "../../webhook/_auth.ts";

const ENV = {
  SENDER_URL: "http://127.0.0.1:9",
  WEBHOOK_SECRET: "a-webhook-secret-16",
  OPS_TOKEN: "the-current-ops-token-0123",
};
const NEXT = "the-next-ops-token-4567";

/** The status of `GET /v1/dead-letters` on `app` with `token` as its bearer. */
async function statusWith(
  app: ReturnType<typeof createApp>,
  token: string,
): Promise<number> {
  const res = await app.request("/v1/dead-letters", {
    headers: { authorization: `Bearer ${token}` },
  });
  await res.body?.cancel();
  return res.status;
}

/** The `ConfigError` `loadConfig(env)` throws: its setting and message. */
function refusal(env: Record<string, string>): [string, string] {
  try {
    loadConfig(env);
  } catch (error) {
    assert.ok(error instanceof ConfigError, String(error));
    return [error.setting, error.message];
  }
  throw new Error("loadConfig accepted it");
}

Deno.test("OPS_TOKEN_NEXT: during a rotation the ops routes take a call with either token, and no other", async () => {
  const app = createApp({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    ...routeOptions(loadConfig({ ...ENV, OPS_TOKEN_NEXT: NEXT }), {
      jwks: [],
    }),
  });
  assert.equal(await statusWith(app, ENV.OPS_TOKEN), 200);
  assert.equal(await statusWith(app, NEXT), 200);
  assert.equal(await statusWith(app, "a-third-ops-token-89ab"), 401);
  assert.equal(await statusWith(app, `${NEXT}x`), 401);
  assert.equal(await statusWith(app, NEXT.slice(0, -1)), 401);
  // A write route too: the token opens every ops route.
  const res = await app.request("/v1/intents", {
    method: "POST",
    headers: { authorization: `Bearer ${NEXT}` },
    body: JSON.stringify({ id: "pi_0001", state: "authorized" }),
  });
  assert.equal(res.status, 201, await res.text());
  // Once the rotation is over (OPS_TOKEN the new one, the next unset),
  // the old token is refused.
  const after = createApp({
    store: new MemoryStore(),
    sender: new ScriptedSender({}),
    ...routeOptions(loadConfig({ ...ENV, OPS_TOKEN: NEXT }), { jwks: [] }),
  });
  assert.equal(await statusWith(after, NEXT), 200);
  assert.equal(await statusWith(after, ENV.OPS_TOKEN), 401);
});

Deno.test("createApp refuses an opsTokenNext without opsToken, or one opsToken's rules refuse, naming the option and never the value", () => {
  const deps = { store: new MemoryStore(), sender: new ScriptedSender({}) };
  const secret = "a-webhook-secret-16";
  for (
    const [options, message] of [
      [
        { opsTokenNext: NEXT },
        /^Cannot create app as 'opsTokenNext' is set without 'opsToken': set the token the clients send now as opsToken, and the one they move to as opsTokenNext$/,
      ],
      [
        { opsToken: ENV.OPS_TOKEN, opsTokenNext: "" },
        /'opsTokenNext' is empty: set it to a long random secret, or leave it out while no rotation is under way$/,
      ],
      [
        { opsToken: ENV.OPS_TOKEN, opsTokenNext: "fifteen-chars-x" },
        /'opsTokenNext' is 15 characters long: use a random token of at least 16 \(the service's OPS_TOKEN_NEXT has the same rule\)/,
      ],
      [
        { opsToken: ENV.OPS_TOKEN, opsTokenNext: `${NEXT}\n` },
        /'opsTokenNext' is not what an Authorization header carries/,
      ],
      [
        {
          opsToken: ENV.OPS_TOKEN,
          opsTokenNext: secret,
          webhookSecret: secret,
        },
        /^Cannot create app as 'opsTokenNext' is 'webhookSecret': /,
      ],
    ] as const
  ) {
    assert.throws(
      () => createApp({ ...deps, ...options }),
      (error: unknown) => {
        assert.ok(error instanceof TypeError);
        assert.match(error.message, message);
        assert.ok(!error.message.includes(NEXT), error.message);
        return true;
      },
    );
  }
  // Equal to opsToken: a rotation over, not refused.
  createApp({ ...deps, opsToken: NEXT, opsTokenNext: NEXT });
});

Deno.test("loadConfig refuses OPS_TOKEN_NEXT without OPS_TOKEN, and as it refuses OPS_TOKEN, never echoing it", () => {
  const { OPS_TOKEN: _, ...noToken } = ENV;
  assert.deepEqual(refusal({ ...noToken, OPS_TOKEN_NEXT: NEXT }), [
    "OPS_TOKEN_NEXT",
    "OPS_TOKEN_NEXT is set without OPS_TOKEN: set the token the clients send now as OPS_TOKEN, and the one they move to as OPS_TOKEN_NEXT",
  ]);
  for (
    const [value, env, message] of [
      ["short-token", {}, /^OPS_TOKEN_NEXT must be at least 16 characters/],
      [
        "a token with spaces-0123",
        {},
        /^OPS_TOKEN_NEXT must be made of A-Z a-z 0-9/,
      ],
      [
        ENV.WEBHOOK_SECRET,
        {},
        /^OPS_TOKEN_NEXT must differ from WEBHOOK_SECRET: /,
      ],
      // The docs' local-run token, at a URL off this machine.
      [
        "local-ops-token-0123456789",
        { PUBLIC_URL: "https://relayer.example.test" },
        /^OPS_TOKEN_NEXT is a value the docs give for a local run, which anyone can read, and this service is reached at PUBLIC_URL, off this machine: /,
      ],
    ] as const
  ) {
    const [setting, said] = refusal({ ...ENV, ...env, OPS_TOKEN_NEXT: value });
    assert.equal(setting, "OPS_TOKEN_NEXT", said);
    assert.match(said, message);
    assert.ok(!said.includes(value), said);
  }
  // main.ts's check where it listens off loopback names it too.
  assert.equal(
    readableSetting(
      loadConfig({ ...ENV, OPS_TOKEN_NEXT: "local-ops-token-0123456789" }),
    )?.setting,
    "OPS_TOKEN_NEXT",
  );
  // The docs' local-run token on this machine, and one equal to OPS_TOKEN
  // (a rotation over), are taken.
  assert.equal(
    loadConfig({ ...ENV, OPS_TOKEN_NEXT: "local-ops-token-0123456789" })
      .opsTokenNext,
    "local-ops-token-0123456789",
  );
  assert.equal(
    loadConfig({ ...ENV, OPS_TOKEN_NEXT: ENV.OPS_TOKEN }).opsTokenNext,
    ENV.OPS_TOKEN,
  );
});

Deno.test("workerConfig reads OPS_TOKEN_NEXT, refuses one equal to the QSTASH_TOKEN it is given, and serves a published one on loopback only", async () => {
  const worker = {
    ...ENV,
    CLOUDFLARE_MAX_RETRIES: "9",
    CLOUDFLARE_DLQ_MAX_RETRIES: "100",
  };
  const { config, unread } = workerConfig({ ...worker, OPS_TOKEN_NEXT: NEXT });
  assert.equal(config.opsTokenNext, NEXT);
  assert.deepEqual(unread, []);
  assert.throws(
    () => workerConfig({ ...worker, OPS_TOKEN_NEXT: NEXT, QSTASH_TOKEN: NEXT }),
    (error: unknown) =>
      error instanceof ConfigError && error.setting === "OPS_TOKEN_NEXT" &&
      /^OPS_TOKEN_NEXT must differ from QSTASH_TOKEN: /.test(error.message),
  );
  const published = workerConfig({
    ...worker,
    OPS_TOKEN_NEXT: "local-ops-token-0123456789",
  });
  const logged: string[] = [];
  const handlers = published.nameUnread(
    { fetch: (_request: Request) => new Response("ok") },
    (line) => logged.push(line),
  );
  const local = await handlers.fetch(new Request("http://127.0.0.1/healthz"));
  assert.equal(await local.text(), "ok");
  const remote = await handlers.fetch(
    new Request("https://relayer.example.test/healthz"),
  );
  assert.equal(remote.status, 503);
  assert.match(
    logged.join("\n"),
    /OPS_TOKEN_NEXT is a value the docs give for a local run/,
  );
  await remote.body?.cancel();
});
