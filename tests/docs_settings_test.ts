/**
 * The settings table of docs/routes.md ("Deploy to Deno Deploy with
 * QStash"), where an operator looks a setting up, held to `loadConfig`: the
 * defaults it states, the bounds it gives, what it says full jitter needs
 * and what the local queue is refused beside. Each claim is read from the
 * table's text, so a table that drifts from the code fails here rather than
 * at an operator's start. And where routes.md sends the reader on (the
 * queues' settings to queues.md, every setting to `webhook/config.ts`'s
 * table), the settings are there.
 *
 * @module
 */

import assert from "node:assert/strict";
import { type Config, loadConfig } from "../webhook/config.ts";
import { parseDuration } from "../policy/parse_duration.ts";
import {
  serviceSettings,
  SETTINGS,
  unreadSettingLines,
} from "../webhook/_settings.ts";

const ROOT = new URL("../", import.meta.url);

const base = {
  SENDER_URL: "http://127.0.0.1:9000",
  WEBHOOK_SECRET: "a-secret-of-16-chars",
};

/** The rows of the settings table: each row's first cell and its meaning. */
async function settingsTable(): Promise<Map<string, string>> {
  const doc = await Deno.readTextFile(new URL("docs/routes.md", ROOT));
  const rows = new Map<string, string>();
  for (const line of doc.split("\n")) {
    const cells = /^\| (`[A-Z_]+`.*?) +\| (.*?) +\|$/.exec(line);
    if (cells) rows.set(cells[1]!, cells[2]!);
  }
  assert.ok(rows.size > 10, "docs/routes.md has lost its settings table");
  return rows;
}

/** The meaning of the row that names `setting`. */
function row(rows: Map<string, string>, setting: string): string {
  for (const [names, meaning] of rows) {
    if (names.includes(`\`${setting}\``)) return meaning;
  }
  throw new Error(`docs/routes.md's settings table has no row for ${setting}`);
}

function refused(env: Record<string, string>): boolean {
  try {
    loadConfig({ ...base, ...env });
    return false;
  } catch {
    return true;
  }
}

