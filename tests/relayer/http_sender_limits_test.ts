/**
 * What HttpSender refuses to pass on: a txHash too long or too strange to
 * record (treated as "maybe sent"), and a URL whose secrets would land in
 * an error message.
 */
import assert from "node:assert/strict";
import {
  createRelayer,
  HttpSender,
  type Intent,
  isNotSent,
  isPoison,
  MemoryStore,
} from "../../mod.ts";
import { KvStore } from "../../store/kv.ts";
import { dotnetEscaped, lowerPercent } from "../_echo_forms.ts";

function senderAnswering(txHash: unknown): HttpSender {
  return new HttpSender({
    url: "https://signer.example",
    fetch: () => Promise.resolve(Response.json({ txHash })),
  });
}

async function settling() {
  return await new MemoryStore().createIntent({
    id: "pi_0001",
    state: "settling",
    hold: "pending",
    settlingSince: 0,
  });
}

Deno.test("HttpSender.send() accepts a txHash of 256 characters and the usual alphabets", async () => {
  const intent = await settling();
  for (
    const txHash of [
      "0x" + "ab".repeat(32), // Ethereum
      "5VERv8NMvzbJMEkV8xnrLkEaWRtSz9CosKDYjCJjBRnbJLgp8uirBgmQpjKhoR4tjF3ZpRzrFmBV6UjKdiSZkQUW", // Solana
      "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", // base64
      "x".repeat(256),
    ]
  ) {
    assert.deepEqual(
      await senderAnswering(txHash).send(intent, { replace: false }),
      { txHash },
    );
  }
});

Deno.test("HttpSender.send() treats a txHash over 256 characters, with other characters, or a dot segment as unknown, naming its length only", async () => {
  const intent = await settling();
  for (
    const txHash of [
      "x".repeat(257),
      "0x" + "f".repeat(60_000),
      "0xabc\n2026-11-30 relayer: forged log line",
      "0xabc def",
      "0x\u00e9",
      // Path segments a URL would resolve away: /receipt/.. is /.
      ".",
      "..",
    ]
  ) {
    await assert.rejects(
      senderAnswering(txHash).send(intent, { replace: false }),
      (error: Error) => {
        assert.equal(isNotSent(error), false, "the signer says it sent");
        assert.equal(isPoison(error), false);
        assert.match(
          error.message,
          new RegExp(
            `^signer answered 200 with an unusable txHash \\(${txHash.length} characters, starting .*\\): a txHash must be 1-256 characters of A-Z a-z 0-9 \\. _ : \\+ / = -, not "\\." or "\\.\\."; the broadcast may have been sent$`,
          ),
        );
        assert.ok(error.message.length < 300);
        assert.ok(!error.message.includes("\n"));
        return true;
      },
    );
  }
});

Deno.test("HttpSender.receipt() refuses a txHash of '.' or '..', which a URL would resolve to another path", async () => {
  const asked: string[] = [];
  const sender = new HttpSender({
    url: "https://signer.example/v1",
    fetch: (input) => {
      asked.push(String(input));
      return Promise.resolve(Response.json({ status: "confirmed" }));
    },
  });
  for (const txHash of [".", ".."]) {
    await assert.rejects(sender.receipt(txHash), TypeError);
  }
  assert.deepEqual(asked, []);
  assert.equal(await sender.receipt("0x.."), "confirmed");
  assert.deepEqual(asked, ["https://signer.example/v1/receipt/0x.."]);
});

Deno.test("createRelayer() records a 60 KB txHash as an unknown broadcast on Deno KV, and the delivery retries", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const store = new KvStore(kv);
    await store.createIntent({
      id: "pi_0001",
      state: "authorized",
      hold: "pending",
    });
    const relayer = createRelayer({
      store,
      sender: senderAnswering("0x" + "f".repeat(60_000)),
      random: () => 0,
    });
    const outcome = await relayer.deliver(
      { intentId: "pi_0001", kind: "settle" },
      1,
    );
    assert.equal(outcome.action, "retry");
    const intent = await store.getIntent("pi_0001");
    assert.equal(intent?.lastBroadcast?.outcome, "unknown");
    assert.equal(intent?.mayHaveSent, true);
  } finally {
    kv.close();
  }
});

