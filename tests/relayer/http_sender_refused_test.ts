import assert from "node:assert/strict";
import { HttpSender, type Intent, isNotSent, MemoryStore } from "../../mod.ts";

// What each runtime's `fetch` rejected with, seen on a closed loopback port,
// on a name that does not resolve and on a signer that read a request and
// then reset its connection (Node
// 20.20.2, 22.23.5, 24.22.3 and 26.12.1 alike; Bun 1.4.5; Deno 2.9.6;
// workerd 1.20260730.1 under Miniflare).

/** Node's fetch (undici) when the port is closed: nothing was written. */
function undiciRefused(): TypeError {
  return new TypeError("fetch failed", {
    cause: Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:44171"), {
      errno: -111,
      code: "ECONNREFUSED",
      syscall: "connect",
      address: "127.0.0.1",
      port: 44171,
    }),
  });
}

/** Bun's fetch when the port is closed. */
function bunRefused(): TypeError {
  return Object.assign(
    new TypeError(
      "ECONNREFUSED: Unable to connect. Is the computer able to access the url?",
    ),
    { code: "ECONNREFUSED", path: "http://127.0.0.1:46013/send", errno: 0 },
  );
}

/** Node's fetch when the signer's name does not resolve: nothing was tried. */
function undiciUnresolved(code: "ENOTFOUND" | "EAI_AGAIN"): TypeError {
  return new TypeError("fetch failed", {
    cause: Object.assign(
      new Error(`getaddrinfo ${code} no-such-host.invalid`),
      {
        errno: code === "ENOTFOUND" ? -3008 : -3001,
        code,
        syscall: "getaddrinfo",
        hostname: "no-such-host.invalid",
      },
    ),
  });
}

/** Bun's fetch when the signer's name does not resolve. */
function bunUnresolved(): TypeError {
  return Object.assign(
    new TypeError("getaddrinfo ENOTFOUND no-such-host.invalid"),
    {
      code: "ENOTFOUND",
      path: "http://no-such-host.invalid/send",
      syscall: "getaddrinfo",
      hostname: "no-such-host.invalid",
      errno: 4,
    },
  );
}

const intent = (): Promise<Intent> =>
  new MemoryStore().createIntent({
    id: "pi_0001",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
  });

const rejecting = (error: unknown) =>
  new HttpSender({
    url: "http://127.0.0.1:9",
    fetch: () => Promise.reject(error),
  });

