/**
 * `damagedFile`, the wording of a Deno KV file found damaged while the
 * store runs, for both of SQLite's words for it: "database disk image is
 * malformed" (its pages overwritten, SQLITE_CORRUPT) and "file is not a
 * database" (its header overwritten, SQLITE_NOTADB). Either is worded
 * for an operator (keep the file, restore it), a write's outcome said to
 * be unknown, and SQLite's own error kept as its cause; any other error
 * is left as it is.
 *
 * @module
 */

import assert from "node:assert/strict";
import { damagedFile } from "../../store/_damaged_file.ts";
import { isNotWritten } from "../../store/_not_written.ts";

const WHAT_TO_DO =
  / Stop the service, keep the file and its -wal as they are, and restore the store from a backup or recover its rows \(sqlite3 <the file> \.recover\)\.$/;

for (
  const words of [
    "database disk image is malformed",
    "file is not a database",
  ]
) {
  Deno.test(`damagedFile: SQLite's "${words}" is worded for an operator, a read's and a write's apart, SQLite's error its cause`, () => {
    const sqlite = new TypeError(words);
    const read = damagedFile(sqlite, "read");
    assert.ok(read);
    assert.match(
      read.message,
      new RegExp(
        `^Cannot read Deno KV as its SQLite file is damaged \\(SQLite: "${words}"\\): Stop`,
      ),
    );
    assert.match(read.message, WHAT_TO_DO);
    assert.equal(read.cause, sqlite);
    const write = damagedFile(sqlite, "write");
    assert.ok(write);
    assert.match(
      write.message,
      new RegExp(
        `^Cannot write to Deno KV as its SQLite file is damaged \\(SQLite: "${words}"\\): the write may have landed, in whole or in part\\. Stop`,
      ),
    );
    assert.match(write.message, WHAT_TO_DO);
    assert.equal(write.cause, sqlite);
    assert.equal(isNotWritten(write), false);
  });
}

Deno.test("damagedFile: any other error, or SQLite's words inside another's, is not a damaged file", () => {
  for (
    const error of [
      new TypeError("database is locked"),
      new TypeError("database or disk is full"),
      new Error("the file is not a database we know"),
      "file is not a database",
      undefined,
    ]
  ) {
    assert.equal(damagedFile(error, "read"), undefined, String(error));
    assert.equal(damagedFile(error, "write"), undefined, String(error));
  }
});