Deno.test("HttpSender() masks a URL's credentials, query and fragment in its error", () => {
  for (
    const url of [
      "https://signer.example/v1?token=s3cret-token",
      "https://signer.example/v1#s3cret-token",
      "https://me:s3cret-token@signer.example/v1?x=1",
      // The URL parser reads credentials in these spellings too.
      "http:\\\\me:s3cret-token@signer.example/v1",
      "http:/me:s3cret-token@signer.example/v1",
      "http:me:s3cret-token@signer.example/v1",
      // Not a URL at all: what comes before an "@" may be credentials.
      "me:s3cret-token@signer",
    ]
  ) {
    assert.throws(() => new HttpSender({ url }), (error: Error) => {
      assert.ok(error instanceof TypeError);
      assert.ok(!error.message.includes("s3cret-token"), error.message);
      assert.match(error.message, /without credentials, query or fragment/);
      return true;
    });
  }
});

Deno.test("HttpSender() never repeats its URL's path or its headers' values in an error, though the signer or the runtime echoes them", async () => {
  const token = "SGNTOK_0123456789";
  const pathToken = "PATHTOK_0123456789";
  const cases: [string, typeof fetch][] = [
    [
      "a signer that echoes the request's headers in a 500",
      (_url, init) =>
        Promise.resolve(
          Response.json({
            error: `echo: ${JSON.stringify([...new Headers(init?.headers)])}`,
          }, { status: 500 }),
        ),
    ],
    [
      "a status text that echoes the bare token",
      () =>
        Promise.resolve(
          new Response("", { status: 502, statusText: `bad ${token}` }),
        ),
    ],
    [
      "a JSON error with the token escaped",
      () =>
        Promise.resolve(
          new Response(
            `{"error":"token \\u0053GNTOK_0123456789 is revoked, path \\/${pathToken}"}`,
            { status: 401, headers: { "content-type": "application/json" } },
          ),
        ),
    ],
    [
      "a 404 page that quotes the path alone",
      () =>
        Promise.resolve(
          new Response(`<pre>Cannot POST /${pathToken}/send</pre>`, {
            status: 404,
          }),
        ),
    ],
    [
      "a runtime error that quotes the URL",
      (url) =>
        Promise.reject(
          new TypeError(`error sending request for url (${url}): dns error`),
        ),
    ],
  ];
  for (const [name, fetch] of cases) {
    const sender = new HttpSender({
      url: `https://signer.example/${pathToken}`,
      headers: { authorization: `Bearer ${token}` },
      fetch,
    });
    for (
      const call of [
        () => sender.send({ id: "pi_0001" } as Intent, { replace: false }),
        () => sender.receipt("0xabc"),
      ]
    ) {
      await assert.rejects(call(), (error: Error) => {
        assert.ok(!error.message.includes(token), `${name}: ${error.message}`);
        assert.ok(
          !error.message.includes(pathToken),
          `${name}: ${error.message}`,
        );
        return true;
      });
    }
  }
});

Deno.test("HttpSender() keeps a plain header readable in what the signer says, and masks any other, whatever its name", async () => {
  const sender = new HttpSender({
    url: "https://signer.example",
    headers: {
      accept: "application/json",
      "user-agent": "relayer-mainnet",
      "x-jwt": "eyJhbGciOi.secretpart",
      "x-signer-pass": "hunter2hunter2",
    },
    fetch: () =>
      Promise.resolve(
        Response.json({
          error:
            "relayer-mainnet sent application/json with eyJhbGciOi.secretpart and hunter2hunter2",
        }, { status: 500 }),
      ),
  });
  await assert.rejects(
    sender.send({ id: "pi_0001" } as Intent, { replace: false }),
    (error: Error) => {
      assert.equal(
        error.message,
        "signer answered 500: relayer-mainnet sent application/json with <x-jwt header> and <x-signer-pass header>",
      );
      return true;
    },
  );
});

Deno.test("HttpSender() scrubs a JSON error of any shape as decoded: a nested message with an escaped token", async () => {
  const token = "SGNTOK_0123456789";
  const sender = new HttpSender({
    url: "https://signer.example",
    headers: { authorization: `Bearer ${token}` },
    fetch: () =>
      Promise.resolve(
        new Response(
          '{"error":{"message":"token \\u0053GNTOK_0123456789 is revoked"}}',
          { status: 401 },
        ),
      ),
  });
  await assert.rejects(
    sender.receipt("0xabc"),
    (error: Error) => {
      assert.ok(!error.message.includes("GNTOK_0123456789"), error.message);
      assert.match(error.message, /<authorization header>/);
      return true;
    },
  );
});

