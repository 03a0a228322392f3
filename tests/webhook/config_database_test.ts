import assert from "node:assert/strict";
import { openHint, openService } from "../../main.ts";
import { ConfigError, loadConfig } from "../../webhook/config.ts";
import { workerConfig } from "../../webhook/_settings.ts";
import {
  freshDatabase,
  postgresAvailable,
  postgresUrl,
  readOnlyDatabase,
  sharedClient,
} from "../_postgres.ts";
import { startPostgres } from "../../support/postgres_server.ts";
import { closeEach } from "../_raw_http.ts";
import { startMain } from "../_main_process.ts";

const base = {
  SENDER_URL: "http://127.0.0.1:9000",
  WEBHOOK_SECRET: "a-secret-of-16-chars",
};

function refusal(env: Record<string, string>): ConfigError {
  try {
    loadConfig({ ...base, ...env });
  } catch (error) {
    assert.ok(error instanceof ConfigError);
    return error;
  }
  assert.fail("loadConfig() accepted it");
}

Deno.test("loadConfig() takes DATABASE_URL and describes it without the password", () => {
  const config = loadConfig({
    ...base,
    DATABASE_URL: "postgres://relayer:s3cret-pw@db.internal:6432/payments",
  });
  assert.equal(
    config.database?.url,
    "postgres://relayer:s3cret-pw@db.internal:6432/payments",
  );
  assert.equal(
    config.database?.description,
    "PostgreSQL db.internal:6432/payments, no TLS",
  );
  assert.equal(loadConfig(base).database, undefined);
  assert.ok(
    loadConfig({ ...base, DATABASE_URL: "postgresql://h/db" }).database,
  );
});

Deno.test("loadConfig() takes a DATABASE_URL at an IPv6 address in brackets, and hands the client its host and port as lists, which postgres.js reads (not from the URL)", () => {
  const at = (url: string) =>
    loadConfig({ ...base, DATABASE_URL: url }).database!;
  const verified = at(
    "postgres://relayer:s3cret-pw@[2001:DB8::0:5]:6432/pay%40ments?sslmode=verify-full",
  );
  assert.deepEqual(verified.hosts, { host: ["2001:db8::5"], port: [6432] });
  assert.equal(verified.name, "pay@ments");
  assert.equal(verified.ssl, "verify-full");
  assert.equal(
    verified.description,
    "PostgreSQL [2001:db8::5]:6432/pay@ments, TLS, server verified (sslmode=verify-full)",
  );
  // No port: PostgreSQL's.
  assert.deepEqual(at("postgres://relayer@[::1]/payments").hosts, {
    host: ["::1"],
    port: [5432],
  });
  // A name or an IPv4 address the client reads from the URL itself.
  assert.equal(
    at("postgres://relayer@127.0.0.1:5432/payments").hosts,
    undefined,
  );
  assert.equal(at("postgres://relayer@db.internal/payments").hosts, undefined);
});

Deno.test("loadConfig() says what DATABASE_URL's TLS parameters make the client do, as postgres.js reads them", () => {
  for (
    const [query, tls] of [
      ["", "no TLS"],
      ["?sslmode=disable", "no TLS"],
      [
        "?sslmode=prefer",
        "TLS if the server offers it, server not verified (sslmode=prefer)",
      ],
      ["?sslmode=require", "TLS, server not verified (sslmode=require)"],
      ["?sslmode=allow", "TLS, server not verified (sslmode=allow)"],
      ["?sslmode=verify-ca", "TLS, server verified (sslmode=verify-ca)"],
      ["?sslmode=verify-full", "TLS, server verified (sslmode=verify-full)"],
      [
        "?sslmode=verify-full&sslnegotiation=direct",
        "TLS, server verified (sslmode=verify-full), direct TLS (PostgreSQL 17 and later)",
      ],
      [
        "?sslmode=require&sslnegotiation=postgres",
        "TLS, server not verified (sslmode=require)",
      ],
    ]
  ) {
    const config = loadConfig({
      ...base,
      DATABASE_URL:
        `postgres://relayer:s3cret-pw@db.internal:5432/payments${query}`,
    });
    assert.equal(
      config.database?.description,
      `PostgreSQL db.internal:5432/payments, ${tls}`,
      query,
    );
  }
});

Deno.test("loadConfig() hands the client the ssl and sslnegotiation options the URL asks for, so the environment's PGSSL and PGSSLNEGOTIATION cannot change them", () => {
  for (
    const [query, ssl] of [
      ["", false],
      ["?sslmode=disable", false],
      ["?sslmode=prefer", "prefer"],
      ["?sslmode=allow", "require"],
      ["?sslmode=require", "require"],
      ["?sslmode=verify-ca", "verify-full"],
      ["?sslmode=verify-full", "verify-full"],
    ] as const
  ) {
    const config = loadConfig({
      ...base,
      DATABASE_URL: `postgres://relayer@db.internal/payments${query}`,
    });
    assert.equal(config.database?.ssl, ssl, query);
    assert.equal(config.database?.sslnegotiation, null, query);
  }
  assert.equal(
    loadConfig({
      ...base,
      DATABASE_URL:
        "postgres://relayer@db.internal/payments?sslmode=require&sslnegotiation=direct",
    }).database?.sslnegotiation,
    "direct",
  );
});