Deno.test("docs/routes.md's settings table states the defaults loadConfig takes", async () => {
  const rows = await settingsTable();
  const defaults = loadConfig(base);
  const read: Record<string, (config: Config) => unknown> = {
    LEASE: (c) => c.leaseMs,
    CLOCK_SKEW: (c) => c.clockSkewMs,
    BODY_TIMEOUT: (c) => c.bodyTimeoutMs,
    SENDER_TIMEOUT: (c) => c.sender.timeoutMs,
  };
  for (const [setting, field] of Object.entries(read)) {
    const stated = /\(default `([^`]+)`/.exec(row(rows, setting));
    assert.ok(stated, `the ${setting} row states no default`);
    assert.equal(field(defaults), parseDuration(stated[1]!), setting);
  }
  const kv = /\(default `([^`]+)`/.exec(row(rows, "KV_PATH"));
  assert.deepEqual(defaults.kv, { path: kv?.[1] });
  const body = /the body limit \((\d+), at least (\d+)\)/.exec(
    row(rows, "MAX_BODY_BYTES"),
  );
  assert.ok(body, "the MAX_BODY_BYTES row states no limit");
  assert.equal(defaults.maxBodyBytes, Number(body[1]));
  assert.equal(refused({ MAX_BODY_BYTES: body[2]! }), false);
  assert.equal(refused({ MAX_BODY_BYTES: String(Number(body[2]) - 1) }), true);
});

Deno.test("docs/routes.md's settings table states the policy's defaults, each in the order of the settings it names", async () => {
  const rows = await settingsTable();
  const names = [...rows.keys()].find((k) => k.includes("`MAX_DELIVERIES`"));
  assert.ok(names, "the settings table has no row for the policy");
  const settings = [...names.matchAll(/`([A-Z_]+)`/g)].map((m) => m[1]!);
  const stated = /\(defaults ((?:`[^`]+`(?:, )?)+)/.exec(rows.get(names)!);
  assert.ok(stated, "the policy row states no defaults");
  const values = [...stated[1]!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
  assert.equal(values.length, settings.length, stated[1]);
  const { policy } = loadConfig(base);
  const read: Record<string, (text: string) => unknown> = {
    MAX_DELIVERIES: Number,
    BASE: parseDuration,
    CAP: parseDuration,
    JITTER: (text) => text,
    STUCK_AFTER: parseDuration,
  };
  const field: Record<string, unknown> = {
    MAX_DELIVERIES: policy.maxDeliveries,
    BASE: policy.baseMs,
    CAP: policy.capMs,
    JITTER: policy.jitter,
    STUCK_AFTER: policy.stuckAfterMs,
  };
  settings.forEach((setting, i) => {
    assert.equal(read[setting]!(values[i]!), field[setting], setting);
  });
});

Deno.test("docs/routes.md's settings table gives the bounds loadConfig holds", async () => {
  const rows = await settingsTable();
  for (const setting of ["SENDER_TIMEOUT", "BODY_TIMEOUT"]) {
    const most = /at most `(\d+)` ms/.exec(row(rows, setting));
    assert.ok(most, `the ${setting} row states no bound`);
    const lease = String(2 * Number(most[1]));
    assert.equal(refused({ [setting]: most[1]!, LEASE: lease }), false);
    assert.equal(
      refused({ [setting]: String(Number(most[1]) + 1), LEASE: lease }),
      true,
      setting,
    );
  }
  const skew = /at most `([^`]+)`/.exec(row(rows, "CLOCK_SKEW"));
  assert.ok(skew, "the CLOCK_SKEW row states no bound");
  // A policy whose window outlasts STUCK_AFTER and the largest skew.
  const long = { MAX_DELIVERIES: "30" };
  const most = parseDuration(skew[1]!);
  assert.equal(refused({ ...long, CLOCK_SKEW: String(most) }), false);
  assert.equal(refused({ ...long, CLOCK_SKEW: String(most + 1) }), true);
});

Deno.test("docs/routes.md's settings table names every setting JITTER=full needs at zero, and loadConfig takes it with them", async () => {
  const meaning = row(await settingsTable(), "JITTER");
  const clause = /`JITTER=full` only with ([^;)]+)/.exec(meaning);
  assert.ok(clause, "the policy row no longer says when JITTER=full starts");
  const zeros = Object.fromEntries(
    [...clause[1]!.matchAll(/`([A-Z_]+)=0`/g)].map((m) => [m[1]!, "0"]),
  );
  assert.ok(Object.keys(zeros).length > 0, clause[1]);
  assert.equal(
    refused({ JITTER: "full", ...zeros }),
    false,
    `JITTER=full with ${clause[1]} is refused`,
  );
  // Each one named is needed: without it, the start is refused.
  for (const name of Object.keys(zeros)) {
    const { [name]: _, ...others } = zeros;
    assert.equal(refused({ JITTER: "full", ...others }), true, name);
  }
});

Deno.test("docs/routes.md's KV_QUEUE row names every setting, and the platform, loadConfig refuses the local queue beside", async () => {
  const meaning = row(await settingsTable(), "KV_QUEUE");
  const qstash = {
    QSTASH_CURRENT_SIGNING_KEY: "sig_current_0123456789",
    QSTASH_NEXT_SIGNING_KEY: "sig_next_0123456789",
    PUBLIC_URL: "https://relayer.example.com",
  };
  const beside: Record<string, Record<string, string>> = {
    KV_URL: { KV_URL: "https://kv.example.test/db" },
    DATABASE_URL: { DATABASE_URL: "postgres://u:p@127.0.0.1:5432/db" },
    QSTASH_TOKEN: { ...qstash, QSTASH_TOKEN: "qstash-token-0123456789" },
    "Deno Deploy": {
      DENO_DEPLOYMENT_ID: "deployment",
      DENO_KV_DEFAULT_PATH: "https://kv.example.test/databases/db/connect",
    },
  };
  for (const [name, env] of Object.entries(beside)) {
    assert.equal(refused(env), false, `${name} alone is refused`);
    let setting: string | undefined;
    try {
      loadConfig({ ...base, ...env, KV_QUEUE: "1" });
    } catch (error) {
      setting = (error as { setting?: string }).setting;
    }
    assert.equal(setting, "KV_QUEUE", `KV_QUEUE=1 beside ${name}`);
    const named = name.includes(" ") ? name : `\`${name}\``;
    assert.ok(
      meaning.includes(named),
      `the KV_QUEUE row does not say it is refused beside ${named}`,
    );
  }
});

Deno.test("every setting the service reads is in webhook/config.ts's table, as docs/routes.md says", async () => {
  const doc = await Deno.readTextFile(new URL("docs/routes.md", ROOT));
  assert.match(doc, /every setting is listed in `webhook\/config\.ts`/);
  const source = await Deno.readTextFile(new URL("webhook/config.ts", ROOT));
  const table = source.slice(0, source.indexOf("@module")).split("\n")
    .filter((line) => line.startsWith(" * | `")).join("\n");
  assert.ok(table.length > 0, "webhook/config.ts has lost its table");
  const missing = [...SETTINGS].filter((name) =>
    !table.includes(`\`${name}\``)
  );
  assert.deepEqual(missing, []);
});

Deno.test("the queues' settings docs/routes.md sends a reader to queues.md for are each there, and DATABASE_URL in postgres.md", async () => {
  const doc = await Deno.readTextFile(new URL("docs/routes.md", ROOT));
  const sentence =
    /The queues' own settings \(([^)]+)\) are in \[queues\.md\]\(queues\.md\), and `([A-Z_]+)`\s+in \[postgres\.md\]\(postgres\.md\)/
      .exec(doc);
  assert.ok(sentence, "docs/routes.md no longer sends the reader to queues.md");
  const names = [...sentence[1]!.matchAll(/`([A-Z_]+)`/g)].map((m) => m[1]!);
  assert.ok(names.length > 5, sentence[1]);
  const queues = await Deno.readTextFile(new URL("docs/queues.md", ROOT));
  assert.deepEqual(names.filter((name) => !queues.includes(`\`${name}\``)), []);
  const postgres = await Deno.readTextFile(new URL("docs/postgres.md", ROOT));
  assert.ok(postgres.includes(`\`${sentence[2]}\``), sentence[2]);
});

Deno.test("docs/routes.md names every setting the start says nothing reads", async () => {
  const doc = (await Deno.readTextFile(new URL("docs/routes.md", ROOT)))
    .replace(/\s+/g, " ");
  const paragraph =
    /A setting nothing reads is said there too: (.*?)\. Kubernetes'/
      .exec(doc);
  assert.ok(
    paragraph,
    "docs/routes.md no longer says which settings go unread",
  );
  // Each setting alone beside the least a start needs: those it names.
  // postgres.js's TLS variables too, which the service overrides.
  const candidates = [...SETTINGS, "PGSSL", "PGSSLNEGOTIATION"];
  const named = candidates.filter((name) =>
    unreadSettingLines({ ...base, [name]: "set" }).some((line) =>
      line.startsWith(`relayer: ${name} is set, but`)
    )
  );
  assert.ok(named.length >= 10, named.join(" "));
  assert.deepEqual(
    named.filter((name) => !paragraph[1]!.includes(`\`${name}\``)),
    [],
  );
});

Deno.test("the Cloudflare Worker's settings docs/routes.md says the service never refuses are each left out of its start's check, and named with a Worker's refusal", async () => {
  const doc = (await Deno.readTextFile(new URL("docs/routes.md", ROOT)))
    .replace(/\s+/g, " ");
  const sentence =
    /the Cloudflare Worker's own settings, which the service never reads, as it consumes no Cloudflare queue, and never refuses: (.*?) \(one a Worker refuses, such as `CLOUDFLARE_MAX_RETRIES=3` under `MAX_DELIVERIES` 10, is named with the Worker's refusal, and the service starts/
      .exec(doc);
  assert.ok(
    sentence,
    "docs/routes.md no longer says the service never refuses the Worker's settings",
  );
  const names = [...sentence[1]!.matchAll(/`([A-Z_]+)`/g)].map((m) => m[1]!);
  assert.equal(names.length, 5, sentence[1]);
  for (const name of names) {
    // "set" is no value a Worker takes: refused by loadConfig, not by the
    // service's start, and the line gives the Worker's refusal.
    const env = { ...base, [name]: "set" };
    assert.throws(() => loadConfig(env), new RegExp(`^ConfigError: ${name} `));
    loadConfig(serviceSettings(env));
    assert.match(
      unreadSettingLines(env).join("\n"),
      new RegExp(
        `^relayer: ${name} is set, .*; a Worker given this value refuses to start: ${name} `,
      ),
    );
  }
  const example = { ...base, CLOUDFLARE_MAX_RETRIES: "3" };
  assert.throws(() => loadConfig(example), /CLOUDFLARE_MAX_RETRIES is 3/);
  loadConfig(serviceSettings(example));
});

/**
 * Whether `quote`, a line as the docs quote it (`…` for what they leave
 * out), is `line`: its parts between the `…`s each there, in order, the
 * first at its start.
 */
function quotes(quote: string, line: string): boolean {
  const parts = quote.split("…").map((part) => part.trim());
  let at = 0;
  for (const [i, part] of parts.entries()) {
    if (part === "") continue;
    const found = line.indexOf(part, at);
    if (found < 0 || (i === 0 && found !== 0)) return false;
    at = found + part.length;
  }
  return true;
}

Deno.test("the start's refusal docs/routes.md quotes is what the service says, with the default CLOCK_SKEW", async () => {
  const doc = (await Deno.readTextFile(new URL("docs/routes.md", ROOT)))
    .replace(/\s+/g, " ");
  const quoted =
    /The service refuses to start on a bad setting, with one line that names it: `(relayer: cannot start: The policy's rescue window is ([^ ]+) [^`]*)`/
      .exec(doc);
  assert.ok(quoted, "docs/routes.md no longer quotes a start's refusal");
  // The policy whose window the quote names: the fewest deliveries, the
  // other settings left to their defaults.
  let said: string | undefined;
  for (let n = 2; n <= 10 && said === undefined; n++) {
    try {
      loadConfig({ ...base, MAX_DELIVERIES: String(n) });
    } catch (error) {
      const line = `relayer: cannot start: ${(error as Error).message}`;
      if (line.includes(`rescue window is ${quoted[2]} `)) said = line;
    }
  }
  assert.ok(said, `no MAX_DELIVERIES gives a window of ${quoted[2]}`);
  assert.ok(quotes(quoted[1]!, said), `${quoted[1]}\n  is not\n${said}`);
});

Deno.test("docs/routes.md tells a Deno Deploy user to leave KV_PATH out, and quotes the start's refusal of it there", async () => {
  const deploy = {
    ...base,
    DENO_DEPLOYMENT_ID: "deployment",
    DENO_KV_DEFAULT_PATH: "https://kv.example.test/databases/db/connect",
  };
  assert.deepEqual(loadConfig(deploy).kv, { platform: true });
  const doc = (await Deno.readTextFile(new URL("docs/routes.md", ROOT)))
    .replace(/\s+/g, " ");
  assert.match(doc, /leave `KV_PATH` out of Deploy's variables/);
  const quoted = doc.match(
    /`(relayer: cannot start: KV_PATH is refused on Deno Deploy: [^`]*)`/,
  );
  assert.ok(quoted, "routes.md quotes no refusal of KV_PATH on Deploy");
  for (const path of [":memory:", "./data/relayer.kv"]) {
    let line = "";
    try {
      loadConfig({ ...deploy, KV_PATH: path });
    } catch (error) {
      line = `relayer: cannot start: ${(error as Error).message}`;
    }
    assert.ok(quotes(quoted[1]!, line), `${quoted[1]}\n  is not\n${line}`);
  }
});
