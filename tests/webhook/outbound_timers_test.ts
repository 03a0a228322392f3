import assert from "node:assert/strict";
import { googleJwks } from "../../webhook/google_jwks.ts";
import { qstashPublisher } from "../../webhook/qstash_publisher.ts";

// The webhook's own fetches (Google's keys), over a real server, with the
// sanitizers on (off by default in Deno 2): an answer's body left unread
// holds its connection until a garbage collection, and a timer left running
// holds what its callback holds.

const sanitized = { sanitizeOps: true, sanitizeResources: true } as const;

/** A server on a free port answering with `answer`; stopped by `close`. */
function serve(answer: (req: Request) => Response | Promise<Response>) {
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    answer,
  );
  return {
    url: `http://127.0.0.1:${server.addr.port}`,
    close: () => server.shutdown(),
  };
}

Deno.test({
  name:
    "googleJwks() leaves no fetch body behind: keys fetched, an error answer, an answer with no keys, an unreachable server",
  ...sanitized,
  fn: async () => {
    let status = 200;
    let body: unknown = { keys: [{ kty: "RSA", kid: "k1" }] };
    const server = serve(() =>
      Response.json(body, {
        status,
        headers: { "cache-control": "max-age=60" },
      })
    );
    try {
      let clock = 0;
      const keys = googleJwks({ url: `${server.url}/certs`, now: () => clock });
      assert.equal((await keys()).length, 1);
      // A refresh answered 500, with a body: the keys kept are served.
      status = 500;
      body = { error: "backend unavailable" };
      assert.equal((await keys({ refresh: true })).length, 1);
      // No keys yet: the error answer and the answer with none throw.
      const fresh = () =>
        googleJwks({ url: `${server.url}/certs`, now: () => clock++ * 10_000 });
      await assert.rejects(fresh(), /Google's keys answered 500/);
      status = 200;
      body = { keys: [] };
      await assert.rejects(fresh(), /has no keys/);
    } finally {
      await server.close();
    }
    const gone = googleJwks({ url: server.url });
    await assert.rejects(gone());
  },
});

Deno.test({
  name:
    "qstashPublisher() leaves no fetch body nor timer behind: a job published, an error answer, a 429, an answer past its bound, an unreachable QStash",
  ...sanitized,
  fn: async () => {
    let status = 200;
    const server = serve(async (req) => {
      await req.body?.cancel();
      if (status === 0) {
        // Past the publisher's bound.
        await new Promise((resolve) => setTimeout(resolve, 400));
        return Response.json({ messageId: "msg_late" });
      }
      return status === 200
        ? Response.json({ messageId: "msg_1" })
        : Response.json({ error: "internal" }, {
          status,
          headers: status === 429 ? { "retry-after": "2" } : {},
        });
    });
    const publisher = (baseUrl: string) =>
      qstashPublisher({
        token: "qstash-token",
        publicUrl: "https://relayer.example",
        retries: 3,
        baseUrl,
        timeoutMs: 200,
      });
    try {
      const live = publisher(server.url);
      const job = { intentId: "pi_0001", kind: "settle" } as const;
      assert.deepEqual(await live.publish(job), { messageId: "msg_1" });
      status = 500;
      await assert.rejects(live.publish(job), /HTTP 500/);
      status = 429;
      await assert.rejects(live.publish(job), /HTTP 429/);
      status = 0;
      await assert.rejects(live.publish(job), /within 200 ms/);
    } finally {
      await server.close();
    }
    await assert.rejects(
      publisher(server.url).publish({ intentId: "pi_0001", kind: "settle" }),
      /QStash did not answer the publish of pi_0001\/settle/,
    );
  },
});