Deno.test("loadConfig() refuses TLS parameters the client would not honour, and says what to give instead", () => {
  const url = "postgres://relayer:s3cret-pw@db.internal:5432/payments";
  for (
    const [query, why] of [
      ...["/etc/ssl/rds-ca.pem", "system"].map((root) => [
        `?sslmode=verify-full&sslrootcert=${root}`,
        "it sets ?sslrootcert=, which the PostgreSQL client does not read as a CA (it sends it to the server, which refuses it): keep ?sslmode=verify-full and give Deno the CA with DENO_CERT=<file> (or --cert <file>)",
      ]),
      // postgres.js reads the last, a reader of the URL the first: the start
      // line would say "verified" of a connection without TLS.
      [
        "?sslmode=verify-full&sslmode=disable",
        "it sets ?sslmode= more than once: give it once",
      ],
      [
        "?ssl=require",
        "it sets ?ssl=, which libpq does not know: use ?sslmode=disable, prefer, require or verify-full",
      ],
      [
        "?sslnegotiation=direct",
        "it sets ?sslnegotiation=direct, which needs ?sslmode=require or verify-full",
      ],
      [
        "?sslmode=require&channel_binding=require",
        "it sets ?channel_binding=, which the PostgreSQL client does not read (it sends it to the server, which refuses it): remove it; the client cannot bind SCRAM to the TLS channel, so keep ?sslmode=verify-full to check the server",
      ],
      [
        "?keepalives_idle=30",
        "it sets ?keepalives_idle=, which the PostgreSQL client does not read (it sends it to the server, which refuses it): remove it",
      ],
      [
        "?sslmode=require&sslnegotiation=fast",
        'its ?sslnegotiation= is "fast": use postgres (the default) or direct',
      ],
      [
        "?sslmode=verify-full&sslcert=client.crt",
        "it sets ?sslcert=, which the PostgreSQL client does not read (client certificates are not supported): authenticate with a password",
      ],
      [
        "?sslkey=client.key",
        "it sets ?sslkey=, which the PostgreSQL client does not read (client certificates are not supported): authenticate with a password",
      ],
      [
        "?sslmode=verify_full",
        'its ?sslmode= is "verify_full": use disable, prefer, require or verify-full',
      ],
    ]
  ) {
    const error = refusal({ DATABASE_URL: `${url}${query}` });
    assert.equal(error.setting, "DATABASE_URL");
    assert.equal(
      error.message,
      `DATABASE_URL must be a PostgreSQL URL such as postgres://user:password@host:5432/dbname: ${why}`,
      query,
    );
    assert.ok(!error.message.includes("s3cret-pw"));
  }
});

Deno.test("loadConfig() refuses ?database=, which the client sends in place of the URL's database, so the start line would name another", () => {
  // postgres.js 3.4.9 sends each parameter it does not know in its first
  // message, after the user and database it read from the URL: the
  // server opens the database the query names.
  const error = refusal({
    DATABASE_URL:
      "postgres://relayer:s3cret-pw@db.internal:5432/payments?database=staging",
  });
  assert.equal(error.setting, "DATABASE_URL");
  assert.equal(
    error.message,
    "DATABASE_URL must be a PostgreSQL URL such as postgres://user:password@host:5432/dbname: it sets ?database=, which the PostgreSQL client sends to the server in place of the database the URL's path names (the start line would name the path's): name the database in the URL's path only, postgres://user:password@host:5432/dbname",
  );
});

Deno.test("loadConfig() refuses a ?client_encoding= other than UTF8, which the client would send in place of its own while it writes UTF-8", () => {
  // postgres.js 3.4.9 always writes UTF-8, and sends the parameter after
  // its own client_encoding: a server told LATIN1 stores each byte of a
  // non-ASCII id as a character of its own (double-encoded for every
  // other client, and longer than the store's byte limits count).
  for (const encoding of ["LATIN1", "latin1", "SQL_ASCII", "EUC_JP"]) {
    const error = refusal({
      DATABASE_URL:
        `postgres://relayer:s3cret-pw@db.internal:5432/payments?client_encoding=${encoding}`,
    });
    assert.equal(error.setting, "DATABASE_URL");
    assert.equal(
      error.message,
      `DATABASE_URL must be a PostgreSQL URL such as postgres://user:password@host:5432/dbname: its ?client_encoding= is "${encoding}", but the PostgreSQL client writes UTF-8 whatever it says (the server would store each byte of a non-ASCII character as a character of its own): remove it, or give UTF8`,
    );
  }
  for (const encoding of ["UTF8", "utf8", "UTF-8", "unicode"]) {
    assert.equal(
      loadConfig({
        ...base,
        DATABASE_URL:
          `postgres://relayer:s3cret-pw@db.internal:5432/payments?client_encoding=${encoding}`,
      }).database?.url.includes("client_encoding"),
      true,
    );
  }
});

Deno.test("loadConfig() refuses ?password= and ?dbname=, which the client would send to the server as settings, the password before any authentication, and says where they go", () => {
  for (
    const [url, why] of [
      [
        "postgres://relayer@db.internal:5432/payments?password=s3cret-pw",
        "it sets ?password=, which the PostgreSQL client does not read as the password (it sends it to the server as a setting, in its first message, before any authentication, and the server refuses it): put the password in the URL, postgres://user:password@host:5432/dbname, with /, ?, # and @ in it written %2F, %3F, %23 and %40",
      ],
      [
        "postgres://relayer:s3cret-pw@db.internal:5432?dbname=payments",
        "it sets ?dbname=, which the PostgreSQL client does not read (it sends it to the server, which refuses it): name the database in the URL's path, postgres://user:password@host:5432/dbname",
      ],
    ] as const
  ) {
    const error = refusal({ DATABASE_URL: url });
    assert.equal(error.setting, "DATABASE_URL");
    assert.equal(
      error.message,
      `DATABASE_URL must be a PostgreSQL URL such as postgres://user:password@host:5432/dbname: ${why}`,
      url,
    );
    assert.ok(!error.message.includes("s3cret-pw"), error.message);
  }
});

Deno.test("loadConfig() refuses a bad DATABASE_URL in one line that never shows the password", () => {
  for (
    const value of [
      "s3cret-pw@db.internal:5432/payments",
      "mysql://relayer:s3cret-pw@db.internal/payments",
      "postgres://relayer:s3cret-pw@:5432/payments",
      "postgres://relayer:s3cret-pw@db.internal:99999/payments",
      // A malformed %-escape, which decodeURIComponent throws on.
      "postgres://relayer:s3cret-pw@db.internal:5432/%zz",
      "postgres://relayer:s3cret%zz-pw@db.internal:5432/payments",
      "postgres://relayer:s3cret-pw@db%zz.internal:5432/payments",
    ]
  ) {
    const error = refusal({ DATABASE_URL: value });
    assert.equal(error.setting, "DATABASE_URL");
    assert.match(error.message, /^DATABASE_URL must be a PostgreSQL URL/);
    assert.ok(!error.message.includes("s3cret-pw"), error.message);
    assert.ok(!error.message.includes("\n"));
  }
});

