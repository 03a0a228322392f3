/**
 * The least permissions `main.ts` serves with, as docs/webhook.md ("The
 * permissions it needs") gives them: each of its `deno serve` lines, run
 * as written (on loopback, its placeholder hosts and folder replaced by a
 * stand-in Sender, a real PostgreSQL server and a temp dir), serves a
 * signed delivery whose send reached the Sender; an `--allow-env` list is
 * refused at start as the page says; and a service of one's own built on
 * PostgresStore runs with the page's list of PostgreSQL's variables.
 *
 * @module
 */

import assert from "node:assert/strict";
import { hmacSignature } from "../webhook/_auth.ts";
import { startArgs } from "../support/start_args.ts";
import { assertOneLine, baseEnv, healthy, startMain } from "./_main_process.ts";
import { freshDatabase, postgresAvailable } from "./_postgres.ts";
import { timeout } from "./_timeout.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const SECRET = "permissions-secret-0123456789";
const OPS_TOKEN = "permissions-ops-0123456789";

/** The section of docs/webhook.md that gives the permissions. */
async function section(): Promise<string> {
  const doc = await Deno.readTextFile(`${ROOT}docs/webhook.md`);
  const start = doc.indexOf("\n### The permissions it needs\n");
  assert.ok(
    start >= 0,
    "no section 'The permissions it needs' in docs/webhook.md",
  );
  return doc.slice(start, doc.indexOf("\n## ", start + 1));
}

/** The `deno serve` lines of the section's sh block, by the comment above each. */
async function documentedLines(): Promise<
  { kv: string[]; postgres: string[] }
