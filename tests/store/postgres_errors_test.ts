import assert from "node:assert/strict";
import {
  connectionLost,
  goodbyeBeforeSent,
  serializableOnStandby,
} from "../../store/_postgres_errors.ts";
import postgres from "postgres";
import { isNotWritten } from "../../store/_not_written.ts";
import { isTypeFetchLost, PostgresStore } from "../../store/postgres.ts";

Deno.test("connectionLost() takes the server's FATAL and the socket's, TLS's and postgres.js's own errors as a lost connection, and a statement's failure as not", () => {
  const lost = [
    { severity: "FATAL", code: "57P01" }, // terminated by an administrator
    { severity: "FATAL", code: "57P05" }, // idle session timeout
    { severity: "PANIC", code: "XX000" },
    { code: "CONNECTION_CLOSED" },
    { code: "CONNECTION_DESTROYED" },
    { code: "CONNECT_TIMEOUT" },
    { code: "ECONNRESET" },
    { code: "EPIPE" },
    { code: "ETIMEDOUT" },
    { code: "EHOSTUNREACH" },
    { code: "ERR_TLS_CERT_ALTNAME_INVALID" },
  ];
  const kept = [
    { severity: "ERROR", code: "RL001" }, // a replayed claim
    { severity: "ERROR", code: "RL002" }, // the intent moved on
    { severity: "ERROR", code: "23505" },
    { severity: "ERROR", code: "40001" },
    { severity: "ERROR", code: "57014" }, // statement timeout: the session lives
    { severity: "ERROR", code: "25006" }, // read-only transaction
    new TypeError("a value the client cannot send"),
    { code: "UNSAFE_TRANSACTION" },
    null,
    undefined,
    "text",
  ];
  for (const error of lost) {
    assert.ok(connectionLost(error), JSON.stringify(error));
  }
  for (const error of kept) {
    assert.ok(!connectionLost(error), JSON.stringify(error) ?? String(error));
  }
});

Deno.test("isTypeFetchLost() takes only postgres.js's array-types query failing with its connection lost or cancelled: not that query failing otherwise, nor another query losing its connection", () => {
  const TYPES =
    "select b.oid, b.typarray from pg_catalog.pg_type a left join pg_catalog.pg_type b on b.oid = a.typelem where a.typcategory = 'A' group by b.oid, b.typarray order by b.oid";
  const failed = (query: unknown, fields: object) =>
    Object.assign(new Error("failed"), { query }, fields);
  const ended = { severity: "FATAL", code: "57P01" };
  assert.equal(isTypeFetchLost(failed(TYPES, ended)), true);
  assert.equal(
    isTypeFetchLost(failed(TYPES, { code: "CONNECTION_CLOSED" })),
    true,
  );
  // PgBouncer while its logins to the server fail: it answers so, with no
  // severity postgres.js reads, and closes the client.
  assert.equal(
    isTypeFetchLost(
      Object.assign(
        new Error(
          "server login has been failing, try again later (server_login_retry)",
        ),
        { query: TYPES, code: "08P01" },
      ),
    ),
    true,
  );
  // Cancelled (a statement_timeout shorter than it, pg_cancel_backend):
  // the connection goes on, and untaken the rejection ends the process.
  assert.equal(
    isTypeFetchLost(failed(TYPES, { severity: "ERROR", code: "57014" })),
    true,
  );
  for (
    const [name, reason] of [
      [
        "the types query, refused",
        failed(TYPES, {
          severity: "ERROR",
          code: "42501",
        }),
      ],
      ["another query", failed("SELECT 1", ended)],
      [
        "another query, refused by PgBouncer",
        failed("SELECT 1", { code: "08P01" }),
      ],
      ["no query, refused by PgBouncer", failed(undefined, { code: "08P01" })],
      [
        "the types query within another",
        failed(`WITH t AS (${TYPES}) SELECT 1`, ended),
      ],
      ["no query", Object.assign(new Error("failed"), ended)],
      ["null", null],
    ] as const
  ) {
    assert.equal(isTypeFetchLost(reason), false, name);
  }
});