Deno.test("loadConfig() refuses the DATABASE_URL forms the client cannot honour (several hosts, a raw '@' in the password, libpq's ?host=) and says what to give", () => {
  const cases: [string, RegExp][] = [
    [
      "postgres://relayer:s3cret-pw@db1:5432,db2:5432/payments",
      /: it names several hosts, and the relayer connects to one: give one TCP host/,
    ],
    [
      "postgres://relayer:s3cret-pw@db1,db2/payments",
      /: it names several hosts/,
    ],
    [
      // The client would read host "s3cret-pw" and password "s3cret": it
      // splits at the first "@", URL at the last.
      "postgres://relayer:s3cret-pw@secret,part@127.0.0.1:5432/payments",
      /: its user or password holds a raw '@': write it as %40/,
    ],
    [
      "postgres://relayer:s3cret-pw@x@db.internal/payments",
      /: its user or password holds a raw '@'/,
    ],
    [
      "postgres://relayer:s3cret-pw@[::1]:5432,[::2]:5432/payments",
      /: it names several hosts/,
    ],
    [
      "postgres://relayer:s3cret-pw@localhost/payments?host=/var/run/postgresql",
      /: it sets \?host=, which the PostgreSQL client does not read \(a Unix socket is not supported\): put one TCP host and port before the database name$/,
    ],
    [
      "postgres://relayer:s3cret-pw@localhost/payments?sslmode=require&hostaddr=10.0.0.1&port=6432",
      /: it sets \?hostaddr= and \?port=, which/,
    ],
  ];
  for (const [value, why] of cases) {
    const error = refusal({ DATABASE_URL: value });
    assert.equal(error.setting, "DATABASE_URL");
    assert.match(error.message, /^DATABASE_URL must be a PostgreSQL URL/);
    assert.match(error.message, why);
    assert.ok(!error.message.includes("s3cret-pw"), error.message);
  }
  // A comma in the password is not a second host; an '@' written %40 is fine.
  for (const password of ["a,b", "a%40b"]) {
    assert.ok(
      loadConfig({
        ...base,
        DATABASE_URL: `postgres://relayer:${password}@db.internal/payments`,
      }).database,
    );
  }
});

