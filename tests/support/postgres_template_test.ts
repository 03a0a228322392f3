import assert from "node:assert/strict";
import postgres from "postgres";
import { startPostgres } from "../../support/postgres_server.ts";
import { postgresAvailable } from "../_postgres.ts";

/** A dir of templates of the test's own, which the postgres OS user may enter. */
async function templatesDir(): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "relayer-pgt-test-" });
  await Deno.chmod(dir, 0o755);
  return dir;
}

async function entries(dir: string): Promise<string[]> {
  const names = [];
  for await (const entry of Deno.readDir(dir)) names.push(entry.name);
  return names.sort();
}

/** Whether `url` takes a login (SELECT 1); the server's SQLSTATE if not. */
async function login(url: string): Promise<true | string> {
  const sql = postgres(url, { max: 1, onnotice: () => {}, max_lifetime: null });
  try {
    await sql`SELECT 1`;
    return true;
  } catch (error) {
    return String((error as { code?: unknown }).code);
  } finally {
    await sql.end();
  }
}

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

// One templates dir for the three steps, as a run has one: the first
// makes it (two starts at once, from cold), the others spoil and remake
// it, so no step pays an initdb only to have a template to spoil.
Deno.test({
  name:
    "startPostgres() copies a template made once by initdb, never one half made, broken or another user's",
  ignore: !postgresAvailable,
  async fn(t) {
    const templates = await templatesDir();
    try {
      await t.step(
        "two servers at once from one template, each with its own password",
        async () => {
          const [a, b] = await Promise.all([
            startPostgres({ templates }),
            startPostgres({ templates }),
          ]);
          try {
            assert.notEqual(a.password, b.password);
            assert.equal(await login(a.url), true);
            assert.equal(await login(b.url), true);
            // The other's password is refused: each set its own.
            assert.equal(
              await login(a.url.replace(a.password, b.password)),
              "28P01",
            );
            const names = await entries(templates);
            assert.equal(names.length, 1, names.join(", "));
            assert.match(names[0]!, /^relayer-pg-template-[0-9a-f]{16}$/);
            // The next server copies that template, not one made again.
            await Deno.writeTextFile(`${templates}/${names[0]}/kept`, "");
            await (await startPostgres({ templates })).stop();
            assert.equal(await exists(`${templates}/${names[0]}/kept`), true);
          } finally {
            await Promise.all([a.stop(), b.stop()]);
          }
        },
      );

      await t.step(
        "a template half made, broken or another user's is made again",
        async () => {
          const [name] = await entries(templates);
          const path = `${templates}/${name}`;
          const { uid: owner } = await Deno.stat(path);
          for (
            const spoil of [
              // Half made: its `ready` is written last.
              () => Deno.remove(`${path}/ready`),
              // Broken: a file the server needs is gone.
              () => Deno.remove(`${path}/data/global/pg_control`),
              // Another user's (where this process may say so: as root).
              () => Deno.chown(path, 65534, 65534).catch(() => {}),
            ]
          ) {
            await Deno.writeTextFile(`${path}/data/spoiled`, "");
            await spoil();
            const server = await startPostgres({ templates });
            try {
              assert.equal(await login(server.url), true);
              assert.equal(await exists(`${server.dir}/data/spoiled`), false);
            } finally {
              await server.stop();
            }
            assert.deepEqual(await entries(templates), [name]);
            assert.equal(await Deno.readTextFile(`${path}/ready`), name);
            assert.equal((await Deno.stat(path)).uid, owner);
            assert.equal(await exists(`${path}/data/spoiled`), false);
          }
        },
      );

      await t.step(
        "a template whose copy does not start, or takes no password: initdb for that server, and the template dropped",
        async () => {
          for (
            const spoil of [
              // Whole to the check, but the server refuses its control file.
              async (data: string) => {
                const control = `${data}/global/pg_control`;
                const { size } = await Deno.stat(control);
                await Deno.writeFile(control, new Uint8Array(size));
              },
              // It starts, but refuses the login that sets the password.
              (data: string) =>
                Deno.writeTextFile(
                  `${data}/pg_hba.conf`,
                  "local all all reject\nhost all all 127.0.0.1/32 scram-sha-256\n",
                ),
            ]
          ) {
            let [name] = await entries(templates);
            if (name === undefined) {
              // The step before dropped it: the next server makes it again.
              await (await startPostgres({ templates })).stop();
              [name] = await entries(templates);
            }
            await spoil(`${templates}/${name}/data`);
            const server = await startPostgres({ templates });
            try {
              assert.equal(await login(server.url), true);
            } finally {
              await server.stop();
            }
            assert.deepEqual(await entries(templates), []);
          }
        },
      );
    } finally {
      await Deno.remove(templates, { recursive: true });
    }
  },
});