Deno.test("serializableOnStandby() takes a hot standby's refusal of SERIALIZABLE (0A000, its words) alone: not another 0A000, as a cached plan the schema changed under, which the store asks again as stale, nor the words under another code", () => {
  const TYPES =
    "select b.oid, b.typarray from pg_catalog.pg_type a left join pg_catalog.pg_type b on b.oid = a.typelem where a.typcategory = 'A' group by b.oid, b.typarray order by b.oid";
  const refused = (code: string, message: string, query?: string) =>
    Object.assign(new Error(message), {
      severity: "ERROR",
      code,
      ...(query === undefined ? {} : { query }),
    });
  const standby = "cannot use serializable mode in a hot standby";
  const stale = "cached plan must not change result type";
  assert.equal(serializableOnStandby(refused("0A000", standby)), true);
  assert.equal(serializableOnStandby(refused("0A000", stale)), false);
  assert.equal(serializableOnStandby(refused("25006", standby)), false);
  assert.equal(serializableOnStandby(null), false);
  // postgres.js's type query on a new connection: taken where a standby
  // refused it, not where it failed another way with the same code.
  assert.equal(isTypeFetchLost(refused("0A000", standby, TYPES)), true);
  assert.equal(isTypeFetchLost(refused("0A000", stale, TYPES)), false);
});

Deno.test("goodbyeBeforeSent() takes the server's goodbye to a session (FATAL, class 57, or an idle transaction timed out) as a request never sent, and a statement's own failure or a lost socket as not", () => {
  const goodbyes = [
    { severity: "FATAL", code: "57P01" }, // terminated by an administrator
    { severity: "FATAL", code: "57P02" }, // crash shutdown
    { severity: "FATAL", code: "57P03" }, // the server is starting up
    { severity: "FATAL", code: "57P05" }, // idle session timeout
    { severity: "FATAL", code: "25P03" }, // idle in transaction timeout
  ];
  const sent = [
    // Cancelled or timed out: it was sent, and ran; the session lives.
    { severity: "ERROR", code: "57014" },
    { severity: "ERROR", code: "25P02" }, // in a failed transaction
    { severity: "FATAL", code: "28P01" }, // a password refused
    { severity: "FATAL", code: "08P01" }, // a protocol violation
    { code: "CONNECTION_CLOSED" }, // the socket's end: it may have run
    { code: "ECONNRESET" },
    { severity: "FATAL" },
    null,
    undefined,
    "text",
  ];
  for (const error of goodbyes) {
    assert.ok(goodbyeBeforeSent(error), JSON.stringify(error));
  }
  for (const error of sent) {
    assert.ok(
      !goodbyeBeforeSent(error),
      JSON.stringify(error) ?? String(error),
    );
  }
});

Deno.test({
  name:
    "PostgresStore fails a write whose connection is refused with the connect's error and what to do, marked as not written (not as a write that may have landed), with fetch_types on or off; a read alike",
  // postgres.js's own reconnect timer (connection.js's reconnect), set as
  // the refused connect closes, outlives sql.end(): not the store's.
  sanitizeOps: false,
  sanitizeResources: false,
}, async () => {
  // A port nothing listens on: the write never began, so nothing landed.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  for (const fetch_types of [true, false]) {
    const sql = postgres(`postgres://relayer@127.0.0.1:${port}/payments`, {
      fetch_types,
      max: 1,
      onnotice: () => {},
    });
    try {
      const store = new PostgresStore(sql);
      // The connect's error is kept whole (its words, its code, its
      // cause), and said with what to do: its words alone, "connect
      // ECONNREFUSED …", left a service's log line without it. What this
      // checks above all holds as before: the write is not taken as one
      // that may have landed (it never began), and is marked so.
      await assert.rejects(
        store.createIntent({ id: "pi_0001", state: "authorized" }),
        (error: Error) => {
          assert.match(
            error.message,
            /^Cannot create intent pi_0001 as nothing listens at PostgreSQL's host and port \(Error: connect ECONNREFUSED 127\.0\.0\.1:\d+\): start the server, or correct the host and port the client connects to; nothing was written, so try again$/,
            `fetch_types: ${fetch_types}`,
          );
          assert.equal((error as { code?: unknown }).code, "ECONNREFUSED");
          assert.match(String(error.cause), /^Error: connect ECONNREFUSED/);
          assert.ok(isNotWritten(error), `fetch_types: ${fetch_types}`);
          return true;
        },
      );
      await assert.rejects(store.getIntent("pi_0001"), (error: Error) => {
        assert.match(
          error.message,
          /^The store's read failed as nothing listens at PostgreSQL's host and port \(Error: connect ECONNREFUSED 127\.0\.0\.1:\d+\): start the server, or correct the host and port the client connects to; nothing was read, so try again$/,
          `fetch_types: ${fetch_types}`,
        );
        assert.equal((error as { code?: unknown }).code, "ECONNREFUSED");
        return true;
      });
    } finally {
      await sql.end({ timeout: 0 });
    }
  }
});