Deno.test("loadConfig() refuses a DATABASE_URL whose raw '/', '?' or '#' in the password ends the host part early, and never shows the password", () => {
  // The URL's host part ends at the first '/', '?' or '#': the rest of the
  // password, its '@' and the real host were read as the database name, a
  // query or a fragment, and the start line and the refusal to open quoted
  // them ("cannot open PostgreSQL relayer:5432/s3cret-pw@db.internal/…").
  for (
    const value of [
      "postgres://relayer:5432/s3cret-pw@db.internal/payments",
      "postgres://relayer:5432?s3cret-pw@db.internal/payments",
      "postgres://relayer:5432#s3cret-pw@db.internal/payments",
      "postgres://relayer:ab%40c/s3cret-pw@db.internal/payments",
      "postgres://relayer:x/s3cret-pw@db.internal/payments",
    ]
  ) {
    const error = refusal({ DATABASE_URL: value });
    assert.equal(error.setting, "DATABASE_URL");
    assert.match(
      error.message,
      /^DATABASE_URL must be a PostgreSQL URL .*: an '@' comes after its host: a raw '\/', '\?' or '#' in the user or password ends the host early, so write them as %2F, %3F and %23(, and an '@' in the database name as %40)? \(the value is not shown: it may hold a password\)$/,
    );
    // An '@' in what reads as the path may be the database name's too.
    assert.equal(
      error.message.includes("%40"),
      /^[^?#]*\/[^?#]*@/.test(value.slice("postgres://".length)),
      error.message,
    );
    assert.ok(!error.message.includes("s3cret-pw"), error.message);
    assert.ok(!error.message.includes("relayer:"), error.message);
  }
  // Written as %-escapes, the same password is taken, and not described.
  const config = loadConfig({
    ...base,
    DATABASE_URL: "postgres://relayer:5432%2Fs3cret-pw@db.internal/payments",
  });
  assert.equal(
    config.database?.description,
    "PostgreSQL db.internal/payments, no TLS",
  );
});

Deno.test("loadConfig() takes a DATABASE_URL whose query value holds an '@' after a password that ends at its own '@'", () => {
  // postgres.js sends such a parameter to the server as a setting, which
  // takes it: an application_name such as relayer@eu-west is common.
  const config = loadConfig({
    ...base,
    DATABASE_URL:
      "postgres://relayer:s3cret-pw@db.internal/payments?application_name=relayer@eu-west",
  });
  assert.equal(
    config.database?.description,
    "PostgreSQL db.internal/payments, no TLS",
  );
  // Without the userinfo's own '@', or with the '@' in a parameter's name,
  // the path or the fragment, it is a password cut short: still refused.
  for (
    const value of [
      "postgres://relayer:5432?a=s3cret-pw@db.internal/payments",
      "postgres://relayer:pw@db.internal/pay@ments",
      "postgres://relayer:pw@db.internal/payments?x@y=1",
      "postgres://relayer:pw@db.internal/payments#x@y",
    ]
  ) {
    assert.match(
      refusal({ DATABASE_URL: value }).message,
      /: an '@' comes after its host: /,
      value,
    );
  }
});

Deno.test("loadConfig() refuses a DATABASE_URL whose database name holds a raw '@' in words that name the database name and %40", () => {
  for (
    const value of [
      "postgres://relayer:s3cret-pw@db.internal/pay@ments",
      "postgres://relayer:s3cret-pw@db.internal:5432/team@eu?sslmode=disable",
    ]
  ) {
    const error = refusal({ DATABASE_URL: value });
    assert.equal(error.setting, "DATABASE_URL");
    assert.match(
      error.message,
      /^DATABASE_URL must be a PostgreSQL URL .*: an '@' comes after its host: write an '@' in the database name as %40, and a raw '\/', '\?' or '#' in the user or password, which ends the host early, as %2F, %3F and %23 \(the value is not shown: it may hold a password\)$/,
    );
    assert.ok(!error.message.includes("s3cret-pw"), error.message);
  }
  // Without credentials the '@' may be the database name's too, or a
  // password's cut short by a raw '/': both are named.
  assert.match(
    refusal({ DATABASE_URL: "postgres://db.internal/pay@ments" }).message,
    /: an '@' comes after its host: a raw '\/', '\?' or '#' in the user or password ends the host early, so write them as %2F, %3F and %23, and an '@' in the database name as %40 \(the value is not shown: it may hold a password\)$/,
  );
  // Written %40, the name is taken and described as it reads.
  assert.equal(
    loadConfig({
      ...base,
      DATABASE_URL: "postgres://relayer:s3cret-pw@db.internal/pay%40ments",
    }).database?.description,
    "PostgreSQL db.internal/pay@ments, no TLS",
  );
  // A URL that names no database, or names it "/", gives no name: the
  // client then takes its default (the user's name), not an empty one.
  for (
    const url of [
      "postgres://relayer:s3cret-pw@db.internal/",
      "postgres://relayer:s3cret-pw@db.internal:5432",
    ]
  ) {
    const database = loadConfig({ ...base, DATABASE_URL: url }).database;
    assert.ok(database !== undefined, url);
    assert.equal("name" in database, false, url);
  }
});

Deno.test("loadConfig() refuses KV_QUEUE, KV_PATH or KV_URL together with DATABASE_URL", () => {
  const url = "postgres://relayer:pw@127.0.0.1:5432/payments";
  const queue = refusal({ DATABASE_URL: url, KV_QUEUE: "1" });
  assert.equal(queue.setting, "KV_QUEUE");
  assert.match(queue.message, /KV_QUEUE is refused with DATABASE_URL/);
  assert.equal(
    refusal({ DATABASE_URL: url, KV_PATH: "./data/x.kv" }).message,
    "Set DATABASE_URL or KV_PATH, not both: the state lives in one store",
  );
  assert.equal(
    refusal({ DATABASE_URL: url, KV_URL: "https://kv.example" }).setting,
    "DATABASE_URL",
  );
});

Deno.test("openService() refuses a DATABASE_URL its client cannot parse in one line that never shows the password", async () => {
  // loadConfig() refuses this URL first; openService() must still not
  // let the client's bare URIError out, whatever config it is handed.
  const config = loadConfig({
    ...base,
    DATABASE_URL: "postgres://relayer:pw@127.0.0.1:1/payments",
  });
  const url = "postgres://relayer:s3cret%zz-pw@127.0.0.1:1/payments";
  await assert.rejects(
    openService({ ...config, database: { ...config.database!, url } }),
    (error) => {
      assert.ok(error instanceof ConfigError, String(error));
      assert.equal(error.setting, "DATABASE_URL");
      assert.match(error.message, /^DATABASE_URL: cannot open PostgreSQL/);
      assert.ok(!error.message.includes("s3cret"), error.message);
      assert.ok(!error.message.includes("\n"));
      return true;
    },
  );
});

Deno.test("loadConfig() and a Worker's workerConfig refuse a DATABASE_URL whose target_session_attrs the client does not take, libpq's default any among them, naming DATABASE_URL without the password", () => {
  const url = "postgres://relayer:s3cret-pw@db.example.com:5432/payments";
  const shape =
    "DATABASE_URL must be a PostgreSQL URL such as postgres://user:password@host:5432/dbname";
  const cases = [
    [
      "any",
      `${shape}: its target_session_attrs is any, libpq's default, which the PostgreSQL client does not take: remove it (without one the client does what any asks)`,
    ],
    [
      "primary-only",
      `${shape}: its target_session_attrs is not one the PostgreSQL client takes (read-write, read-only, primary, standby or prefer-standby): set one of those, or remove it`,
    ],
  ] as const;
  for (const [value, message] of cases) {
    const DATABASE_URL = `${url}?target_session_attrs=${value}`;
    for (
      const read of [
        () => loadConfig({ ...base, DATABASE_URL }),
        () => workerConfig({ ...base, DATABASE_URL }, { database: true }),
      ]
    ) {
      assert.throws(read, (error) => {
        assert.ok(error instanceof ConfigError, String(error));
        assert.equal(error.setting, "DATABASE_URL");
        assert.equal(error.message, message);
        return true;
      });
    }
  }
  // Those it takes, and an empty one (none), are taken.
  for (
    const value of [
      "read-write",
      "read-only",
      "primary",
      "standby",
      "prefer-standby",
      "",
    ]
  ) {
    loadConfig({
      ...base,
      DATABASE_URL: `${url}?target_session_attrs=${value}`,
    });
  }
});

Deno.test("openService() says what to do with a target_session_attrs its client does not take (the environment's PGTARGETSESSIONATTRS meets it so), in one line without the password", async () => {
  // loadConfig() refuses this URL first; the client refuses the same value
  // from PGTARGETSESSIONATTRS as it is made, before it connects, which the
  // start must say as one line too.
  const config = loadConfig({
    ...base,
    DATABASE_URL: "postgres://relayer:s3cret-pw@127.0.0.1:1/payments",
  });
  const url = `${config.database!.url}?target_session_attrs=any`;
  await assert.rejects(
    openService({ ...config, database: { ...config.database!, url } }),
    (error) => {
      assert.ok(error instanceof ConfigError, String(error));
      assert.equal(
        error.message,
        "DATABASE_URL: cannot open PostgreSQL 127.0.0.1:1/payments, no TLS: target_session_attrs any is not supported (the PostgreSQL client takes target_session_attrs read-write, read-only, primary, standby or prefer-standby only; any, libpq's default, is what it does without one: remove it from DATABASE_URL, or unset PGTARGETSESSIONATTRS, which the client reads where DATABASE_URL sets none)",
      );
      return true;
    },
  );
});

Deno.test("openService() says what to do when nothing listens at DATABASE_URL's host and port", async () => {
  // A port just closed: the connection is refused at once.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  const config = loadConfig({
    ...base,
    DATABASE_URL: `postgres://relayer:s3cret-pw@127.0.0.1:${port}/payments`,
  });
  await assert.rejects(openService(config), (error) => {
    assert.ok(error instanceof ConfigError, String(error));
    assert.equal(error.setting, "DATABASE_URL");
    assert.equal(
      error.message,
      `DATABASE_URL: cannot open PostgreSQL 127.0.0.1:${port}/payments, no TLS: connect ECONNREFUSED 127.0.0.1:${port} (nothing listens at that host and port: start the server, or correct the host and port in DATABASE_URL)`,
    );
    return true;
  });
});

