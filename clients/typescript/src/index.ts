export { MembraneClient, MAX_BATCH, chunkKey, parseRetryAfter } from "./client.js";
export type {
  BatchOptions, ClientOptions, GetOptions, LineageOptions, ReadOptions, WaitOptions, WriteOptions,
} from "./client.js";
export * from "./errors.js";
export type * from "./types.js";
export type { components, paths } from "./schema.js";
