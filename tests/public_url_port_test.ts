/**
 * `main.ts` says where `PUBLIC_URL` names this machine at a port it does
 * not listen on: QStash delivers to `PUBLIC_URL/v1/qstash`, and
 * `deno task qstash-local` prints `PUBLIC_URL=http://127.0.0.1:8000`, so a
 * service served on another port (`deno serve --port 8001 main.ts`, as
 * docs/routes.md shows) had every job it published go unanswered, the
 * local QStash's log saying "no answer" and the service's nothing.
 *
 * @module
 */

import assert from "node:assert/strict";
import { publicUrlPortLine } from "../main.ts";
import { startMain } from "./_main_process.ts";
import { timeout } from "./_timeout.ts";

Deno.test("publicUrlPortLine() names a PUBLIC_URL on this machine at another port, or as https at the port listened on, with the PUBLIC_URL to set; nothing for an http one at the port listened on, or off this machine", () => {
  assert.equal(
    publicUrlPortLine("http://127.0.0.1:8000", 8001),
    "relayer: PUBLIC_URL is http://127.0.0.1:8000, on this machine, but the service listens on port 8001: QStash delivers to PUBLIC_URL/v1/qstash, which reaches this service only through something on port 8000 that forwards to it; otherwise set PUBLIC_URL=http://127.0.0.1:8001",
  );
  // Its path kept; the scheme's own port counted as the port named.
  assert.match(
    publicUrlPortLine("http://localhost/relayer", 8001)!,
    /^relayer: PUBLIC_URL is http:\/\/localhost\/relayer, .* on port 80 .*; otherwise set PUBLIC_URL=http:\/\/localhost:8001\/relayer$/,
  );
  // A local TLS proxy's https PUBLIC_URL: the service itself serves plain
  // HTTP (deno serve), so the PUBLIC_URL that reaches it is http.
  assert.match(
    publicUrlPortLine("https://localhost", 8001)!,
    /^relayer: PUBLIC_URL is https:\/\/localhost, .* on port 443 .*; otherwise set PUBLIC_URL=http:\/\/localhost:8001$/,
  );
  assert.equal(publicUrlPortLine("http://127.0.0.1:8001", 8001), undefined);
  assert.equal(publicUrlPortLine("http://[::1]:8001/", 8001), undefined);
  // https at the very port listened on: no proxy can hold that port, and
  // the service answers a TLS handshake with plain HTTP.
  assert.equal(
    publicUrlPortLine("https://127.0.0.1:8001/relayer", 8001),
    "relayer: PUBLIC_URL is https://127.0.0.1:8001/relayer, on this machine at the port the service listens on, but the service serves plain HTTP there (deno serve serves no TLS): QStash's deliveries to PUBLIC_URL/v1/qstash fail their TLS handshake; set PUBLIC_URL=http://127.0.0.1:8001/relayer",
  );
  assert.match(
    publicUrlPortLine("https://localhost", 443)!,
    /^relayer: PUBLIC_URL is https:\/\/localhost, .* the port the service listens on, .*; set PUBLIC_URL=http:\/\/localhost:443$/,
  );
  assert.equal(
    publicUrlPortLine("https://relayer.example.com", 8001),
    undefined,
  );
  assert.equal(publicUrlPortLine(undefined, 8001), undefined);
});

Deno.test(
  "main.ts with QStash and a PUBLIC_URL on this machine at another port than it listens on says so after its start line; not at its own port, unless as https, which it does not serve",
  timeout(30_000, async () => {
    const dir = await Deno.makeTempDir({ prefix: "relayer_public_url_" });
    // deno task qstash-local's settings, as it prints them.
    const env = {
      SENDER_URL: "http://127.0.0.1:9/",
      OPS_TOKEN: "local-ops-token-0123456789",
      QSTASH_URL: "http://127.0.0.1:9",
      QSTASH_TOKEN: "local-qstash-token-0123456789",
      QSTASH_CURRENT_SIGNING_KEY: "sig_local_current_0123456789",
      QSTASH_NEXT_SIGNING_KEY: "sig_local_next_0123456789",
      KV_PATH: `${dir}/relayer.kv`,
    };
    const run = async (
      publicUrl: (port: number) => string,
      meanwhile?: (base: string) => Promise<void>,
    ) => {
      const free = Deno.listen({ hostname: "127.0.0.1", port: 0 });
      const port = (free.addr as Deno.NetAddr).port;
      free.close();
      const service = startMain({ ...env, PUBLIC_URL: publicUrl(port) }, {
        writeDir: dir,
        port,
      });
      try {
        const base = await service.base();
        assert.notEqual(base, null, "it did not serve");
        await meanwhile?.(base!);
        service.child.kill("SIGTERM");
        const { code, stdout, stderr } = await service.ended();
        assert.equal(code, 0, `${stdout}\n${stderr}`);
        return { lines: stdout.trim().split("\n"), port };
      } finally {
        service.kill();
        await service.ended().catch(() => {});
      }
    };
    try {
      const other = await run((port) => `http://127.0.0.1:${port + 1}`);
      assert.match(other.lines[1]!, /^relayer: listening on /);
      assert.equal(
        other.lines[2],
        `relayer: PUBLIC_URL is http://127.0.0.1:${
          other.port + 1
        }, on this machine, but the service listens on port ${other.port}: QStash delivers to PUBLIC_URL/v1/qstash, which reaches this service only through something on port ${
          other.port + 1
        } that forwards to it; otherwise set PUBLIC_URL=http://127.0.0.1:${other.port}`,
      );
      const same = await run((port) => `http://127.0.0.1:${port}`);
      assert.doesNotMatch(same.lines.join("\n"), /PUBLIC_URL is/);
      // https at its own port: a call there, as QStash's would be, fails
      // its TLS handshake, and the start says which PUBLIC_URL reaches it.
      const tls = await run(
        (port) => `https://127.0.0.1:${port}`,
        async (base) => {
          await assert.rejects(
            fetch(`${base.replace(/^http:/, "https:")}/healthz`),
            "an https call reached the service",
          );
        },
      );
      assert.equal(
        tls.lines[2],
        `relayer: PUBLIC_URL is https://127.0.0.1:${tls.port}, on this machine at the port the service listens on, but the service serves plain HTTP there (deno serve serves no TLS): QStash's deliveries to PUBLIC_URL/v1/qstash fail their TLS handshake; set PUBLIC_URL=http://127.0.0.1:${tls.port}`,
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }),
);
