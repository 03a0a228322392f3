/**
 * Damage to a file on disk, as a fault a test gives a store's file.
 *
 * @module
 */

/** Writes `length` bytes of `byte` at `offset` of the file at `path`. */
export function overwrite(
  path: string,
  offset: number,
  length: number,
  byte: number,
): void {
  using file = Deno.openSync(path, { read: true, write: true });
  file.seekSync(offset, Deno.SeekMode.Start);
  file.writeSync(new Uint8Array(length).fill(byte));
}