Deno.test("openService() stops within databaseWaitMs, in one line naming DATABASE_URL, when what it reaches takes the connection and never answers as PostgreSQL does", async () => {
  // A port that accepts and stays silent: another service, a black hole.
  const held: Deno.Conn[] = [];
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const accepting = (async () => {
    for await (const conn of listener) held.push(conn);
  })();
  const { port } = listener.addr as Deno.NetAddr;
  try {
    const config = loadConfig({
      ...base,
      DATABASE_URL: `postgres://relayer:s3cret-pw@127.0.0.1:${port}/payments`,
    });
    const started = Date.now();
    const lines: string[] = [];
    await assert.rejects(
      openService(config, {
        databaseWaitMs: 300,
        log: (line) => lines.push(line),
      }),
      (error) => {
        assert.ok(error instanceof ConfigError, String(error));
        assert.equal(error.setting, "DATABASE_URL");
        assert.equal(
          error.message,
          `DATABASE_URL: cannot open PostgreSQL 127.0.0.1:${port}/payments, no TLS: no answer within 300ms: is it a PostgreSQL server this process can reach, and is the migration not waiting on another's lock?`,
        );
        return true;
      },
    );
    assert.ok(Date.now() - started < 5_000);
    assert.ok(held.length >= 1); // it did connect, and heard nothing
    // Given up, the start tries nothing more, and says nothing more: the
    // client it ended fails the migration under way.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    assert.deepEqual(lines.filter((line) => /tries again/.test(line)), []);
  } finally {
    listener.close();
    await accepting.catch(() => {});
    for (const conn of held) conn.close();
  }
});

Deno.test("openService() whose start gave up ends the database's sockets itself: a busy backend's close, 200 ms after the client's end, is not waited for", async () => {
  // A server that takes the connection, never answers, and closes it
  // 200 ms after the client's end reaches it, as a backend busy with a
  // query reads the client's Terminate only once that query is done. The
  // service's socket closes once its goodbye and FIN are handed to the
  // system (tests/store/postgres_socket_goodbye_test.ts), so the start's
  // give-up neither waits on that close nor leaves the socket open.
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let ended = 0;
  let closed = 0;
  const served: Promise<void>[] = [];
  const accepting = (async () => {
    for await (const conn of listener) {
      served.push((async () => {
        const buffer = new Uint8Array(1024);
        try {
          while (await conn.read(buffer) !== null) { /* never answered */ }
        } catch { /* reset: ended all the same */ }
        ended++;
        await new Promise((resolve) => setTimeout(resolve, 200));
        conn.close();
        closed++;
      })());
    }
  })();
  const { port } = listener.addr as Deno.NetAddr;
  try {
    const config = loadConfig({
      ...base,
      DATABASE_URL: `postgres://relayer:s3cret-pw@127.0.0.1:${port}/payments`,
    });
    await assert.rejects(
      openService(config, { databaseWaitMs: 300, log: () => {} }),
      ConfigError,
    );
    assert.ok(served.length >= 1); // it did connect
    assert.equal(closed, 0, "returned before the busy backend's close");
    // Every connection it made, ended by the client.
    for (let waited = 0; ended < served.length && waited < 1_000;) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      waited += 10;
    }
    assert.equal(ended, served.length);
  } finally {
    listener.close();
    await accepting.catch(() => {});
    await Promise.all(served);
  }
});

/**
 * `openService()`'s refusal on a fresh database as a new role made with
 * `options` (`CREATE ROLE … LOGIN PASSWORD … <options>`), checked by
 * `check`; the role's password never in it.
 */
