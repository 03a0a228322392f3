/**
 * How PostgresStore tells a lost connection from a statement's failure.
 *
 * @module
 */

/**
 * Whether `error` is the connection's own end, not a statement's failure:
 * the server's `FATAL` (a terminated backend, a shutdown, an idle
 * transaction timed out), postgres.js's `CONNECTION_*` and
 * `CONNECT_TIMEOUT`, or the socket's and TLS's own errors (`ECONNRESET`,
 * `EPIPE`, `ETIMEDOUT`, `EHOSTUNREACH`, `ERR_…`).
 */
export function connectionLost(error: unknown): boolean {
  const { code, severity } = (error ?? {}) as {
    code?: unknown;
    severity?: unknown;
  };
  // The server's errors carry a SQLSTATE and a severity; a statement's own
  // failure is severity ERROR, and the connection lives on.
  if (severity === "FATAL" || severity === "PANIC") return true;
  if (severity !== undefined) return false;
  // postgres.js's CONNECTION_* and CONNECT_TIMEOUT, and the socket's own
  // (ECONNRESET, EPIPE, ETIMEDOUT, EHOSTUNREACH, …) and TLS's (ERR_…).
  return typeof code === "string" && /^(CONNECT|E[A-Z]{3,}$|ERR_)/.test(code);
}

/**
 * Whether `reason` is postgres.js's own array-types query on a new
 * connection (with `fetch_types`, its default) failing as the connection
 * ended. postgres.js 3.4.9 drops that query's promise, so the failure is
 * no one's rejection (porsager/postgres#1192, #1223); the connection opens
 * again for the query that asked for it. A protocol violation (08P01)
 * counts too: PgBouncer answers so, then closes the client, while its
 * logins to the server fail ("server login has been failing, try again
 * later (server_login_retry)"), with no severity postgres.js reads. So
 * does that query cancelled (57014): a `statement_timeout` of the role or
 * the database shorter than it, or `pg_cancel_backend`; and refused by a
 * hot standby whose database defaults to SERIALIZABLE (0A000, see
 * {@linkcode serializableOnStandby}), which the query that opened the
 * connection meets too, and says. The connection
 * lives on and serves the query that opened it (the store reads no array
 * type); untaken, the rejection ended the process on every connection
 * the pool opened while such a timeout held.
 */
export function typeFetchLost(reason: unknown): boolean {
  const query = (reason as { query?: unknown } | null)?.query;
  const code = (reason as { code?: unknown } | null)?.code;
  return typeof query === "string" &&
    /^\s*select b\.oid, b\.typarray\s+from pg_catalog\.pg_type a\s/.test(
      query,
    ) &&
    (connectionLost(reason) || code === "08P01" || code === "57014" ||
      serializableOnStandby(reason));
}

/**
 * Whether `error` is a hot standby's refusal of a transaction at
 * SERIALIZABLE (0A000, "cannot use serializable mode in a hot standby"):
 * met by every statement outside an explicit transaction where the
 * database or the role defaults to it (`ALTER DATABASE … SET
 * default_transaction_isolation = 'serializable'` on the primary, which
 * the standby replays). The store's reads and postgres.js's type query run
 * so; the store's writes name their level and meet 25006 (read-only).
 * The server's hint is to lower the level; on a standby the cure is the
 * primary. Told by the server's routine too, which no `lc_messages`
 * translates (a German server says "kann serialisierbaren Modus nicht in
 * einem Hot Standby verwenden").
 */
export function serializableOnStandby(error: unknown): boolean {
  const { code, message, routine } = (error ?? {}) as {
    code?: unknown;
    message?: unknown;
    routine?: unknown;
  };
  return code === "0A000" &&
    (routine === "GetSerializableTransactionSnapshot" ||
      /serializable mode in a hot standby/.test(String(message)));
}

/**
 * Whether `error` is the server's goodbye to a session (severity `FATAL`,
 * SQLSTATE class 57: a terminated backend, a shutdown, a server starting
 * up or shutting down, an idle session timed out; or 25P03, an idle
 * transaction timed out), which postgres.js 3.4.9 hands only to a request
 * it has not sent. A statement it sent on a connection the server ends
 * fails with the close (`CONNECTION_CLOSED`, or the socket's error), never
 * with the goodbye: that is kept, and rejects the request that opens the
 * connection again, once the new session is open and before the request
 * is sent on it. A connection refused at its start (57P03) fails its
 * request unsent too. Such a request can be made again.
 */
export function goodbyeBeforeSent(error: unknown): boolean {
  const { code, severity } = (error ?? {}) as {
    code?: unknown;
    severity?: unknown;
  };
  return severity === "FATAL" && typeof code === "string" &&
    (code.startsWith("57") || code === "25P03");
}