> {
  const block = /```sh\n([^]*?)```/.exec(await section())?.[1];
  assert.ok(block !== undefined, "the section has an sh block");
  const lines = block.trim().split("\n");
  const after = (comment: RegExp) => {
    const at = lines.findIndex((line) => comment.test(line));
    assert.ok(at >= 0, `a comment matching ${comment}`);
    const command = lines[at + 1]!.split(/\s+/);
    assert.deepEqual(command.slice(0, 2), ["deno", "serve"]);
    assert.equal(command.at(-1), "main.ts");
    return command.slice(1);
  };
  return {
    kv: after(/^# Deno KV in a file/),
    postgres: after(/^# PostgreSQL/),
  };
}

/**
 * The documented arguments with their placeholders replaced: loopback for
 * `0.0.0.0`, port 0 for 8000 (the system picks a free one as the process
 * binds it, and its listening line says which), the Sender's and the
 * database's real addresses, and `dir` for `./data`. Anything else is kept
 * as written.
 */
function placed(
  args: readonly string[],
  places: { signer: string; database?: string; dir?: string },
): string[] {
  return args.map((arg, i) => {
    if (args[i - 1] === "--host") return "127.0.0.1";
    if (args[i - 1] === "--port") return "0";
    let out = arg.replaceAll("signer.internal:9000", places.signer);
    if (places.database !== undefined) {
      out = out.replaceAll("db.internal:5432", places.database);
    }
    if (places.dir !== undefined) out = out.replaceAll("./data", places.dir);
    return out;
  });
}

/**
 * The permission flags of a placed `deno serve` line, checked to be all it
 * has beside the loopback host, the port and `main.ts`.
 */
function permissionsOf(args: readonly string[]): string[] {
  const permissions = args.filter((arg) => arg.startsWith("--allow-"));
  assert.deepEqual(
    args.filter((arg) => !arg.startsWith("--allow-")),
    ["serve", "--host", "127.0.0.1", "--port", "0", "main.ts"],
  );
  return permissions;
}

/** A stand-in Sender: a send answers a transaction, a receipt pending. */
function signer() {
  let sends = 0;
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    (req) => {
      if (new URL(req.url).pathname === "/send") {
        sends++;
        return Response.json({ txHash: "0xpermitted" });
      }
      return Response.json({ status: "pending" });
    },
  );
  return {
    address: `127.0.0.1:${server.addr.port}`,
    sends: () => sends,
    close: () => server.shutdown(),
  };
}

/**
 * Runs `main.ts` with the permissions `permissions` and nothing else of
 * `deno task start`'s (`startMain`: from the repository, with `env` and
 * nothing else of ours, on loopback at a port the system picks); creates
 * an authorized intent and sends delivery 1 of its settle job, signed;
 * returns the delivery's answer and what the service wrote on stderr.
 */
async function serveOneDelivery(
  permissions: readonly string[],
  env: Record<string, string>,
): Promise<{ status: number; answer: string; stderr: string }> {
  const writeDir = "/nonexistent";
  const shipped = startArgs({ port: 0, writeDir }).filter((arg) =>
    arg.startsWith("--allow-")
  );
  const service = startMain(env, {
    writeDir,
    drop: shipped,
    flags: permissions,
  });
  const stop = new AbortController();
  service.child.status.then(() => stop.abort());
  try {
    const base = await service.base();
    if (base === null) {
      assert.fail(`it did not start: ${(await service.ended()).stderr}`);
    }
    await healthy(base, stop.signal);
    if (stop.signal.aborted) {
      assert.fail(`it did not start: ${(await service.ended()).stderr}`);
    }
    const created = await fetch(`${base}/v1/intents`, {
      method: "POST",
      headers: { authorization: `Bearer ${OPS_TOKEN}` },
      body: JSON.stringify({ id: "pi_permitted", state: "authorized" }),
    });
    assert.equal(created.status, 201, await created.text());
    const body = JSON.stringify({
      job: { intentId: "pi_permitted", kind: "settle" },
      delivery: 1,
    });
    const res = await fetch(`${base}/v1/deliveries`, {
      method: "POST",
      body,
      headers: {
        "x-signature": hmacSignature(
          SECRET,
          body,
          Math.floor(Date.now() / 1000),
        ),
      },
    });
    const answer = await res.text();
    service.child.kill("SIGTERM");
    const { code, stdout, stderr } = await service.ended();
    assert.equal(code, 0, `${stdout}\n${stderr}`);
    return { status: res.status, answer, stderr };
  } finally {
    service.kill();
    await service.ended().catch(() => {});
  }
}

/** The answer of a delivery whose send reached the Sender. */
function assertSent(
  result: { status: number; answer: string; stderr: string },
  sends: number,
): void {
  assert.equal(result.status, 503, result.answer);
  assert.match(
    result.answer,
    /"outcome":"retry".*"reason":"sent 0xpermitted, waiting for confirmation"/,
  );
  assert.equal(sends, 1);
  assert.equal(result.stderr, "");
}

Deno.test(
  "main.ts serves a signed delivery on Deno KV with exactly the permissions docs/webhook.md gives",
  timeout(60_000, async () => {
    const { kv } = await documentedLines();
    const dir = await Deno.makeTempDir({ prefix: "relayer_permissions_" });
    const sender = signer();
    try {
      const args = placed(kv, { signer: sender.address, dir });
      // Only the placeholders changed.
      assert.deepEqual(
        args.filter((arg) => arg.startsWith("--")),
        [
          "--host",
          "--port",
          "--allow-env",
          `--allow-net=${sender.address}`,
          `--allow-read=${dir}`,
          `--allow-write=${dir}`,
        ],
      );
      const result = await serveOneDelivery(permissionsOf(args), {
        SENDER_URL: `http://${sender.address}`,
        WEBHOOK_SECRET: SECRET,
        OPS_TOKEN,
        KV_PATH: `${dir}/relayer.kv`,
      });
      assertSent(result, sender.sends());
    } finally {
      await sender.close();
      await Deno.remove(dir, { recursive: true });
    }
  }),
);

Deno.test({
  name:
    "main.ts serves a signed delivery on PostgreSQL with exactly the permissions docs/webhook.md gives",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    const { postgres } = await documentedLines();
    const database = await freshDatabase();
    const sender = signer();
    try {
      const url = new URL(database.url);
      const args = placed(postgres, {
        signer: sender.address,
        database: url.host,
      });
      assert.deepEqual(
        args.filter((arg) => arg.startsWith("--")),
        [
          "--host",
          "--port",
          "--allow-env",
          `--allow-net=${url.host},${sender.address}`,
        ],
      );
      const result = await serveOneDelivery(permissionsOf(args), {
        SENDER_URL: `http://${sender.address}`,
        WEBHOOK_SECRET: SECRET,
        OPS_TOKEN,
        DATABASE_URL: database.url,
      });
      assertSent(result, sender.sends());
    } finally {
      await sender.close();
      await database.drop();
    }
  }),
});

