/**
 * A Deno KV database reached over KV Connect, as Deno Deploy attaches one,
 * kept in this process's memory: what `main.ts` opens with no path where
 * `DENO_KV_DEFAULT_PATH` names its URL. It keeps what it is sent (keys and
 * values as Deno encodes them, in Deno KV's byte order), versionstamps each
 * commit, and holds a commit to its checks, so every process that opens it
 * shares one store. It runs no queue (KV Connect has none) and ends an
 * entry at its `expireIn`.
 *
 * @module
 */
import { kvMetadata } from "./_echoing_kv.ts";

/** One stored entry, as KV Connect carries it. */
interface Entry {
  key: Uint8Array;
  value: Uint8Array;
  encoding: number;
  versionstamp: Uint8Array;
  expireAtMs: number;
}

/** A protobuf field: its number, and its varint or its bytes. */
type Field = { field: number; varint: number } | {
  field: number;
  bytes: Uint8Array;
};

function fields(body: Uint8Array): Field[] {
  const out: Field[] = [];
  let at = 0;
  const varint = (): number => {
    let value = 0;
    for (let scale = 1;; scale *= 128) {
      const byte = body[at++]!;
      value += (byte & 0x7f) * scale;
      if ((byte & 0x80) === 0) return value;
    }
  };
  while (at < body.length) {
    const tag = varint();
    const field = Math.floor(tag / 8);
    const wire = tag % 8;
    if (wire === 0) out.push({ field, varint: varint() });
    else if (wire === 2) {
      const length = varint();
      out.push({ field, bytes: body.subarray(at, at + length) });
      at += length;
    } else throw new Error(`wire type ${wire} is not KV Connect's`);
  }
  return out;
}

function bytesOf(list: Field[], field: number): Uint8Array {
  const found = list.find((f) => f.field === field);
  return found && "bytes" in found ? found.bytes : new Uint8Array();
}

function varintOf(list: Field[], field: number): number {
  const found = list.find((f) => f.field === field);
  return found && "varint" in found ? found.varint : 0;
}

function encodeVarint(value: number, out: number[]): void {
  while (value >= 128) {
    out.push((value % 128) | 0x80);
    value = Math.floor(value / 128);
  }
  out.push(value);
}

function encodeBytes(field: number, bytes: Uint8Array, out: number[]): void {
  encodeVarint(field * 8 + 2, out);
  encodeVarint(bytes.length, out);
  out.push(...bytes);
}

function encodeNumber(field: number, value: number, out: number[]): void {
  encodeVarint(field * 8, out);
  encodeVarint(value, out);
}

function compare(a: Uint8Array, b: Uint8Array): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (a[i] !== b[i]) return a[i]! - b[i]!;
  }
  return a.length - b.length;
}

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * Serves on 127.0.0.1 at a free port a KV Connect database kept in memory;
 * its metadata URL is `http://127.0.0.1:<port>/kv`.
 */
export function memoryKvConnect(): Deno.HttpServer<Deno.NetAddr> {
  const entries = new Map<string, Entry>();
  let commits = 0;
  const live = (now: number): Entry[] =>
    [...entries.values()].filter((e) =>
      e.expireAtMs === 0 || e.expireAtMs > now
    )
      .sort((a, b) => compare(a.key, b.key));

  function read(body: Uint8Array): Uint8Array<ArrayBuffer> {
    const out: number[] = [];
    const all = live(Date.now());
    for (const range of fields(body)) {
      if (range.field !== 1 || !("bytes" in range)) continue;
      const spec = fields(range.bytes);
      const start = bytesOf(spec, 1);
      const end = bytesOf(spec, 2);
      const limit = varintOf(spec, 3);
      let found = all.filter((e) =>
        compare(e.key, start) >= 0 && compare(e.key, end) < 0
      );
      if (varintOf(spec, 4) === 1) found = found.reverse();
      if (limit > 0) found = found.slice(0, limit);
      const values: number[] = [];
      for (const e of found) {
        const entry: number[] = [];
        encodeBytes(1, e.key, entry);
        encodeBytes(2, e.value, entry);
        encodeNumber(3, e.encoding, entry);
        encodeBytes(4, e.versionstamp, entry);
        encodeBytes(1, new Uint8Array(entry), values);
      }
      encodeBytes(1, new Uint8Array(values), out);
    }
    // read_is_strongly_consistent: true; status: SR_SUCCESS.
    encodeNumber(4, 1, out);
    encodeNumber(8, 1, out);
    return new Uint8Array(out);
  }

  function write(body: Uint8Array): Uint8Array<ArrayBuffer> {
    const now = Date.now();
    const request = fields(body);
    const out: number[] = [];
    const failed: number[] = [];
    let check = 0;
    for (const f of request) {
      if (f.field !== 1 || !("bytes" in f)) continue;
      const spec = fields(f.bytes);
      const entry = entries.get(hex(bytesOf(spec, 1)));
      const held = entry && (entry.expireAtMs === 0 || entry.expireAtMs > now)
        ? hex(entry.versionstamp)
        : "";
      if (held !== hex(bytesOf(spec, 2))) failed.push(check);
      check++;
    }
    if (request.some((f) => f.field === 3)) {
      throw new Error("KV Connect runs no queue: an enqueue was sent");
    }
    if (failed.length > 0) {
      encodeNumber(1, 2, out); // AW_CHECK_FAILURE
      for (const index of failed) encodeNumber(4, index, out);
      return new Uint8Array(out);
    }
    commits++;
    const versionstamp = new Uint8Array(10);
    new DataView(versionstamp.buffer).setBigUint64(0, BigInt(commits));
    for (const f of request) {
      if (f.field !== 2 || !("bytes" in f)) continue;
      const spec = fields(f.bytes);
      const key = bytesOf(spec, 1);
      const type = varintOf(spec, 3);
      if (type === 2) entries.delete(hex(key)); // M_DELETE
      else if (type === 1) { // M_SET
        const value = fields(bytesOf(spec, 2));
        entries.set(hex(key), {
          key: key.slice(),
          value: bytesOf(value, 1).slice(),
          encoding: varintOf(value, 2),
          versionstamp,
          expireAtMs: varintOf(spec, 4),
        });
      } else throw new Error(`mutation type ${type} is not kept here`);
    }
    encodeNumber(1, 1, out); // AW_SUCCESS
    encodeBytes(2, versionstamp, out);
    return new Uint8Array(out);
  }

  return Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    async (req) => {
      const path = new URL(req.url).pathname;
      if (path === "/kv") return kvMetadata();
      const body = new Uint8Array(await req.arrayBuffer());
      if (path === "/data/snapshot_read") return new Response(read(body));
      if (path === "/data/atomic_write") return new Response(write(body));
      return new Response("not a KV Connect path", { status: 404 });
    },
  );
}
