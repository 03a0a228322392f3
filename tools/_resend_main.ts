/**
 * The runtime side of the resend probe (`tools/_resend_probe.ts`), bundled
 * and run by Node or Bun: a signer on a raw loopback socket (`node:net`)
 * that answers a receipt on a kept-alive connection, then reads the send
 * on that connection whole and drops it unanswered (it broadcast; its
 * answer is lost), and answers anything on a later connection `503
 * {"notSent":true}` ("nothing signed", true of that copy). `HttpSender`
 * sends through the runtime's `fetch` (`tools/_resend_worker.ts`): in this
 * process, or, with `RESEND_WORKER` naming the bundled Worker, from a
 * Worker on workerd that Miniflare runs (with and without
 * `nodejs_compat`; `COMPAT_DATE`), reaching this signer on 127.0.0.1.
 * Prints one JSON line per run: {@linkcode Probe}.
 *
 * @module
 */

// deno-lint-ignore-file no-console
import { Buffer } from "node:buffer";
import { createServer, type Socket } from "node:net";
import process from "node:process";
import {
  BODY_FORMS,
  rawSendOnce,
  sendOnce,
  type Sent,
} from "./_resend_worker.ts";

/** A request the signer read whole. */
export interface Read {
  /** Its connection, counted from 1. */
  readonly connection: number;
  /** Its request line. */
  readonly line: string;
  /** How its body was framed: `content-length: N`, `chunked` or `none`. */
  readonly framing: string;
  /** Its body. */
  readonly body: string;
}

/** One run: what the signer read and what `HttpSender` made of it. */
export interface Probe extends Sent {
  /** Where the send came from (`in process`, `workerd nodejs_compat`, …). */
  readonly where: string;
  /** Every request the signer read. */
  readonly read: readonly Read[];
}

/** The request at the front of `buffer`, if whole, and what follows it. */
function takeRequest(
  buffer: Buffer,
): { line: string; framing: string; body: string; rest: Buffer } | null {
  const end = buffer.indexOf("\r\n\r\n");
  if (end < 0) return null;
  const lines = buffer.subarray(0, end).toString("latin1").split("\r\n");
  const header = (name: string) =>
    lines.slice(1).find((line) => line.toLowerCase().startsWith(`${name}:`))
      ?.slice(name.length + 1).trim();
  const chunked = /chunked/i.test(header("transfer-encoding") ?? "");
  if (chunked) {
    const parts: Buffer[] = [];
    let at = end + 4;
    for (;;) {
      const eol = buffer.indexOf("\r\n", at);
      if (eol < 0) return null;
      const size = parseInt(buffer.subarray(at, eol).toString("latin1"), 16);
      if (buffer.length < eol + 2 + size + 2) return null;
      parts.push(buffer.subarray(eol + 2, eol + 2 + size));
      at = eol + 2 + size + 2;
      if (size === 0) break;
    }
    return {
      line: lines[0]!,
      framing: "chunked",
      body: Buffer.concat(parts).toString(),
      rest: buffer.subarray(at),
    };
  }
  const declared = header("content-length");
  const length = Number(declared ?? 0);
  if (buffer.length < end + 4 + length) return null;
  return {
    line: lines[0]!,
    framing: declared === undefined ? "none" : `content-length: ${declared}`,
    body: buffer.subarray(end + 4, end + 4 + length).toString(),
    rest: buffer.subarray(end + 4 + length),
  };
}

/** The signer described above, on a loopback port. */
function signer(): Promise<
  { url: string; read: Read[]; close(): Promise<void> }
> {
  const read: Read[] = [];
  const sockets = new Set<Socket>();
  let connections = 0;
  const server = createServer((socket) => {
    const connection = ++connections;
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
    let buffer: Buffer = Buffer.alloc(0);
    socket.on("data", (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        const request = takeRequest(buffer);
        if (request === null) return;
        const { rest, ...whole } = request;
        buffer = rest;
        read.push({ connection, ...whole });
        const here = read.filter((r) => r.connection === connection).length;
        if (connection === 1 && here > 1) {
          // Read whole and broadcast; the answer never comes.
          socket.destroy();
          return;
        }
        const [status, answer] = connection === 1
          ? ["200 OK", '{"status":"pending"}']
          : [
            "503 Service Unavailable",
            '{"error":"signer is locked: nothing signed","notSent":true}',
          ];
        socket.write(
          `HTTP/1.1 ${status}\r\ncontent-type: application/json\r\nconnection: keep-alive\r\ncontent-length: ${answer.length}\r\n\r\n${answer}`,
        );
      }
    });
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      resolve({
        url: `http://127.0.0.1:${port}`,
        read,
        close() {
          for (const socket of sockets) socket.destroy();
          return new Promise((done) => server.close(() => done()));
        },
      });
    })
  );
}

/** A Miniflare of the Worker per set of flags, started once. */
const workerds = new Map<string, {
  dispatchFetch(url: string): Promise<Response>;
  dispose(): Promise<void>;
}>();

/**
 * The send from a Worker on workerd, through Miniflare, with `flags`:
 * `HttpSender`'s, or with `form` the runtime's own `fetch`'s.
 */
async function fromWorkerd(
  script: string,
  flags: string[],
  base: string,
  form?: string,
): Promise<Sent> {
  let mf = workerds.get(flags.join());
  if (mf === undefined) {
    // Resolved from the node_modules beside the bundle (a specifier Deno's
    // type check leaves alone).
    const name = "miniflare";
    const { Miniflare } = await import(name);
    mf = new Miniflare({
      modules: true,
      scriptPath: script,
      compatibilityDate: process.env.COMPAT_DATE,
      compatibilityFlags: flags,
    });
    workerds.set(flags.join(), mf!);
  }
  const answer = await mf!.dispatchFetch(
    `http://probe.test/?base=${encodeURIComponent(base)}${
      form === undefined ? "" : `&form=${form}`
    }`,
  );
  return await answer.json() as Sent;
}

const worker = process.env.RESEND_WORKER;
// HttpSender's send, then the runtime's fetch with each other body form
// (docs/api.md says each is sent once).
const runs: (readonly [string, (base: string) => Promise<Sent>])[] = worker
  ? [[], ["nodejs_compat"]].flatMap((flags) => {
    const where = ["workerd", ...flags].join(" ");
    return [
      [where, (base: string) => fromWorkerd(worker, flags, base)] as const,
      ...BODY_FORMS.map((form) =>
        [
          `${where}, fetch with a ${form} body`,
          (base: string) => fromWorkerd(worker, flags, base, form),
        ] as const
      ),
    ];
  })
  : [
    ["in process", sendOnce],
    ...BODY_FORMS.map((form) =>
      [
        `in process, fetch with a ${form} body`,
        (base: string) => rawSendOnce(base, form),
      ] as const
    ),
  ];
for (const [where, send] of runs) {
  const stand = await signer();
  let sent: Sent;
  try {
    sent = await send(stand.url);
    // Whatever the runtime sends late (a copy) is read before the count.
    await new Promise((resolve) => setTimeout(resolve, 200));
  } finally {
    await stand.close();
  }
  const probe: Probe = { where, ...sent, read: stand.read };
  console.log(JSON.stringify(probe));
}
for (const mf of workerds.values()) await mf.dispose();
