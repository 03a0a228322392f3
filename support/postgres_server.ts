/**
 * A throwaway PostgreSQL server for the tests, the crash test and the store
 * benchmark: a copy of a data dir `initdb` made once (see
 * {@linkcode startPostgres}) in a temp dir (as the `postgres` OS user when
 * run as root), listening on 127.0.0.1 at a free port, fsync off. Logins
 * over TCP take a password, checked with SCRAM-SHA-256 as managed servers
 * check it (a fresh random one per server, in its URL), so every client
 * that runs against it (Deno, Node, Bun, workerd) proves it can
 * authenticate.
 *
 * A watchdog process started with the server stops it (`pg_ctl stop -m
 * immediate`) and deletes its dir as soon as the process that started it
 * exits, however it exits (a failed assertion, Ctrl-C, SIGKILL): no test
 * run leaves a server behind.
 *
 * `deno test --parallel` runs every test file in one process, so
 * {@linkcode processPostgres} starts one server per run and the files
 * share it (a dir named after the process id is the lock; each file takes
 * its own schema).
 *
 * @module
 */

/** A running server. */
export interface PostgresServer {
  /** `postgres://postgres:<password>@127.0.0.1:<port>/postgres` (SCRAM-SHA-256). */
  readonly url: string;
  /** The `postgres` role's password. */
  readonly password: string;
  /** The TCP port on 127.0.0.1. */
  readonly port: number;
  /** The server's own dir (data, socket and log). */
  readonly dir: string;
}

/** A server this process started and may stop early. */
export interface OwnedPostgresServer extends PostgresServer {
  /** Stops the server and deletes its dir (the watchdog does it anyway at exit). */
  stop(): Promise<void>;
  /**
   * Stops the server and keeps its data (`pg_ctl stop -m <mode>`), as a
   * failover or maintenance does; {@linkcode OwnedPostgresServer.resume}
   * starts it again on the same port. `immediate` leaves crash recovery to
   * the next start.
   */
  halt(mode: "fast" | "immediate"): Promise<void>;
  /** Starts a halted server again, on the same port and data; waits until it accepts connections. */
  resume(): Promise<void>;
  /** Runs `query` as the superuser over the server's Unix socket (psql); returns its output. */
  psql(query: string): Promise<string>;
}

const WHERE = "/usr/lib/postgresql";

