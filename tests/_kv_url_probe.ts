/**
 * `openService()` on a KV Connect database (`KV_URL`) reads it once
 * before it serves: a database that opens but refuses that read is
 * refused, and the handle it opened is closed (the test's resource
 * sanitizer fails on a `Deno.Kv` left open).
 *
 * Run by tests/kv_url_probe_test.ts in a process of its own, with
 * `DENO_KV_ACCESS_TOKEN` set there only:
 * `Deno.openKv(url)` takes the access token from the environment alone.
 *
 * @module
 */
import { catchTimers } from "./_armed_timer.ts";
import assert from "node:assert/strict";
import { ConfigError, loadConfig } from "../webhook/config.ts";
import { openService } from "../main.ts";
import { kvMetadata, readRefusingKv, refusingMetadata } from "./_echoing_kv.ts";
import { timeout } from "./_timeout.ts";

/** The access token the process runs with: tests/kv_url_probe_test.ts's. */
const TOKEN = Deno.env.get("DENO_KV_ACCESS_TOKEN") ?? "";
if (TOKEN === "") {
  throw new Error(
    "tests/_kv_url_probe.ts runs with DENO_KV_ACCESS_TOKEN set: run tests/kv_url_probe_test.ts",
  );
}

/** `openService()` on the KV Connect database `server` serves. */
function openAt(server: Deno.HttpServer<Deno.NetAddr>): Promise<unknown> {
  return openService(
    loadConfig({
      SENDER_URL: "http://127.0.0.1:9/",
      WEBHOOK_SECRET: "kv-url-probe-secret-0123456789",
      KV_URL: `http://127.0.0.1:${server.addr.port}/kv`,
      DENO_KV_ACCESS_TOKEN: TOKEN,
    }),
    { log: () => {} },
  );
}

Deno.test("openService() refuses a KV_URL database whose first read is refused, and leaves no KV handle open", async () => {
  const server = readRefusingKv();
  try {
    await assert.rejects(openAt(server), (error: unknown) => {
      assert.ok(error instanceof ConfigError, String(error));
      assert.match(
        error.message,
        /^KV_URL: cannot open the KV Connect database \(.*403.*\): check KV_URL and DENO_KV_ACCESS_TOKEN\.$/,
      );
      assert.doesNotMatch(error.message, new RegExp(TOKEN));
      return true;
    });
  } finally {
    await server.shutdown();
  }
});

Deno.test(
  "openService() refuses a KV_URL database that opens only after 10 s, and closes it once it opens (left open, its connection would hold the server's shutdown)",
  timeout(30_000, async () => {
    // The start's bound is the one timer of 10 s it arms: it is fired once
    // the metadata request is in, as if the endpoint had been silent for
    // 10 s, and the metadata comes after the refusal, where waiting both
    // out took 11 s.
    const timers = catchTimers(10_000);
    let asked: () => void = () => {};
    const metadataAsked = new Promise<void>((resolve) => (asked = resolve));
    let answer: () => void = () => {};
    let answered: () => void = () => {};
    const metadataSent = new Promise<void>((resolve) => (answered = resolve));
    const server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen() {} },
      () =>
        new Promise<Response>((resolve) => {
          answer = () => {
            resolve(kvMetadata());
            answered();
          };
          asked();
        }),
    );
    try {
      {
        const opening = openAt(server).then(
          () => undefined,
          (error: Error) => error.message,
        );
        await metadataAsked;
        assert.deepEqual(
          timers.armed.filter((ms) => ms !== 30_000),
          [10_000],
          "the start's one timer",
        );
        timers.fire();
        const refused = await opening;
        assert.match(
          refused ?? "it started",
          /^KV_URL: cannot open the KV Connect database \(no answer from its metadata endpoint within 10s\)/,
        );
        // The metadata, once the start has refused: the late open comes
        // back, and is closed: the resource sanitizer would find it open
        // otherwise.
        answer();
        await metadataSent;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    } finally {
      timers.restore();
      answer();
      await server.shutdown();
    }
  }),
);

Deno.test("openService() refuses a KV_URL database whose opening is refused, and leaves no timer behind (the op sanitizer fails on one)", async () => {
  const server = refusingMetadata();
  try {
    await assert.rejects(
      openAt(server),
      /KV_URL: cannot open the KV Connect database \(.*401/,
    );
  } finally {
    await server.shutdown();
  }
});