Deno.test("HttpSender.send() keeps as maybe sent every failure to connect or answer, a refused connection and a failed lookup on every runtime included (DESIGN §12)", async () => {
  const undici = (cause: Record<string, unknown>) =>
    new TypeError("fetch failed", {
      cause: Object.assign(new Error(String(cause.message)), cause),
    });
  const cases: [string, unknown][] = [
    // Node's and Bun's say a refusal or a failed lookup only before any byte
    // was written, but Deno's cannot (below), and §12 keeps them all unknown.
    ["Node's refusal", undiciRefused()],
    ["Bun's refusal", bunRefused()],
    ["Node's failed lookup", undiciUnresolved("ENOTFOUND")],
    ["Node's lookup to try again", undiciUnresolved("EAI_AGAIN")],
    ["Bun's failed lookup", bunUnresolved()],
    // Deno's fetch sends a request whose body is text or bytes again after
    // a kept-alive connection died under it (the signer may have read it),
    // and reports the copy's refusal. HttpSender's body, a Blob, is not
    // sent again (below), but an injected fetch may say the same.
    [
      "Deno's refusal",
      new TypeError("fetch failed", {
        cause: new Error(
          "error sending request for url (http://127.0.0.1:40989/send): client error (Connect): tcp connect error: Connection refused (os error 111)",
        ),
      }),
    ],
    [
      "Deno's failed lookup",
      new TypeError("fetch failed", {
        cause: new Error(
          "error sending request for url (http://no-such-host.invalid/send): client error (Connect): dns error: failed to lookup address information: Name or service not known",
        ),
      }),
    ],
    // workerd says the same of a refusal and of a reset after the request.
    [
      "workerd's lost connection",
      Object.assign(new Error("Network connection lost."), {
        remote: true,
        retryable: true,
      }),
    ],
    [
      "a reset after the request",
      undici({
        message: "read ECONNRESET",
        code: "ECONNRESET",
        syscall: "read",
      }),
    ],
    [
      "a reset at connect",
      undici({
        message: "connect ECONNRESET 127.0.0.1:38401",
        code: "ECONNRESET",
        syscall: "connect",
      }),
    ],
    [
      "a closed keep-alive connection",
      undici({ message: "other side closed", code: "UND_ERR_SOCKET" }),
    ],
    [
      "a refusal not at connect",
      undici({ message: "ECONNREFUSED", code: "ECONNREFUSED" }),
    ],
    [
      "Bun's reset",
      Object.assign(
        new TypeError(
          "ECONNRESET: The socket connection was closed unexpectedly.",
        ),
        { code: "ECONNRESET" },
      ),
    ],
    [
      "a refusal code on another message",
      Object.assign(new TypeError("proxy said no"), { code: "ECONNREFUSED" }),
    ],
    [
      "a refusal not a TypeError",
      Object.assign(new Error("fetch failed"), {
        cause: undiciRefused().cause,
      }),
    ],
    [
      "workerd's failed lookup",
      Object.assign(
        new Error("internal error; reference = 7tf2g8shvgqcent223bdt7un"),
        { remote: true },
      ),
    ],
    [
      "a lookup syscall on another message",
      Object.assign(new TypeError("proxy said no"), {
        syscall: "getaddrinfo",
      }),
    ],
    ["a string", "ECONNREFUSED"],
  ];
  for (const [what, error] of cases) {
    await assert.rejects(
      rejecting(error).send(await intent(), { replace: false }),
      (thrown: Error) => {
        assert.match(thrown.message, /^signer unreachable: /, what);
        assert.equal(isNotSent(thrown), false, what);
        return true;
      },
    );
  }
});

Deno.test("HttpSender.receipt() marks nothing of a refused connection either", async () => {
  await assert.rejects(
    rejecting(undiciRefused()).receipt("0xabc"),
    (error: Error) => {
      assert.equal(isNotSent(error), false);
      return true;
    },
  );
});

Deno.test("HttpSender.send() on Deno: a request the signer read, its connection then dropped, is maybe sent, and is not sent again", async () => {
  // A signer that answers one request on a keep-alive connection, reads the
  // next whole, stops listening and drops the connection. Deno's fetch
  // sends a body of text or bytes again on a new connection (only after a
  // reused one fails), and would report that copy's refusal; HttpSender's
  // body is a Blob, which it sends once (tests/relayer/http_sender_resend_test.ts).
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let requests = 0;
  const serving = (async () => {
    const conn = await listener.accept();
    const buffer = new Uint8Array(65536);
    let text = "";
    while (requests < 2) {
      const n = await conn.read(buffer);
      if (n === null) break;
      text += new TextDecoder().decode(buffer.subarray(0, n));
      for (;;) {
        const end = text.indexOf("\r\n\r\n");
        if (end < 0) break;
        const length = Number(
          /content-length: *(\d+)/i.exec(text.slice(0, end))?.[1] ?? 0,
        );
        if (text.length < end + 4 + length) break;
        text = text.slice(end + 4 + length);
        requests++;
        if (requests === 1) {
          await conn.write(
            new TextEncoder().encode(
              'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 18\r\n\r\n{"txHash":"0xabc"}',
            ),
          );
        }
      }
    }
    listener.close();
    conn.close();
  })();
  const sender = new HttpSender({
    url: `http://127.0.0.1:${listener.addr.port}`,
  });
  assert.deepEqual(await sender.send(await intent(), { replace: false }), {
    txHash: "0xabc",
  });
  await assert.rejects(
    sender.send(await intent(), { replace: false }),
    (error: Error) => {
      assert.match(
        error.message,
        /^signer unreachable: .*connection closed before message completed/,
      );
      assert.equal(isNotSent(error), false);
      return true;
    },
  );
  await serving;
  assert.equal(requests, 2, "the signer read the second request whole");
});
