/**
 * QStash's 429 names when to try again: `Retry-After` (seconds or an HTTP
 * date) or its limit's reset (a unix timestamp). A wait past any QStash
 * limit (over a day: the daily limit resets within one) is no wait to
 * pass on: a value of hundreds of digits was read as Infinity ("try again
 * in Infinity s"), a reset in the year 5138 as 98203431308 s, while the
 * routes' `Retry-After` said a day or 5 s. Such a wait is not taken: the
 * error says what QStash asked and that no limit of it lasts so long
 * (a time so far ahead may say this server's clock is behind), and carries
 * no `retryAfterMs`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { qstashPublisher } from "../../webhook/qstash_publisher.ts";

const job = { intentId: "pi_0001", kind: "settle" } as const;

/** The error of a publish QStash answers 429 with `headers`. */
async function refused(
  headers: Record<string, string>,
): Promise<Error & { retryAfterMs?: unknown }> {
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (req) => {
      await req.body?.cancel();
      return new Response("", { status: 429, headers });
    },
  );
  try {
    const publisher = qstashPublisher({
      token: "qstash-token",
      publicUrl: "https://relayer.example.com",
      retries: 9,
      baseUrl: `http://127.0.0.1:${server.addr.port}`,
    });
    return await publisher.publish(job).then(
      () => assert.fail("a 429 was taken"),
      (error: Error & { retryAfterMs?: unknown }) => error,
    );
  } finally {
    await server.shutdown();
  }
}

Deno.test("qstashPublisher() takes no wait past a day from QStash's 429, however it is written, and says so", async () => {
  // A count of seconds is QStash's own; a time (a date, a reset) is read
  // by this server's clock, which may be behind.
  const clock = " (a time so far ahead may say this server's clock is behind)";
  const cases: [Record<string, string>, string, string][] = [
    [{ "Retry-After": "9".repeat(400) }, "QStash's rate limit", ""],
    [{ "Retry-After": "86401" }, "QStash's rate limit", ""],
    [{ "Retry-After": "86400.5" }, "QStash's rate limit", ""],
    [
      { "Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT" },
      "QStash's rate limit",
      clock,
    ],
    [
      { "RateLimit-Limit": "500", "RateLimit-Reset": "99999999999999" },
      "QStash's daily message limit",
      clock,
    ],
    [
      {
        "Burst-RateLimit-Limit": "100",
        "Burst-RateLimit-Reset": String(Math.floor(Date.now() / 1000) + 90_000),
      },
      "QStash's per-second burst limit",
      clock,
    ],
  ];
  for (const [headers, limit, why] of cases) {
    const error = await refused(headers);
    assert.equal(
      error.message,
      `QStash did not take the job pi_0001/settle (HTTP 429): rate-limited by ${limit}, asking to wait over a day, longer than any QStash limit lasts${why}; try again later`,
      JSON.stringify(headers).slice(0, 100),
    );
    assert.equal(error.retryAfterMs, undefined);
  }
});

Deno.test("qstashPublisher() still takes a wait of exactly a day", async () => {
  const error = await refused({ "Retry-After": "86400" });
  assert.equal(
    error.message,
    "QStash did not take the job pi_0001/settle (HTTP 429): rate-limited by QStash's rate limit; try again in 86400 s",
  );
  assert.equal(error.retryAfterMs, 86_400_000);
});
