/**
 * The longest `txHash` the relayer records (hex, base58, base64 and base32
 * hashes of the chains we know, with room to spare). A longer one would
 * bloat every write of the intent, which keeps up to 32 of them, and could
 * exceed a store's value limit (Deno KV's 64 KiB) after the send.
 *
 * @module
 */

/** The most characters of a `txHash`. */
export const MAX_TX_HASH = 256;