Deno.test("HttpSender() masks a header's value however JSON writes it, in error and success answers alike, and each value a repeated header or a cookie holds", async () => {
  const answers: [number, string][] = [
    [401, '{"error":{"message":"bad pass hunter\\"2hunter"}}'],
    [200, '{"echo":"\\u0053GNTOK_0123456789"}'],
    [401, "first keyAAAAAA then keyBBBBBB, cookie s3ssion42"],
  ];
  for (const [status, body] of answers) {
    const headers = new Headers([
      ["x-signer-pass", 'hunter"2hunter'],
      ["authorization", "Bearer SGNTOK_0123456789"],
      ["x-api-key", "keyAAAAAA"],
      ["x-api-key", "keyBBBBBB"],
      ["cookie", "sid=s3ssion42; theme=dark"],
    ]);
    const sender = new HttpSender({
      url: "https://signer.example",
      headers,
      fetch: () => Promise.resolve(new Response(body, { status })),
    });
    for (
      const call of [
        () => sender.send({ id: "pi_0001" } as Intent, { replace: false }),
        () => sender.receipt("0xabc"),
      ]
    ) {
      await assert.rejects(call(), (error: Error) => {
        for (
          const secret of [
            "2hunter",
            "GNTOK_0123456789",
            "keyAAAAAA",
            "keyBBBBBB",
            "s3ssion42",
          ]
        ) {
          assert.ok(!error.message.includes(secret), error.message);
        }
        return true;
      });
    }
  }
});

Deno.test("HttpSender.send() masks a header's value in an unusable txHash the signer wrote with JSON escapes, as in any other answer", async () => {
  // The raw body is scrubbed before it is parsed; `\u0053` hides the token
  // from that, and the decoded txHash is quoted (its first 16 characters).
  for (
    const body of [
      '{"txHash":"\\u0053GNTOK_0123456789 "}',
      '{"txHash":"Bearer \\u0053GNTOK_0123456789"}',
    ]
  ) {
    const sender = new HttpSender({
      url: "https://signer.example",
      headers: { authorization: "Bearer SGNTOK_0123456789" },
      fetch: () =>
        Promise.resolve(
          new Response(body, {
            headers: { "content-type": "application/json" },
          }),
        ),
    });
    await assert.rejects(
      sender.send(await settling(), { replace: false }),
      (error: Error) => {
        assert.match(error.message, /with an unusable txHash/);
        assert.equal(isNotSent(error), false, "the signer says it sent");
        assert.ok(!error.message.includes("GNTOK_01"), error.message);
        return true;
      },
    );
  }
});

Deno.test("HttpSender() masks a header's value in lower-case %-escapes and in JSON's \\u escapes of any character, and leaves other text be", async () => {
  const token = "SGN/0123456789+<&'>";
  const lower = lowerPercent(encodeURIComponent(token));
  const dotnet = dotnetEscaped(token);
  for (
    const body of [
      `see /login?next=%2fhome&auth=${lower}`,
      `{"echo":"${dotnet}","next":"%2fhome"}`,
    ]
  ) {
    const sender = new HttpSender({
      url: "https://signer.example",
      headers: { "x-api-key": token },
      fetch: () => Promise.resolve(new Response(body, { status: 500 })),
    });
    await assert.rejects(
      sender.receipt("0xabc"),
      (error: Error) => {
        assert.ok(!error.message.includes("0123456789"), error.message);
        assert.match(error.message, /<x-api-key header>/);
        assert.match(error.message, /%2fhome/);
        return true;
      },
    );
  }
});

Deno.test("HttpSender() masks the URL's path decoded as a signer echoes it, and a header's value or cookie of 6 characters", async () => {
  const sender = new HttpSender({
    url: "https://signer.example/hooks/cl%C3%A9-0123456789",
    headers: { "x-pin": "493027", cookie: "theme=dark; sid=k9Qz2x" },
    fetch: () =>
      Promise.resolve(
        Response.json({
          error:
            "no route /hooks/clé-0123456789 for pin 493027 and session k9Qz2x",
        }, { status: 404 }),
      ),
  });
  await assert.rejects(
    sender.send({ id: "pi_0001" } as Intent, { replace: false }),
    (error: Error) => {
      assert.equal(
        error.message,
        "signer answered 404: no route /… for pin <x-pin header> and session <cookie header>",
      );
      return true;
    },
  );
});
