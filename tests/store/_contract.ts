/**
 * The store contract, published as `@relayer/poison/testing`
 * (`testing/store_contract.ts`), and its dead-letter fixture, for the
 * repository's own store tests.
 *
 * @module
 */

export * from "../../testing/store_contract.ts";
export { deadLetter } from "../../testing/_fixtures.ts";