async function refusedAsNewRole(
  options: string,
  check: (message: string) => void,
): Promise<void> {
  const database = await freshDatabase();
  const admin = await sharedClient();
  const role = `r${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
  await admin.unsafe(
    `CREATE ROLE "${role}" LOGIN PASSWORD '${role}-pw' ${options}`,
  );
  try {
    const url = new URL(database.url);
    url.username = role;
    url.password = `${role}-pw`;
    const config = loadConfig({ ...base, DATABASE_URL: url.href });
    await assert.rejects(openService(config), (error) => {
      assert.ok(error instanceof ConfigError, String(error));
      check(error.message);
      assert.ok(!error.message.includes(`${role}-pw`), error.message);
      return true;
    });
  } finally {
    await database.drop();
    await admin.unsafe(`DROP ROLE "${role}"`);
  }
}

Deno.test({
  name:
    "openService() points a role refused by PostgreSQL at the grants it needs, in one line",
  ignore: !postgresAvailable,
  async fn() {
    // A role that may log in and nothing else: on a fresh database it
    // cannot create the store's schema.
    await refusedAsNewRole("", (message) =>
      assert.match(
        message,
        /^DATABASE_URL: cannot open PostgreSQL .*: Cannot migrate the PostgreSQL schema "relayer" as this role may not change it \(permission denied for database [^)]*\): run migrate\(\) once as the schema's owner \(at the first start, and before starting a version that changes the schema\); docs\/postgres\.md lists the grants a service role needs after that$/,
      ));
  },
});

/**
 * A relay on 127.0.0.1 in front of the server of `url` that ends the first
 * `cuts` connections (both sides) as each sends the migration's check, as
 * a server restarting or ending sessions does.
 */
function cuttingRelay(url: string, cuts: number) {
  const real = new URL(url);
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns: Deno.Conn[] = [];
  const latin1 = new TextDecoder("latin1");
  let cut = 0;
  const accepting = (async () => {
    for await (const client of listener) {
      const server = await Deno.connect({
        hostname: real.hostname,
        port: Number(real.port || 5432),
      });
      conns.push(client, server);
      server.readable.pipeTo(client.writable).catch(() => {});
      (async () => {
        const writer = server.writable.getWriter();
        for await (const chunk of client.readable) {
          if (cut < cuts && latin1.decode(chunk).includes(" AS current")) {
            cut++;
            client.close();
            server.close();
            return;
          }
          await writer.write(chunk);
        }
      })().catch(() => {});
    }
  })().catch(() => {});
  const proxied = new URL(url);
  proxied.port = String((listener.addr as Deno.NetAddr).port);
  return {
    url: proxied.href,
    cut: () => cut,
    async close() {
      listener.close();
      closeEach(conns);
      await accepting;
    },
  };
}

Deno.test({
  name:
    "openService() tries the migration again when PostgreSQL loses the connection under it at start, and starts",
  ignore: !postgresAvailable,
  async fn() {
    const database = await freshDatabase();
    // Two lost connections in a row: a restart or a burst of ended
    // sessions, as the start meets it during a failover.
    const relay = cuttingRelay(database.url, 2);
    const lines: string[] = [];
    try {
      const config = loadConfig({ ...base, DATABASE_URL: relay.url });
      const service = await openService(config, {
        log: (line) => lines.push(line),
      });
      try {
        assert.equal(relay.cut(), 2);
        await service.store.createIntent({ id: "pi_1", state: "authorized" });
        assert.equal(
          (await service.store.getIntent("pi_1"))?.state,
          "authorized",
        );
      } finally {
        // 5 s: postgres.js 3.4.9's end() waits its whole timeout once a
        // connection was lost under it.
        await service.close();
      }
      const retries = lines.filter((line) => /tries again/.test(line));
      assert.equal(retries.length, 2);
      // The wait doubles before each next try.
      for (const [i, wait] of ["0\\.25", "0\\.5"].entries()) {
        assert.match(
          retries[i]!,
          new RegExp(
            `^relayer: PostgreSQL lost the connection during the migration at start \\(.*CONNECTION_CLOSED.*\\): tries again in ${wait}s \\(try ${
              i + 2
            } of 4\\)$`,
          ),
        );
      }
    } finally {
      await relay.close();
      await database.drop();
    }
  },
});

Deno.test({
  name:
    "openService() stops in one line naming DATABASE_URL when PostgreSQL loses the connection at every try of the migration",
  ignore: !postgresAvailable,
  async fn() {
    const database = await freshDatabase();
    const relay = cuttingRelay(database.url, Infinity);
    try {
      const config = loadConfig({ ...base, DATABASE_URL: relay.url });
      const started = Date.now();
      await assert.rejects(
        openService(config, { log: () => {} }),
        (error) => {
          assert.ok(error instanceof ConfigError, String(error));
          assert.equal(error.setting, "DATABASE_URL");
          assert.match(
            error.message,
            /^DATABASE_URL: cannot open PostgreSQL 127\.0\.0\.1:\d+\/\w+, no TLS: .*CONNECTION_CLOSED.* \(the connection was lost at each of 4 tries: start again once the database is up\)$/,
          );
          return true;
        },
      );
      // Bounded: four tries, 1.75 s of waits between them.
      assert.equal(relay.cut(), 4);
      assert.ok(Date.now() - started < 10_000);
    } finally {
      await relay.close();
      await database.drop();
    }
  },
});

Deno.test({
  name:
    "openService() with a DATABASE_URL's target_session_attrs, its server fit, says the connection was lost at each try where PostgreSQL lost it, not that target_session_attrs ended it",
  ignore: !postgresAvailable,
  async fn() {
    const database = await freshDatabase();
    const relay = cuttingRelay(database.url, Infinity);
    const url = new URL(relay.url);
    url.search = "?target_session_attrs=read-write";
    try {
      // The start's 4 tries, 0.25, 0.5 and 1 s apart: 1.75 s of waits.
      await assert.rejects(
        openService(loadConfig({ ...base, DATABASE_URL: url.href }), {
          log: () => {},
        }),
        (error) => {
          assert.ok(error instanceof ConfigError, String(error));
          assert.match(
            error.message,
            /: .*CONNECTION_CLOSED.* \(the connection was lost at each of 4 tries: start again once the database is up\)$/,
          );
          return true;
        },
      );
      assert.equal(relay.cut(), 4);
    } finally {
      await relay.close();
      await database.drop();
    }
  },
});

Deno.test({
  name:
    "openService() says what to do when PostgreSQL has no connection slot for the role (its CONNECTION LIMIT reached), in one line",
  ignore: !postgresAvailable,
  async fn() {
    // Every slot the role may hold already taken: the limit at 0.
    await refusedAsNewRole("CONNECTION LIMIT 0", (message) =>
      // Before: the server's words alone, "too many connections for
      // role …", with nothing to do.
      assert.match(
        message,
        /^DATABASE_URL: cannot open PostgreSQL [^\n]*: too many connections for role "r[0-9a-f]+" \(the server has no connection slot left for this role: its CONNECTION LIMIT, the database's or the server's max_connections is reached; see pg_stat_activity for who holds them, end the idle ones or raise the limit, then try again\)$/,
      ));
  },
});

Deno.test("openHint() names a missing database whether the server's words come alone or after a prefix", () => {
  for (
    const message of [
      'database "payments" does not exist',
      'PostgresError: database "payments" does not exist',
    ]
  ) {
    assert.equal(
      openHint(message, false),
      " (no database of that name on this server: correct the name in DATABASE_URL, or create it (CREATE DATABASE); one renamed or dropped since the service last ran is missing too)",
      message,
    );
  }
});

Deno.test("openHint() says to correct or create the role where a server that takes connections without a password (trust, peer) has no role of the user's name", () => {
  // The server's words (28000); one checking passwords says "password
  // authentication failed" of a missing role too, which has its own hint.
  for (
    const message of [
      'role "alice" does not exist',
      'PostgresError: role "alice" does not exist',
    ]
  ) {
    assert.equal(
      openHint(message, false),
      " (no role of that name on this server: correct the user in DATABASE_URL, postgres://user:password@host:5432/dbname, or create the role (CREATE ROLE … LOGIN); a DATABASE_URL that names no user logs in as PGUSER, else as the login name in USER)",
      message,
    );
  }
});

Deno.test("openHint() names ?options= where a pooler refuses a setting sent in it (a newer PgBouncer, as Neon's and Supabase's poolers word it), with or without the pooler's advice after the name", () => {
  const fix =
    "from DATABASE_URL at connect: remove it from DATABASE_URL and set what it sets on the role instead (ALTER ROLE … SET …), which each server session the pooler opens takes)";
  const cases = [
    // PgBouncer before 1.20, as tests/store/postgres_pgbouncer_test.ts meets it.
    ["unsupported startup parameter: options", "?options="],
    [
      "unsupported startup parameter: search_path. Please use unpooled connection or remove this parameter from the startup package.",
      "?search_path=",
    ],
    // A newer PgBouncer names the setting inside ?options=.
    [
      "unsupported startup parameter in options: search_path",
      "-c search_path=… in ?options=",
    ],
    [
      "unsupported startup parameter in options: statement_timeout. Please use unpooled connection or remove this parameter from the startup package. More details: https://neon.tech/docs/connect/connection-errors#unsupported-startup-parameter",
      "-c statement_timeout=… in ?options=",
    ],
  ] as const;
  for (const [message, sent] of cases) {
    assert.equal(
      openHint(message, false),
      ` (the pooler in front of PostgreSQL (PgBouncer) takes no ${sent} ${fix}`,
      message,
    );
  }
});

Deno.test("openHint() says what to do when the server's own connection slots are all taken", () => {
  for (
    const message of [
      "sorry, too many clients already",
      "remaining connection slots are reserved for non-replication superuser connections",
      "remaining connection slots are reserved for roles with the SUPERUSER attribute",
      'too many connections for database "payments"',
    ]
  ) {
    assert.match(
      openHint(message, false),
      /^ \(the server has no connection slot left for this role: .*, then try again\)$/,
      message,
    );
  }
});

Deno.test({
  name:
    "openService() says what to do when the role's password expired (VALID UNTIL), in one line, and starts once it is renewed",
  ignore: !postgresAvailable,
  async fn() {
    const database = await freshDatabase();
    const admin = await sharedClient();
    const role = `r${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
    await admin.unsafe(
      `CREATE ROLE "${role}" LOGIN PASSWORD '${role}-pw' VALID UNTIL '2000-01-01';
       GRANT CREATE ON DATABASE "${
        new URL(database.url).pathname.slice(1)
      }" TO "${role}"`,
    );
    try {
      const url = new URL(database.url);
      url.username = role;
      url.password = `${role}-pw`;
      const config = loadConfig({ ...base, DATABASE_URL: url.href });
      // Before: the server's words alone ("password authentication failed
      // for user …"), the same for a wrong password and an expired one.
      await assert.rejects(openService(config, { log: () => {} }), (error) => {
        assert.ok(error instanceof ConfigError, String(error));
        assert.equal(
          error.message.replace(/PostgreSQL \S+, [^:]+:/, "PostgreSQL …:"),
          `DATABASE_URL: cannot open PostgreSQL …: password authentication failed for user "${role}" (the server refused this user and password: check them in DATABASE_URL, and that the role's password has not expired (SELECT rolvaliduntil FROM pg_roles; renew it with ALTER ROLE … VALID UNTIL), then try again)`,
        );
        assert.ok(!error.message.includes(`${role}-pw`), error.message);
        return true;
      });
      await admin.unsafe(`ALTER ROLE "${role}" VALID UNTIL 'infinity'`);
      const service = await openService(config, { log: () => {} });
      await service.close();
    } finally {
      await database.drop();
      await admin.unsafe(`DROP OWNED BY "${role}"; DROP ROLE "${role}"`);
    }
  },
});

