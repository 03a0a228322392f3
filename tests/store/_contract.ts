/**
 * The store contract, published as `@relayer/poison/testing`
 * (`testing/store_contract.ts`); re-exported here for the repository's own
 * store tests.
 *
 * @module
 */

export * from "../../testing/store_contract.ts";