Deno.test(
  "main.ts with an --allow-env list is refused at start in the line docs/webhook.md quotes",
  timeout(60_000, async () => {
    const quoted =
      /`(relayer: cannot start: it may not read its environment[^`]*)`/
        .exec(await section())?.[1];
    assert.ok(quoted !== undefined, "the section quotes the refusal");
    const { kv } = await documentedLines();
    const dir = await Deno.makeTempDir({ prefix: "relayer_permissions_" });
    try {
      const args = placed(kv, { signer: "127.0.0.1:9", dir }).map((
        arg,
      ) =>
        arg === "--allow-env"
          ? "--allow-env=SENDER_URL,WEBHOOK_SECRET,KV_PATH"
          : arg
      );
      const { code, stderr } = await new Deno.Command(Deno.execPath(), {
        args,
        cwd: ROOT,
        clearEnv: true,
        env: {
          ...baseEnv(),
          SENDER_URL: "http://127.0.0.1:9",
          WEBHOOK_SECRET: SECRET,
          KV_PATH: `${dir}/relayer.kv`,
        },
        stdin: "null",
        stdout: "null",
        stderr: "piped",
      }).output();
      assert.equal(code, 1);
      const text = new TextDecoder().decode(stderr);
      assertOneLine(text, new RegExp(`^${RegExp.escape(quoted)}$`));
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  }),
);

Deno.test({
  name:
    "a service of one's own on PostgresStore runs with an --allow-env list of DATABASE_URL and the PostgreSQL variables docs/webhook.md names, and fails on PGMAX without them",
  ignore: !postgresAvailable,
  fn: timeout(60_000, async () => {
    const text = await section();
    const list = /it reads ((?:`PG[A-Z_]+`(?:, | and )?)+)/.exec(
      text.replaceAll("\n", " "),
    )?.[1];
    assert.ok(list !== undefined, "the section lists the variables");
    const names = [...list.matchAll(/`(PG[A-Z_]+)`/g)].map((m) => m[1]!);
    assert.equal(names[0], "PGMAX");
    const database = await freshDatabase();
    const dir = await Deno.makeTempDir({ prefix: "relayer_permissions_" });
    try {
      const service = `${dir}/service.ts`;
      await Deno.writeTextFile(
        service,
        `import postgres from "postgres";
import { PostgresStore } from ${JSON.stringify(`${ROOT}store/postgres.ts`)};
const sql = postgres(Deno.env.get("DATABASE_URL")!);
const store = new PostgresStore(sql);
await store.migrate();
console.log(JSON.stringify(await store.getIntent("pi_none")));
await sql.end();
`,
      );
      const host = new URL(database.url).host;
      const run = async (allowEnv: string) => {
        const { code, stdout, stderr } = await new Deno.Command(
          Deno.execPath(),
          {
            args: [
              "run",
              "--quiet",
              "--config",
              `${ROOT}deno.json`,
              `--allow-net=${host}`,
              `--allow-env=${allowEnv}`,
              service,
            ],
            clearEnv: true,
            env: { ...baseEnv(), DATABASE_URL: database.url },
            stdout: "piped",
            stderr: "piped",
          },
        ).output();
        const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
        return { code, stdout: decode(stdout), stderr: decode(stderr) };
      };
      const full = await run(["DATABASE_URL", ...names].join(","));
      assert.equal(full.code, 0, full.stderr);
      assert.equal(full.stdout.trim(), "null");
      const narrow = await run("DATABASE_URL");
      assert.notEqual(narrow.code, 0);
      assert.match(narrow.stderr, /Requires env access to "PGMAX"/);
    } finally {
      await database.drop();
      await Deno.remove(dir, { recursive: true });
    }
  }),
});