Deno.test({
  name:
    "openService() says what to do when DATABASE_URL names a database the server does not have (renamed or dropped), in one line",
  ignore: !postgresAvailable,
  async fn() {
    const url = new URL(await postgresUrl());
    url.pathname = "/no_such_payments";
    const config = loadConfig({ ...base, DATABASE_URL: url.href });
    // Before: the server's words alone.
    await assert.rejects(openService(config, { log: () => {} }), (error) => {
      assert.ok(error instanceof ConfigError, String(error));
      assert.match(
        error.message,
        /^DATABASE_URL: cannot open PostgreSQL 127\.0\.0\.1:\d+\/no_such_payments, no TLS: database "no_such_payments" does not exist \(no database of that name on this server: correct the name in DATABASE_URL, or create it \(CREATE DATABASE\); one renamed or dropped since the service last ran is missing too\)$/,
      );
      return true;
    });
  },
});

Deno.test("loadConfig() names no '@' after a host where DATABASE_URL has no host, nor the database name's '@' where the '@' is past its path", () => {
  // No "://": the scheme is refused, not an '@' after a host it lacks.
  assert.match(
    refusal({ DATABASE_URL: "relayer:s3cret-pw@db.internal/payments" })
      .message,
    /: its scheme is "relayer:"$/,
  );
  // The '@' in a fragment or a query parameter's name, after a userinfo
  // that ended at its own '@': no database name holds it.
  for (
    const value of [
      "postgres://relayer:s3cret-pw@db.internal/payments#x@y",
      "postgres://relayer:s3cret-pw@db.internal/payments?a@b=1",
    ]
  ) {
    const { message } = refusal({ DATABASE_URL: value });
    assert.match(message, /: an '@' comes after its host: a raw '\/'/);
    assert.ok(!message.includes("%40"), message);
  }
});

Deno.test({
  name:
    "openService() connects to a database whose name holds an '@' written %40, as loadConfig() advises and the start line names it",
  ignore: !postgresAvailable,
  async fn() {
    const admin = await sharedClient();
    const name = `pay@${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
    await admin.unsafe(`CREATE DATABASE "${name}"`);
    try {
      const url = new URL(await postgresUrl());
      url.pathname = `/${name.replace("@", "%40")}`;
      const config = loadConfig({ ...base, DATABASE_URL: url.href });
      assert.match(config.database!.description, new RegExp(`/${name},`));
      const service = await openService(config, { log: () => {} });
      try {
        await service.store.createIntent({ id: "pi_1", state: "authorized" });
        const [row] = await admin.unsafe(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = '${name}'`,
        );
        assert.ok(row!.n >= 1, `no session on ${name}`);
      } finally {
        await service.close();
      }
    } finally {
      await admin.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    }
  },
});

Deno.test({
  name:
    "openService() starts with any databaseWaitMs a timer takes (up to 2147483647 ms, or a fraction), its migration bounded past it",
  ignore: !postgresAvailable,
  async fn() {
    const database = await freshDatabase();
    try {
      const config = loadConfig({ ...base, DATABASE_URL: database.url });
      for (const databaseWaitMs of [2_147_483_647, 2_147_483_000, 20_000.5]) {
        const service = await openService(config, {
          log: () => {},
          databaseWaitMs,
        });
        await service.close();
      }
    } finally {
      await database.drop();
    }
  },
});

