/**
 * PostgresStore marks every statement of its writes (`WRITE_MARK`), which
 * the tables' guard refuses outside the write's transaction: the store
 * contract runs on a client that records each statement's text as
 * postgres.js builds it, and each statement that writes a table of the
 * store, and each one sent between a write's `BEGIN` (the query that
 * sets `relayer.in_write`) and its `COMMIT`, begins with the mark. Each
 * of the store's write methods ran, and sent marked statements: a method
 * that wrote around `#transaction`'s commit would show here unmarked. The
 * contract runs twice: on a client that fetches types (the store's writes
 * go as one flight) and on one made with `fetch_types: false` (they go
 * through `sql.begin`).
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import { PostgresStore } from "../../store/postgres.ts";
import type { Store } from "../../store/store.ts";
import { IN_WRITE, WRITE_MARK } from "../../store/_postgres_schema.ts";
import {
  freshSchema,
  postgresAvailable,
  postgresUrl,
  TABLES,
} from "../_postgres.ts";
import { storeContract } from "./_contract.ts";

/** The store's methods that write, each of which the contract calls. */
const WRITES = [
  "createIntent",
  "transition",
  "beginBroadcast",
  "recordBroadcast",
  "recordHold",
  "voidHold",
  "captureHold",
  "admit",
  "putDeadLetter",
  "releaseLease",
  "redrive",
] as const;

/**
 * The store's two ways to write: one flight of statements, or `sql.begin`
 * (a client made with `fetch_types: false`).
 */
const PATHS = ["flight", "sql.begin"] as const;
type Path = typeof PATHS[number];

/** A statement that writes a table (not a read's `FOR UPDATE`). */
const WRITING = /\b(INSERT\s+INTO|UPDATE\s+"[^"]+"\."|DELETE\s+FROM)\s/i;

Deno.test({
  name:
    "PostgresStore: every statement of every write (the store contract's) begins with the mark the tables' guard looks for",
  ignore: !postgresAvailable,
  async fn(t) {
    const sent: {
      path: Path;
      connection: number;
      text: string;
      during: string[];
    }[] = [];
    const running = new Map<string, number>();
    let recording = false;
    const url = await postgresUrl();
    /** A client whose statements are recorded as `path`'s. */
    const client = (path: Path) =>
      postgres(url, {
        max: 4,
        onnotice: () => {},
        max_lifetime: null,
        fetch_types: path === "flight",
        debug: (connection, text) => {
          if (!recording) return;
          sent.push({
            path,
            connection,
            text,
            during: [...running].filter(([, n]) => n > 0).map(([m]) => m),
          });
        },
      });
    const clients = {
      flight: client("flight"),
      "sql.begin": client("sql.begin"),
    };
    const schemas: string[] = [];
    /** The store, each of whose write methods says when it runs. */
    const watched = (store: PostgresStore): Store =>
      new Proxy(store, {
        get(target, key) {
          const value = Reflect.get(target, key, target);
          if (
            typeof value !== "function" ||
            !(WRITES as readonly (string | symbol)[]).includes(key)
          ) {
            return typeof value === "function" ? value.bind(target) : value;
          }
          const name = String(key);
          return async (...args: unknown[]) => {
            running.set(name, (running.get(name) ?? 0) + 1);
            try {
              return await value.apply(target, args);
            } finally {
              running.set(name, running.get(name)! - 1);
            }
          };
        },
      }) as unknown as Store;
    const cases: {
      name: string;
      fn: (t: Deno.TestContext) => Promise<void>;
    }[] = [];
    // Migrated schemas no open store uses, emptied and renamed when taken
    // again (a name new to the process sweeps as a fresh schema does): a
    // migration each case cost the most.
    const idle: string[] = [];
    for (const path of PATHS) {
      const sql = clients[path];
      storeContract(`PostgresStore (${path})`, async () => {
        recording = false;
        const used = idle.pop();
        const schema = freshSchema();
        schemas.push(schema);
        if (used !== undefined) {
          await sql.unsafe(
            [
              `ALTER SCHEMA "${used}" RENAME TO "${schema}";`,
              ...TABLES.map((table) => `DELETE FROM "${schema}".${table};`),
            ].join(" "),
          );
        }
        const store = new PostgresStore(sql, { schema });
        await store.migrate();
        recording = true;
        return { store: watched(store), close: () => void idle.push(schema) };
      }, {
        test: ({ name, ignore }, fn) => {
          if (!ignore) cases.push({ name, fn: fn as typeof cases[0]["fn"] });
        },
      });
    }
    try {
      for (const { name, fn } of cases) await t.step(name, fn);
    } finally {
      recording = false;
      for (const schema of schemas) {
        await clients.flight.unsafe(
          `DROP SCHEMA IF EXISTS "${schema}" CASCADE`,
        );
      }
      await Promise.all(PATHS.map((path) => clients[path].end()));
    }

    for (const path of PATHS) {
      const of = sent.filter((statement) => statement.path === path);
      // Every statement that writes a table of the store is marked.
      const unmarked = of.filter(({ text }) =>
        WRITING.test(text) && !text.startsWith(WRITE_MARK)
      );
      assert.deepEqual(unmarked.map(({ text }) => text), [], path);
      // Every statement inside a write's flight (after the query that sets
      // relayer.in_write, up to its COMMIT, or COMMIT AND CHAIN) is marked.
      const open = new Set<number>();
      const inside: string[] = [];
      for (const { connection, text } of of) {
        if (text.includes(IN_WRITE)) {
          open.add(connection);
        } else if (/^COMMIT\b/.test(text)) {
          open.delete(connection);
        } else if (
          open.has(connection) && text !== "SET CONSTRAINTS ALL IMMEDIATE"
        ) {
          inside.push(text);
        }
      }
      assert.ok(inside.length > 0, path);
      assert.deepEqual(
        inside.filter((text) => !text.startsWith(WRITE_MARK)),
        [],
        path,
      );
      // Each write method ran, and sent marked statements.
      for (const method of WRITES) {
        assert.ok(
          of.some(({ text, during }) =>
            during.includes(method) && text.startsWith(WRITE_MARK)
          ),
          `${path}: ${method} sent no marked statement`,
        );
      }
    }
  },
});
