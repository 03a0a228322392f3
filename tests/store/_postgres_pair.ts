/**
 * A real primary and a hot standby made from it (`pg_basebackup -R`), both
 * on 127.0.0.1, for the suites that list a standby beside its primary.
 *
 * @module
 */

import assert from "node:assert/strict";
import postgres from "postgres";
import {
  type OwnedPostgresServer,
  postgresBinDir,
  startPostgres,
} from "../../support/postgres_server.ts";

/** The suites' client options for the pair's servers (no lifetime timer, a 5 s connect). */
export const PAIR_CLIENT = {
  max: 2,
  onnotice: () => {},
  max_lifetime: null,
  connect_timeout: 5,
};

/** A primary and a hot standby streaming from it. */
export interface Pair {
  primary: OwnedPostgresServer;
  standbyPort: number;
  /** Promotes the standby (`pg_ctl promote`), waiting until it takes writes. */
  promote(): Promise<void>;
  stop(): Promise<void>;
}

/** Whether this process is root (`id -u`: the tests run without --allow-sys). */
let rootCheck: Promise<boolean> | undefined;
function isRoot(): Promise<boolean> {
  return rootCheck ??= new Deno.Command("id", { args: ["-u"], stdout: "piped" })
    .output()
    .then(({ stdout }) => new TextDecoder().decode(stdout).trim() === "0");
}

async function run(
  command: string,
  args: string[],
  env?: Readonly<Record<string, string>>,
): Promise<string> {
  const root = await isRoot();
  const { success, stdout, stderr } = await new Deno.Command(
    root ? "runuser" : command,
    {
      args: root ? ["-u", "postgres", "--", command, ...args] : args,
      stdout: "piped",
      stderr: "piped",
      ...(env === undefined ? {} : { env: { ...env } }),
    },
  ).output();
  const text = new TextDecoder();
  const out = `${text.decode(stdout)}${text.decode(stderr)}`;
  if (!success) throw new Error(`${command} failed:\n${out}`);
  return out;
}

/**
 * Starts a primary, then a standby from its base backup, on a free port.
 * `settings` and `env` go to both servers (see `startPostgres`).
 */
export async function startPair(
  options: {
    durable?: boolean;
    settings?: Readonly<Record<string, string>>;
    env?: Readonly<Record<string, string>>;
  } = {},
): Promise<Pair> {
  const bin = (await postgresBinDir())!;
  const primary = await startPostgres({
    bin,
    durable: options.durable ?? false,
    ...(options.settings ? { settings: options.settings } : {}),
    ...(options.env ? { env: options.env } : {}),
  });
  // Inside the primary's dir: its watchdog deletes it with the primary's.
  const data = `${primary.dir}/standby`;
  await run(`${bin}/pg_basebackup`, [
    "-h",
    primary.dir,
    "-p",
    String(primary.port),
    "-U",
    "postgres",
    "-D",
    data,
    "-R",
    "--no-sync",
  ]);
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const standbyPort = (probe.addr as Deno.NetAddr).port;
  probe.close();
  const ctl = (...args: string[]) =>
    run(`${bin}/pg_ctl`, ["-D", data, ...args], options.env);
  await ctl(
    "-l",
    `${primary.dir}/standby.log`,
    "-w",
    "-o",
    // As many connections as the primary, which a standby needs at least.
    [
      `-p ${standbyPort} -h 127.0.0.1 -k ${primary.dir} -F -c max_connections=300`,
      ...Object.entries(options.settings ?? {}).map(([name, value]) =>
        `-c ${name}=${value}`
      ),
    ].join(" "),
    "start",
  );
  return {
    primary,
    standbyPort,
    async promote() {
      await ctl("-w", "promote");
    },
    async stop() {
      await ctl("-m", "immediate", "-w", "stop").catch(() => {});
      await primary.stop();
    },
  };
}

/** The pair's URL: the standby first, then the primary. */
export function standbyFirst(pair: Pair, attrs: string): string {
  const { password, port } = pair.primary;
  return `postgres://postgres:${password}@127.0.0.1:${pair.standbyPort},127.0.0.1:${port}/postgres?target_session_attrs=${attrs}`;
}

/** `promise`, or a failure once `ms` passed without it settling. */
export async function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`no answer within ${ms} ms`)),
          ms,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The standby's URL once its database defaults to SERIALIZABLE: set on the
 * primary (`ALTER DATABASE … SET default_transaction_isolation`), waited
 * for until a session opened on the standby meets it (a session takes the
 * database's settings as it starts), where every statement outside an
 * explicit transaction is refused "cannot use serializable mode in a hot
 * standby" (0A000, in any language).
 */
export async function serializableStandby(pair: Pair): Promise<string> {
  const { password, port } = pair.primary;
  const primary = postgres(
    `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    { max: 1, onnotice: () => {} },
  );
  try {
    await primary.unsafe(
      `ALTER DATABASE postgres SET default_transaction_isolation = 'serializable'`,
    );
  } finally {
    await primary.end();
  }
  const url =
    `postgres://postgres:${password}@127.0.0.1:${pair.standbyPort}/postgres`;
  for (let waited = 0;; waited += 50) {
    const probe = postgres(url, {
      max: 1,
      fetch_types: false,
      onnotice: () => {},
    });
    // By its code: a server whose lc_messages is German words it so too.
    const met = await probe`SELECT 1`.then(
      () => false,
      (error: Error) => (error as { code?: unknown }).code === "0A000",
    );
    await probe.end({ timeout: 0 });
    if (met) return url;
    assert.ok(waited < 10_000, "the standby never replayed the setting");
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