Deno.test({
  name:
    "openService() says a DATABASE_URL's target_session_attrs ended each connection, and what to look at, where a server that does not fit it (sessions read-only, for read-write) is up: not that the connection was lost and to start again once the database is up",
  ignore: !postgresAvailable,
  fn: async () => {
    const database = await readOnlyDatabase();
    const url = new URL(database.url);
    url.search = "?target_session_attrs=read-write";
    const lines: string[] = [];
    try {
      // The start's 4 tries, 0.25, 0.5 and 1 s apart: 1.75 s of waits.
      await assert.rejects(
        openService(loadConfig({ ...base, DATABASE_URL: url.href }), {
          log: (line) => lines.push(line),
        }),
        (error) => {
          assert.ok(error instanceof ConfigError, String(error));
          assert.match(
            error.message,
            /^DATABASE_URL: cannot open PostgreSQL 127\.0\.0\.1:\d+\/\S+, no TLS: write CONNECTION_DESTROYED 127\.0\.0\.1:\d+ \(the client ended each connection at its start, at each of 4 tries, as DATABASE_URL's target_session_attrs=read-write asks of a server that does not fit it: for primary or read-write, a hot standby \(an old primary after a failover; SELECT pg_is_in_recovery\(\)\), or sessions read-only for the role or database \(SHOW default_transaction_read_only\); point DATABASE_URL at the primary, or turn that setting off\)$/,
          );
          return true;
        },
      );
      assert.equal(lines.length, 3, lines.join("\n"));
    } finally {
      await database.drop();
    }
  },
});

Deno.test({
  name:
    "main.ts says the environment's PGTARGETSESSIONATTRS, which postgres.js reads where DATABASE_URL sets none, ended each connection, where a server that does not fit it is up: not that the connection was lost and to start again once the database is up",
  ignore: !postgresAvailable,
  fn: async () => {
    const database = await readOnlyDatabase();
    // In a process of its own: the environment is this run's, every other
    // file's too (tests/env_shared_test.ts).
    const dir = await Deno.makeTempDir({ prefix: "relayer-pgattrs-" });
    const service = startMain({
      ...base,
      DATABASE_URL: database.url,
      PGTARGETSESSIONATTRS: "read-write",
    }, { writeDir: dir });
    try {
      // The start's 4 tries, 0.25, 0.5 and 1 s apart: 1.75 s of waits.
      const origin = await service.base();
      assert.equal(origin, null, "main.ts listened, where it should refuse");
      const { code, stderr } = await service.ended();
      assert.equal(code, 1, stderr);
      assert.match(
        stderr,
        / \(the client ended each connection at its start, at each of 4 tries, as PGTARGETSESSIONATTRS=read-write \(the environment's, which the client reads where DATABASE_URL sets no target_session_attrs\) asks of a server that does not fit it: .*; point DATABASE_URL at the primary, or turn that setting off, or unset PGTARGETSESSIONATTRS\)$/m,
      );
    } finally {
      service.kill();
      await service.ended().catch(() => {});
      await Deno.remove(dir, { recursive: true });
      await database.drop();
    }
  },
});

Deno.test({
  name:
    "main.ts says to name the user in DATABASE_URL where the URL names none and its process has no login name to send (USER unset, no --allow-sys), not the server's words alone",
  ignore: !postgresAvailable,
  fn: async () => {
    const database = await freshDatabase();
    // A URL without user or password, as a local PostgreSQL often takes:
    // postgres.js then sends PGUSER, else the OS user's name, which under
    // deno serve without --allow-sys it reads from USER alone. baseEnv()
    // sets neither, as a container or a systemd unit may not.
    const url = new URL(database.url);
    url.username = "";
    url.password = "";
    const dir = await Deno.makeTempDir({ prefix: "relayer-pguser-" });
    const service = startMain({ ...base, DATABASE_URL: url.href }, {
      writeDir: dir,
    });
    try {
      assert.equal(await service.base(), null, "main.ts listened");
      const { code, stderr } = await service.ended();
      assert.equal(code, 1, stderr);
      // Before: "…, no TLS: no PostgreSQL user name specified in startup
      // packet", with nothing to do.
      assert.match(
        stderr,
        /^relayer: cannot start: DATABASE_URL: cannot open PostgreSQL 127\.0\.0\.1:\d+\/\S+, no TLS: no PostgreSQL user name specified in startup packet \(DATABASE_URL names no user, and the client found none to send in its place \(PGUSER, else the login name in USER\): name the role in DATABASE_URL, postgres:\/\/user:password@host:5432\/dbname\)$/m,
      );
    } finally {
      service.kill();
      await service.ended().catch(() => {});
      await Deno.remove(dir, { recursive: true });
      await database.drop();
    }
  },
});

Deno.test({
  name:
    "openService() on a server whose words are German (lc_messages) says what to do for a refused password, a missing database and a role's exhausted connection limit, by the server's SQLSTATE, as in English",
  ignore: !postgresAvailable,
  async fn() {
    const server = await startPostgres({
      settings: { lc_messages: "C.UTF-8" },
      env: { LANGUAGE: "de" },
    });
    try {
      await server.psql(
        "CREATE ROLE svc LOGIN PASSWORD 'svc-pw' CONNECTION LIMIT 0",
      );
      /** openService()'s refusal of `url`, its server address elided. */
      const refusal = async (url: URL) => {
        const config = loadConfig({ ...base, DATABASE_URL: url.href });
        const error = await openService(config, { log: () => {} }).then(
          () => assert.fail("it started"),
          (error: unknown) => error,
        );
        assert.ok(error instanceof ConfigError, String(error));
        return error.message.replace(/PostgreSQL \S+, [^:]+:/, "PostgreSQL …:");
      };
      const wrong = new URL(server.url);
      wrong.password = "not-it";
      // Before: the server's words alone.
      assert.equal(
        await refusal(wrong),
        `DATABASE_URL: cannot open PostgreSQL …: Passwort-Authentifizierung für Benutzer »postgres« fehlgeschlagen (the server refused this user and password: check them in DATABASE_URL, and that the role's password has not expired (SELECT rolvaliduntil FROM pg_roles; renew it with ALTER ROLE … VALID UNTIL), then try again)`,
      );
      const missing = new URL(server.url);
      missing.pathname = "/no_such_payments";
      assert.match(
        await refusal(missing),
        /^DATABASE_URL: cannot open PostgreSQL …: Datenbank »no_such_payments« existiert nicht \(no database of that name on this server: correct the name in DATABASE_URL, or create it \(CREATE DATABASE\); /,
      );
      const limited = new URL(server.url);
      limited.username = "svc";
      limited.password = "svc-pw";
      assert.match(
        await refusal(limited),
        /: zu viele Verbindungen von Rolle »svc« \(the server has no connection slot left for this role: /,
      );
    } finally {
      await server.stop();
    }
  },
});
