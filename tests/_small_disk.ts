/**
 * A real small disk for the tests of a full one: a tmpfs of a few
 * megabytes mounted on a fresh folder (as root, where the machine lets a
 * process mount), and a ballast file that fills it to the last byte and is
 * removed to free it. Where no tmpfs can be mounted, `smallDiskAvailable`
 * is false and the tests that need one say so in one line and are ignored.
 *
 * @module
 */

import { skipSaid } from "./_skip_said.ts";

/** A mounted tmpfs, its ballast, and how to unmount it. */
export interface SmallDisk {
  /** The folder the tmpfs is mounted on. */
  readonly dir: string;
  /** Grows the ballast until the disk answers ENOSPC. */
  fill(): void;
  /** Removes the ballast: the disk has room again. */
  free(): void;
  /** Unmounts the tmpfs and removes its folder. */
  close(): void;
}

function run(args: string[]): { ok: boolean; text: string } {
  try {
    const out = new Deno.Command(args[0]!, {
      args: args.slice(1),
      stdout: "piped",
      stderr: "piped",
    }).outputSync();
    const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
    return { ok: out.success, text: decode(out.stderr) + decode(out.stdout) };
  } catch (error) {
    return { ok: false, text: String(error) };
  }
}

/**
 * Mounts a tmpfs of `size` (as `mount` reads it: `"4m"`) on a new folder,
 * or returns why it cannot.
 */
export function mountSmallDisk(size = "4m"): SmallDisk | string {
  const dir = Deno.makeTempDirSync({ prefix: "relayer_small_disk_" });
  const mounted = run([
    "mount",
    "-t",
    "tmpfs",
    "-o",
    `size=${size}`,
    "tmpfs",
    dir,
  ]);
  if (!mounted.ok) {
    Deno.removeSync(dir);
    return mounted.text.trim() || "mount failed";
  }
  const ballast = `${dir}/ballast`;
  return {
    dir,
    fill() {
      const file = Deno.openSync(ballast, {
        write: true,
        create: true,
        append: true,
      });
      const chunk = new Uint8Array(4096);
      try {
        for (;;) file.writeSync(chunk);
      } catch (error) {
        if (!(error instanceof Error) || !/os error 28/.test(error.message)) {
          throw error;
        }
      } finally {
        file.close();
      }
    },
    free() {
      Deno.removeSync(ballast);
    },
    close() {
      run(["umount", "-l", dir]);
      Deno.removeSync(dir, { recursive: true });
    },
  };
}

/**
 * Whether this machine lets a test mount a tmpfs (checked once, by
 * mounting one): where it cannot, the full-disk suites are skipped with
 * one loud line, under `CI=true` too. Unlike a missing package, which
 * `.ci/run` installs, a machine that refuses `mount` (not root, or a
 * container without the capability) cannot be mended by the run.
 */
export const smallDiskAvailable: boolean = (() => {
  const disk = mountSmallDisk("64k");
  if (typeof disk !== "string") {
    disk.close();
    return true;
  }
  // One line per run: the env is the process's, shared by the test workers.
  const said = skipSaid("the full-disk suites");
  if (Deno.env.get(said) !== "1") {
    Deno.env.set(said, "1");
    // deno-lint-ignore no-console
    console.error(
      `\n!!! SKIPPING the full-disk suites: no tmpfs can be mounted here (${disk}). Run the tests as root where mount is allowed to run them. !!!\n`,
    );
  }
  return false;
})();
