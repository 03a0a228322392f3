/**
 * A signer's compressed body: its Content-Length counts the compressed
 * bytes, and fetch decodes them, so that length says nothing of what
 * reading it all buffers.
 */
import assert from "node:assert/strict";
import { HttpSender } from "../../mod.ts";

Deno.test("HttpSender.send() reads at most 64 KiB of a gzip body whose compressed length is under 64 KiB", async () => {
  // 48 MiB of zeros, about 48 KiB once gzipped.
  const chunk = new Uint8Array(1024 * 1024);
  const cs = new CompressionStream("gzip");
  const writer = cs.writable.getWriter();
  const writing = (async () => {
    for (let i = 0; i < 48; i++) await writer.write(chunk);
    await writer.close();
  })();
  const gzipped = new Uint8Array(await new Response(cs.readable).arrayBuffer());
  await writing;
  assert.ok(gzipped.length < 64 * 1024);
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    () =>
      new Response(gzipped, {
        status: 400,
        headers: {
          "content-encoding": "gzip",
          "content-length": String(gzipped.length),
        },
      }),
  );
  try {
    let read = 0;
    const counting: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      const body = res.body!.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(bytes, controller) {
            read += bytes.byteLength;
            controller.enqueue(bytes);
          },
        }),
      );
      return new Response(body, res);
    };
    const sender = new HttpSender({
      url: `http://127.0.0.1:${server.addr.port}`,
      fetch: counting,
    });
    await assert.rejects(
      sender.send({ id: "pi_0001" } as never, { replace: false }),
    );
    assert.ok(
      read <= 2 * 1024 * 1024,
      `read ${read} bytes of the decoded body`,
    );
  } finally {
    await server.shutdown();
  }
});