async function run(
  command: string,
  args: string[],
  env?: Readonly<Record<string, string>>,
): Promise<{ ok: boolean; out: string }> {
  try {
    const { success, stdout, stderr } = await new Deno.Command(command, {
      args,
      ...(env === undefined ? {} : { env: { ...env } }),
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder();
    return {
      ok: success,
      out: `${text.decode(stdout)}${text.decode(stderr)}`.trim(),
    };
  } catch (error) {
    return { ok: false, out: (error as Error).message };
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * Where `initdb`, `pg_ctl` and `postgres` are: `pg_config --bindir`, else
 * the newest `/usr/lib/postgresql/<major>/bin` (Debian keeps the server
 * there, off the PATH); `null` when there is no server.
 */
export async function postgresBinDir(): Promise<string | null> {
  const config = await run("pg_config", ["--bindir"]);
  const candidates = config.ok ? [config.out] : [];
  try {
    const majors = [];
    for await (const entry of Deno.readDir(WHERE)) {
      if (/^\d+$/.test(entry.name)) majors.push(Number(entry.name));
    }
    majors.sort((a, b) => b - a);
    candidates.push(...majors.map((major) => `${WHERE}/${major}/bin`));
  } catch {
    // No Debian layout.
  }
  for (const dir of candidates) {
    if (
      await exists(`${dir}/initdb`) && await exists(`${dir}/pg_ctl`) &&
      await exists(`${dir}/postgres`)
    ) return dir;
  }
  return null;
}

/** The uid of this process (`id -u`, not Deno.uid(): the tests run without --allow-sys). */
async function selfUid(): Promise<string> {
  return (await run("id", ["-u"])).out;
}

/** The uid and gid of the `postgres` OS user, when this process (`self`) is root. */
async function serverUser(
  self?: string,
): Promise<{ uid: number; gid: number } | null> {
  if ((self ?? await selfUid()) !== "0") return null;
  const uid = await run("id", ["-u", "postgres"]);
  const gid = await run("id", ["-g", "postgres"]);
  if (!uid.ok || !gid.ok) {
    throw new Error(
      "Cannot start PostgreSQL as root without a 'postgres' OS user (initdb refuses root): install Debian's postgresql package",
    );
  }
  return { uid: Number(uid.out), gid: Number(gid.out) };
}

/**
 * Starts a detached shell that runs `command` once this process has
 * exited, however it exits, or once `dir` is gone (it polls both every
 * half second). It ends with what it watches: each poll forks a `sleep`
 * (about 5 ms of CPU under load), and one left polling for a server
 * stopped early cost that twice a second until the run ended.
 */
async function watchdog(command: string, dir: string): Promise<void> {
  const script = `while kill -0 ${Deno.pid} 2>/dev/null && [ -e ${
    quote(dir)
  } ]; do sleep 0.5; done; ${command}`;
  await run("sh", [
    "-c",
    `setsid sh -c ${quote(script)} </dev/null >/dev/null 2>&1 &`,
  ]);
}

function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}

function quote(text: string): string {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

function randomHex(bytes: number): string {
  // Hex: nothing a URL or a file name must escape.
  return Array.from(
    crypto.getRandomValues(new Uint8Array(bytes)),
    (byte) => byte.toString(16).padStart(2, "0"),
  ).join("");
}

/** What every server's data dir is made with (besides `-D` and `--pwfile`). */
const INITDB_FLAGS = [
  "-U",
  "postgres",
  "--auth-local=trust",
  "--auth-host=scram-sha-256",
  "-E",
  "UTF8",
  "--locale=C",
  "--no-sync",
];

type As = (command: string, args: string[]) => Promise<{
  ok: boolean;
  out: string;
}>;

/**
 * The name of the template for `bin` run as `uid`: a digest of the flags,
 * the bin dir and its `postgres` binary's identity (an upgrade in place
 * replaces the file, so a new version never meets an old template).
 */
async function templateName(bin: string, uid: string): Promise<string> {
  const binary = await Deno.stat(`${bin}/postgres`);
  const digest = await crypto.subtle.digest(
    "SHA-256",
    new TextEncoder().encode(JSON.stringify([
      INITDB_FLAGS,
      bin,
      binary.ino,
      binary.size,
      binary.mtime?.getTime(),
      uid,
    ])),
  );
  return `relayer-pg-template-${
    Array.from(new Uint8Array(digest).slice(0, 8), (byte) =>
      byte.toString(16).padStart(2, "0")).join("")
  }`;
}

/**
 * Whether `path` is a whole template named `name` (its `ready` is written
 * last) owned by `owner`, who made it: the name is known, and in a temp
 * dir anyone may write another user could have put a data dir there whose
 * logins need no password.
 */
async function usableTemplate(
  path: string,
  name: string,
  owner: number,
): Promise<boolean> {
  const info = await Deno.stat(path).catch(() => null);
  if (info === null || info.uid !== owner) return false;
  const ready = await Deno.readTextFile(`${path}/ready`).catch(() => null);
  if (ready !== name) return false;
  for (const file of ["PG_VERSION", "global/pg_control", "postgresql.conf"]) {
    if (!await exists(`${path}/data/${file}`)) return false;
  }
  return true;
}

/** Moves `path` aside (atomically: no one copies it after), then deletes it. */
async function discard(path: string): Promise<void> {
  const aside = `${path}.${randomHex(4)}.discarded`;
  try {
    await Deno.rename(path, aside);
  } catch {
    return; // Gone already: another process discarded it.
  }
  await Deno.remove(aside, { recursive: true }).catch(() => {});
}

/**
 * The template for `bin` as `uid` under `root` (its data dir is `data`),
 * made by `initdb` if there is no whole one: in a dir of its own, renamed
 * into place once complete, so a template half made (a process killed in
 * `initdb`) is never seen, and of two processes making one at once the
 * first rename wins and the other takes it. One that fails its check is
 * discarded and made again.
 */
async function template(
  root: string,
  bin: string,
  uid: string,
  user: { uid: number; gid: number } | null,
  as: As,
): Promise<string> {
  const name = await templateName(bin, uid);
  const path = `${root}/${name}`;
  // The postgres OS user's when this process is root (it ran initdb).
  const owner = user?.uid ?? Number(uid);
  if (await usableTemplate(path, name, owner)) return path;
  const making = `${path}.${randomHex(4)}.tmp`;
  await Deno.mkdir(making);
  try {
    await Deno.chmod(making, 0o755);
    if (user !== null) await Deno.chown(making, user.uid, user.gid);
    // The template's own password is never known: each server gets its own.
    const pwfile = `${making}/password`;
    await Deno.writeTextFile(pwfile, `${randomHex(16)}\n`, { mode: 0o600 });
    if (user !== null) await Deno.chown(pwfile, user.uid, user.gid);
    const init = await as("initdb", [
      "-D",
      `${making}/data`,
      `--pwfile=${pwfile}`,
      ...INITDB_FLAGS,
    ]);
    if (!init.ok) throw new Error(`initdb failed:\n${init.out}`);
    await Deno.remove(pwfile);
    await Deno.writeTextFile(`${making}/ready`, name);
    if (await exists(path) && !await usableTemplate(path, name, owner)) {
      await discard(path);
    }
    try {
      await Deno.rename(making, path);
    } catch (error) {
      // Another process's rename came first: take its template.
      if (!await usableTemplate(path, name, owner)) throw error;
    }
  } finally {
    await Deno.remove(making, { recursive: true }).catch(() => {});
  }
  return path;
}

/**
 * Starts a server in a new temp dir, or in `dir` (an existing empty dir,
 * which the server then owns and deletes).
 *
 * Its data dir is a copy of a template `initdb` made once per server
 * binaries and OS user, kept under `templates` (`initdb` costs about
 * 1 s of CPU, a copy under a tenth of that). Keeping it between runs is safe:
 * it is only ever copied, never started; its name is a digest of the
 * `initdb` flags, the binaries (path, inode, size and time of `postgres`)
 * and the OS user, so other binaries or flags make their own; and it
 * holds no secret (its superuser's password was random and never kept:
 * each server sets its own after it starts). A template that fails its
 * check is made again, and a server its copy does not start (or whose
 * copy will not take its password) is made by `initdb` in place, the
 * template dropped.
 *
 * @param options `dir`: where to put it; `bin`: the server binaries; `tls`:
 * a certificate and key to serve TLS with.
 * @returns The running server.
 * @throws {Error} If there are no server binaries or the server does not start.
 */
export async function startPostgres(
  options: {
    dir?: string;
    bin?: string;
    /** Serve TLS too, with this certificate and key (PEM). */
    tls?: { cert: string; key: string };
    /**
     * Keep `synchronous_commit` on, so a commit the server acknowledged
     * survives its crash (`pg_ctl stop -m immediate`); off by default, for
     * speed, where the server is never crashed.
     */
    durable?: boolean;
    /**
     * Server settings given after the defaults, which they override
     * (`{ max_connections: "8" }`).
     */
    settings?: Readonly<Record<string, string>>;
    /**
     * Environment variables for the server's process, beside this
     * process's own (`{ LANGUAGE: "de" }` with the setting `lc_messages`
     * `C.UTF-8`: a server whose words are German, as one made on a German
     * system is).
     */
    env?: Readonly<Record<string, string>>;
    /**
     * Where the template data dirs are kept.
     *
     * @default {the OS temp dir}
     */
    templates?: string;
  } = {},
): Promise<OwnedPostgresServer> {
  const bin = options.bin ?? await postgresBinDir();
  if (bin === null) {
    throw new Error(
      "Cannot start PostgreSQL: no server binaries (initdb) under `pg_config --bindir` or /usr/lib/postgresql/*/bin; install Debian's postgresql package",
    );
  }
  const dir = options.dir ?? await Deno.makeTempDir({ prefix: "relayer-pg-" });
  const uid = await selfUid();
  const user = await serverUser(uid);
  const as = (
    command: string,
    args: string[],
    env?: Readonly<Record<string, string>>,
  ) =>
    user === null ? run(`${bin}/${command}`, args, env) : run(
      "runuser",
      ["-u", "postgres", "--", `${bin}/${command}`, ...args],
      env,
    );
  /** psql as the superuser, over the server's Unix socket (trusted). */
  const psql = (port: number, args: string[]) =>
    as("psql", [
      "-h",
      dir,
      "-p",
      String(port),
      "-U",
      "postgres",
      "-d",
      "postgres",
      "-XAtq",
      ...args,
    ]);
  const data = `${dir}/data`;
  const log = `${dir}/server.log`;
  await Deno.chmod(dir, 0o755);
  if (user !== null) await Deno.chown(dir, user.uid, user.gid);

  // The watchdog first: whatever happens from here on, the dir goes when we do.
  const stop = `${quote(`${bin}/pg_ctl`)} -D ${
    quote(data)
  } -m immediate -w stop`;
  await watchdog(
    `${
      user === null ? stop : `runuser -u postgres -- ${stop}`
    } >/dev/null 2>&1; rm -rf ${quote(dir)}`,
    dir,
  );

  const password = randomHex(16);
  /** A file for the postgres OS user alone: it holds the password. */
  const secret = async (name: string, text: string) => {
    const file = `${dir}/${name}`;
    await Deno.writeTextFile(file, text, { mode: 0o600 });
    if (user !== null) await Deno.chown(file, user.uid, user.gid);
    return file;
  };
  const initdb = async () => {
    const pwfile = await secret("password", `${password}\n`);
    const init = await as("initdb", [
      "-D",
      data,
      `--pwfile=${pwfile}`,
      ...INITDB_FLAGS,
    ]);
    await Deno.remove(pwfile).catch(() => {});
    if (!init.ok) throw new Error(`initdb failed:\n${init.out}`);
  };
  // `cp -a` keeps the owner (the postgres OS user) and the data dir's 0700.
  const source = await template(
    options.templates ?? await tempRoot(),
    bin,
    uid,
    user,
    as,
  );
  let copied = (await run("cp", ["-a", `${source}/data`, data])).ok;
  if (!copied) {
    // A template deleted under the copy: this server's own initdb instead.
    await Deno.remove(data, { recursive: true }).catch(() => {});
    await initdb();
  }
  const tls: string[] = [];
  if (options.tls) {
    // The server reads its key only if no one else may.
    for (
      const [name, text, mode] of [
        ["server.crt", options.tls.cert, 0o644],
        ["server.key", options.tls.key, 0o600],
      ] as const
    ) {
      const file = `${dir}/${name}`;
      await Deno.writeTextFile(file, text, { mode });
      await Deno.chmod(file, mode);
      if (user !== null) await Deno.chown(file, user.uid, user.gid);
    }
    tls.push(
      "-c ssl=on",
      `-c ssl_cert_file=${dir}/server.crt`,
      `-c ssl_key_file=${dir}/server.key`,
    );
  }

  let lastError = "";
  /** This server's data dir made by initdb, not copied, and the template dropped. */
  const remake = async () => {
    copied = false;
    await discard(source);
    await Deno.remove(data, { recursive: true }).catch(() => {});
    await initdb();
  };
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = freePort();
    const start = () =>
      as("pg_ctl", [
        "-D",
        data,
        "-l",
        log,
        "-w",
        "-t",
        "60",
        "-o",
        [
          `-p ${port}`,
          "-h 127.0.0.1",
          `-k ${dir}`,
          "-F", // fsync off: the tests kill the service, never the database
          "-c max_connections=300",
          "-c shared_buffers=32MB",
          `-c synchronous_commit=${options.durable ? "on" : "off"}`,
          "-c full_page_writes=off",
          ...tls,
          ...Object.entries(options.settings ?? {}).map(([name, value]) =>
            `-c ${name}=${value}`
          ),
        ].join(" "),
        "start",
      ], options.env);
    const started = await start();
    if (started.ok && copied) {
      // Over the Unix socket, which trusts the postgres OS user; before
      // this no TCP login can succeed (the template's password is unknown).
      const sql = await secret(
        "password.sql",
        `SET password_encryption = 'scram-sha-256';\nALTER ROLE postgres PASSWORD '${password}';\n`,
      );
      const set = await psql(port, ["-v", "ON_ERROR_STOP=1", "-f", sql]);
      await Deno.remove(sql).catch(() => {});
      if (!set.ok) {
        // The copy will not take a password: as a copy that does not
        // start, made by initdb from here on, and the template dropped
        // (every copy of it would fail so).
        await as("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]);
        lastError = `Setting the server's password failed:\n${set.out}`;
        await remake();
        continue;
      }
    }
    if (started.ok) {
      let stopped = false;
      return {
        url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
        password,
        port,
        dir,
        async stop() {
          if (stopped) return;
          stopped = true;
          await as("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]);
          await Deno.remove(dir, { recursive: true }).catch(() => {});
        },
        async halt(mode) {
          const halted = await as("pg_ctl", [
            "-D",
            data,
            "-m",
            mode,
            "-w",
            "stop",
          ]);
          if (!halted.ok) throw new Error(`pg_ctl stop failed:\n${halted.out}`);
        },
        async resume() {
          const resumed = await start();
          if (!resumed.ok) {
            throw new Error(`pg_ctl start failed:\n${resumed.out}`);
          }
        },
        async psql(query) {
          const out = await psql(port, ["-c", query]);
          if (!out.ok) throw new Error(`psql failed:\n${out.out}`);
          return out.out;
        },
      };
    }
    // Most likely another process took the port between our probe and the bind.
    lastError = `${started.out}\n${await Deno.readTextFile(log).catch(() =>
      ""
    )}`;
    if (
      copied && !/could not bind|could not create listen socket/.test(lastError)
    ) {
      // Not the port: the copy itself. Made by initdb from here on, and the
      // template made again by the next server.
      await remake();
    }
  }
  throw new Error(`PostgreSQL did not start:\n${lastError}`);
}

/** What {@linkcode processPostgres} found. */
export type ProcessPostgres =
  | { readonly server: PostgresServer; readonly missing?: undefined }
  | { readonly server: null; readonly missing: string };

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * This process's shared server: the first caller (in any worker of the
 * process) starts it, the others wait for its URL. It lives until the
 * process exits. Without server binaries it returns why, so the caller can
 * skip (or fail, under CI).
 */
export async function processPostgres(): Promise<ProcessPostgres> {
  const base = `${await tempRoot()}/relayer-postgres-${Deno.pid}`;
  let starter = true;
  try {
    await Deno.mkdir(base);
  } catch (error) {
    if (!(error instanceof Deno.errors.AlreadyExists)) throw error;
    starter = false;
  }
  if (starter) {
    // The lock dir goes when this process does, whatever happens below:
    // after the server in it has stopped (its own watchdog, started by
    // `startPostgres`, stops it then), for `pg_ctl stop` needs the pid file
    // this would delete. It waits at most 30 s for that.
    const pid = quote(`${base}/data/postmaster.pid`);
    await watchdog(
      `for i in $(seq 150); do [ -e ${pid} ] || break; sleep 0.2; done; rm -rf ${
        quote(base)
      }`,
      base,
    );
    const bin = await postgresBinDir();
    if (bin === null) {
      const missing =
        "no PostgreSQL server binaries (initdb) under `pg_config --bindir` or /usr/lib/postgresql/*/bin";
      await Deno.writeTextFile(`${base}/missing`, missing);
      return { server: null, missing };
    }
    try {
      const server = await startPostgres({ dir: base, bin });
      const shared: PostgresServer = {
        url: server.url,
        password: server.password,
        port: server.port,
        dir: server.dir,
      };
      // It holds the superuser's password: for this user's eyes only.
      await Deno.writeTextFile(`${base}/server.json`, JSON.stringify(shared), {
        mode: 0o600,
      });
      return { server: shared };
    } catch (error) {
      await Deno.writeTextFile(`${base}/error`, (error as Error).message);
      throw error;
    }
  }
  for (let waited = 0; waited < 120_000; waited += 50) {
    const [json, missing, error] = await Promise.all(
      ["server.json", "missing", "error"].map((name) =>
        Deno.readTextFile(`${base}/${name}`).catch(() => null)
      ),
    );
    if (json) return { server: JSON.parse(json) as PostgresServer };
    if (missing) return { server: null, missing };
    if (error) throw new Error(`PostgreSQL did not start: ${error}`);
    await sleep(50);
  }
  throw new Error("PostgreSQL did not start within 120 s");
}

async function tempRoot(): Promise<string> {
  // The parent of a fresh temp dir: honours TMPDIR as Deno does.
  const probe = await Deno.makeTempDir();
  await Deno.remove(probe);
  return probe.replace(/\/[^/]*$/, "");
}

/** Where `pgbouncer` is: on the PATH, else Debian's `/usr/sbin`; `null` when there is none. */
export async function pgbouncerBin(): Promise<string | null> {
  for (const candidate of ["pgbouncer", "/usr/sbin/pgbouncer"]) {
    if ((await run(candidate, ["--version"])).ok) return candidate;
  }
  return null;
}

/** A PgBouncer this process started in front of a server. */
export interface OwnedPgBouncer {
  /** `postgres://postgres:<password>@127.0.0.1:<port>/postgres`, through the pooler. */
  readonly url: string;
  /**
   * Switches its pool mode while it runs, as an operator's edit of
   * `pool_mode` and a reload do: clients connected stay connected, and
   * are pooled so from then on.
   */
  setMode(mode: "transaction" | "session" | "statement"): Promise<void>;
  /** Stops it and deletes its dir (the watchdog does it anyway at exit). */
  stop(): Promise<void>;
}

/**
 * Starts PgBouncer (Debian's `pgbouncer` package) in front of `server`,
 * on 127.0.0.1 at a free port, asking for the `postgres` role's password
 * (checked with SCRAM-SHA-256, and given to the server in turn), in the pool
 * mode asked for, with a pool of `poolSize` server connections. It hands
 * out the server connection used last (its default), as on a quiet
 * production pooler. Run as the `postgres` OS user when this process is
 * root (PgBouncer refuses root); a watchdog stops it when this process
 * exits, however it exits.
 *
 * @param server The PostgreSQL server it pools.
 * @param options `mode`: `"transaction"`, `"session"` or `"statement"`; `poolSize`: server connections per database.
 * @returns The running pooler.
 * @throws {Error} If there is no `pgbouncer` or it does not start.
 */
export async function startPgBouncer(
  server: PostgresServer,
  options: { mode: "transaction" | "session" | "statement"; poolSize?: number },
): Promise<OwnedPgBouncer> {
  const bin = await pgbouncerBin();
  if (bin === null) {
    throw new Error(
      "Cannot start PgBouncer: no pgbouncer on the PATH or in /usr/sbin; install Debian's pgbouncer package",
    );
  }
  // PgBouncer 1.21 and later can keep prepared statements itself (1.24 on
  // by default); the suites want the pooler that does not, as Supavisor's
  // transaction mode and older PgBouncers are. 1.18 refuses the setting.
  const [, major, minor] = /PgBouncer (\d+)\.(\d+)/.exec(
    (await run(bin, ["--version"])).out,
  ) ?? [];
  const keepsStatements = Number(major) > 1 ||
    (Number(major) === 1 && Number(minor) >= 21);
  const dir = await Deno.makeTempDir({ prefix: "relayer-pgbouncer-" });
  const user = await serverUser();
  await Deno.chmod(dir, 0o755);
  if (user !== null) await Deno.chown(dir, user.uid, user.gid);
  const pidfile = `${dir}/pgbouncer.pid`;
  await watchdog(
    `[ -e ${quote(pidfile)} ] && kill $(cat ${quote(pidfile)}); rm -rf ${
      quote(dir)
    }`,
    dir,
  );
  // The server's password, which clients give PgBouncer (checked with
  // SCRAM-SHA-256) and PgBouncer gives the server.
  await Deno.writeTextFile(
    `${dir}/users.txt`,
    `"postgres" "${server.password}"\n`,
    { mode: 0o600 },
  );
  if (user !== null) await Deno.chown(`${dir}/users.txt`, user.uid, user.gid);
  const logfile = `${dir}/pgbouncer.log`;
  let lastError = "";
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = freePort();
    const ini = `${dir}/pgbouncer.ini`;
    await Deno.writeTextFile(
      ini,
      [
        "[databases]",
        `* = host=127.0.0.1 port=${server.port}`,
        "[pgbouncer]",
        "listen_addr = 127.0.0.1",
        `listen_port = ${port}`,
        "unix_socket_dir =",
        "auth_type = scram-sha-256",
        `auth_file = ${dir}/users.txt`,
        `pool_mode = ${options.mode}`,
        `default_pool_size = ${options.poolSize ?? 8}`,
        "max_client_conn = 500",
        "server_login_retry = 1",
        ...(keepsStatements ? ["max_prepared_statements = 0"] : []),
        `logfile = ${logfile}`,
        `pidfile = ${pidfile}`,
        "",
      ].join("\n"),
    );
    const args = ["-d", ini];
    const logFrom = (await Deno.readTextFile(logfile).catch(() => "")).length;
    const started = user === null
      ? await run(bin, args)
      : await run("runuser", ["-u", "postgres", "--", bin, ...args]);
    const url =
      `postgres://postgres:${server.password}@127.0.0.1:${port}/postgres`;
    // `pgbouncer -d` exits 0 whether or not its daemon could bind, and
    // another process that took the port in between accepts connections
    // there: only the pooler's own log says the port is its.
    if (
      started.ok && await boundIn(logfile, logFrom, port) &&
      await listening(port)
    ) {
      let stopped = false;
      return {
        url,
        async setMode(mode) {
          const from = (await Deno.readTextFile(logfile)).length;
          await Deno.writeTextFile(
            ini,
            (await Deno.readTextFile(ini)).replace(
              /^pool_mode = .*$/m,
              `pool_mode = ${mode}`,
            ),
          );
          const pid = (await Deno.readTextFile(pidfile)).trim();
          await run("kill", ["-HUP", pid]);
          // PgBouncer reads its file again in the signal's turn, and logs
          // the signal first.
          for (let waited = 0; waited < 5_000; waited += 20) {
            const log = (await Deno.readTextFile(logfile)).slice(from);
            if (/got SIGHUP/.test(log)) return;
            await sleep(20);
          }
          throw new Error(`PgBouncer did not reload its pool_mode (${mode})`);
        },
        async stop() {
          if (stopped) return;
          stopped = true;
          const pid = await Deno.readTextFile(pidfile).catch(() => "");
          if (/^\d+\s*$/.test(pid)) await run("kill", [pid.trim()]);
          await Deno.remove(dir, { recursive: true }).catch(() => {});
        },
      };
    }
    // Most likely another process took the port between our probe and the bind.
    lastError = `${started.out}\n${await Deno.readTextFile(logfile).catch(
      () => "",
    )}`;
  }
  throw new Error(`PgBouncer did not start:\n${lastError}`);
}

/**
 * Whether PgBouncer's log, from offset `from`, says it listens on
 * 127.0.0.1:`port` within 5 s; `false` once it says it could not.
 */
async function boundIn(
  logfile: string,
  from: number,
  port: number,
): Promise<boolean> {
  for (let waited = 0; waited < 5_000; waited += 50) {
    const log = (await Deno.readTextFile(logfile).catch(() => "")).slice(from);
    if (log.includes(`listening on 127.0.0.1:${port}\n`)) return true;
    if (/cannot listen on|nowhere to listen|FATAL/.test(log)) return false;
    await sleep(50);
  }
  return false;
}

/** Whether something accepts connections on 127.0.0.1:`port` within 5 s. */
async function listening(port: number): Promise<boolean> {
  for (let waited = 0; waited < 5_000; waited += 50) {
    try {
      (await Deno.connect({ hostname: "127.0.0.1", port })).close();
      return true;
    } catch {
      await sleep(50);
    }
  }
  return false;
}
