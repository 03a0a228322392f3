/**
 * `offLoopbackRefusal`, the check a service of one's own makes before it
 * listens: off loopback it refuses, in `main.ts`'s words, a secret anyone
 * can read (the docs' local-run ones, a local QStash's published keys) and
 * `RELAYER_INSECURE_DEV`; on loopback, or with nothing to refuse, it says
 * nothing.
 *
 * @module
 */

import assert from "node:assert/strict";
import { loadConfig, offLoopbackRefusal } from "../webhook/app.ts";

const BASE = { SENDER_URL: "http://127.0.0.1:9000" };
const OWN = {
  ...BASE,
  WEBHOOK_SECRET: "a-webhook-secret-of-the-test",
  OPS_TOKEN: "an-ops-token-of-the-test-0123",
};
const FIX = "generate a random one, such as with: openssl rand -base64 32";

Deno.test("offLoopbackRefusal says nothing on loopback, whatever is set", () => {
  const config = loadConfig({
    ...BASE,
    WEBHOOK_SECRET: "local-secret-0123456789",
    OPS_TOKEN: "local-ops-token-0123456789",
    RELAYER_INSECURE_DEV: "1",
  });
  for (
    const host of [
      "127.0.0.1",
      "127.1.2.3",
      "localhost",
      "::1",
      "[::1]",
      // ::1 written out in full, as a listener may be given it.
      "0:0:0:0:0:0:0:1",
      "http://127.0.0.1:8000/",
      "http://[::1]:8000/",
    ]
  ) {
    assert.equal(offLoopbackRefusal(config, host), undefined, host);
  }
});

Deno.test("offLoopbackRefusal says nothing off loopback with secrets of one's own", () => {
  for (const host of ["0.0.0.0", "::", "192.0.2.7", "http://0.0.0.0:8000/"]) {
    assert.equal(offLoopbackRefusal(loadConfig(OWN), host), undefined, host);
  }
});

Deno.test("offLoopbackRefusal refuses a secret anyone can read off loopback, naming the host as given", () => {
  for (
    const [settings, setting] of [
      [{ ...OWN, WEBHOOK_SECRET: "local-secret-0123456789" }, "WEBHOOK_SECRET"],
      [{ ...OWN, OPS_TOKEN: "local-ops-token-0123456789" }, "OPS_TOKEN"],
      [
        { ...OWN, OPS_TOKEN_NEXT: "local-ops-token-0123456789" },
        "OPS_TOKEN_NEXT",
      ],
    ] as const
  ) {
    for (
      const host of [
        "0.0.0.0",
        "::",
        "2001:db8:0:0:0:0:0:7",
        "http://0.0.0.0:8000/",
      ]
    ) {
      assert.equal(
        offLoopbackRefusal(loadConfig(settings), host),
        `${setting} is a value the docs give for a local run, which anyone can read, and this service listens on ${host}, off this machine: ${FIX}`,
      );
    }
  }
  const qstash = loadConfig({
    ...OWN,
    PUBLIC_URL: "http://127.0.0.1:8000",
    QSTASH_CURRENT_SIGNING_KEY: "sig_7kYjw48mhY7kAjqNGcy6cr29RJ6r",
    QSTASH_NEXT_SIGNING_KEY: "sig_5ZB6DVzB1wjE8S6rZ7eenA8Pdnhs",
  });
  assert.equal(
    offLoopbackRefusal(qstash, "0.0.0.0"),
    "QSTASH_CURRENT_SIGNING_KEY is a published key (a local QStash's), which anyone can sign with, and this service listens on 0.0.0.0, off this machine: copy both signing keys from the QStash console",
  );
});

Deno.test("offLoopbackRefusal refuses RELAYER_INSECURE_DEV off loopback, naming the routes it opens", () => {
  const refusal = offLoopbackRefusal(
    loadConfig({
      ...BASE,
      OPS_TOKEN: OWN.OPS_TOKEN,
      RELAYER_INSECURE_DEV: "1",
    }),
    "::",
  );
  assert.equal(
    refusal,
    "RELAYER_INSECURE_DEV is for local runs, and this service listens on ::, off this machine: it would take requests with no signature or token, from anyone who reaches it, on /v1/qstash and /v1/qstash/failed, /v1/pubsub, /v1/pubsub/dead-letter, /v1/deliveries. Unset RELAYER_INSECURE_DEV (each route whose keys are not set then answers 503: set the keys of those you use, and OPS_TOKEN for the ops routes), or run on your own machine: PUBLIC_URL unset or on localhost, 127.0.0.1 or [::1], and served on loopback (deno task start)",
  );
});

Deno.test("offLoopbackRefusal and loadConfig name the local run a service of one's own gives, not deno task start", () => {
  const localRun = "node --import tsx service.ts";
  const dev = { ...OWN, RELAYER_INSECURE_DEV: "1" };
  const refusal = offLoopbackRefusal(
    loadConfig(dev, { localRun }),
    "0.0.0.0",
    { localRun },
  );
  assert.ok(
    refusal?.endsWith(" and served on loopback (node --import tsx service.ts)"),
    refusal,
  );
  assert.throws(
    () =>
      loadConfig(
        { ...dev, PUBLIC_URL: "https://relayer.example.com" },
        { localRun: "bun service.ts" },
      ),
    (error: Error) => error.message.endsWith("on loopback (bun service.ts)"),
  );
  // Unless given, main.ts's own.
  assert.match(
    offLoopbackRefusal(loadConfig(dev), "0.0.0.0")!,
    /on loopback \(deno task start\)$/,
  );
});

Deno.test("offLoopbackRefusal names the local run loadConfig was given, carried in its config, unless given its own", () => {
  const localRun = "node --import tsx service.ts";
  const dev = { ...OWN, RELAYER_INSECURE_DEV: "1" };
  const config = loadConfig(dev, { localRun });
  assert.match(
    offLoopbackRefusal(config, "0.0.0.0")!,
    /on loopback \(node --import tsx service\.ts\)$/,
  );
  assert.equal(config.localRun, localRun);
  // Given here, that one: the caller's last word.
  assert.match(
    offLoopbackRefusal(config, "0.0.0.0", { localRun: "bun service.ts" })!,
    /on loopback \(bun service\.ts\)$/,
  );
  // Not given to loadConfig: no field, and main.ts's own run.
  assert.equal("localRun" in loadConfig(dev), false);
});

Deno.test("offLoopbackRefusal and loadConfig refuse a localRun that is not one line of text, or a misspelt option", () => {
  const config = loadConfig(OWN);
  for (const localRun of ["", " ", "node a.ts\nrm -rf /", 7]) {
    const options = { localRun } as { localRun: string };
    assert.throws(
      () => offLoopbackRefusal(config, "0.0.0.0", options),
      /^TypeError: Cannot judge where the service listens as 'localRun' must be one line naming the command that runs the service/,
    );
    assert.throws(
      () => loadConfig(OWN, options),
      /^TypeError: Cannot load config as 'localRun' must be one line/,
    );
  }
  const misspelt = { localrun: "node service.ts" } as { localRun?: string };
  assert.throws(
    () => offLoopbackRefusal(config, "0.0.0.0", misspelt),
    /"localrun" is not one of its options \(localRun\): check its spelling/,
  );
});
