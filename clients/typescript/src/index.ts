export { MembraneClient, MAX_BATCH, chunkKey, parseRetryAfter } from "./client.js";
export type {
  AmendOptions, ApproveOptions, BatchOptions, ClientOptions, GetOptions, ImportOptions, LineageOptions, ReadOptions,
  RejectOptions, WaitOptions, WriteOptions,
} from "./client.js";
export * from "./errors.js";
export type * from "./types.js";
export type { components, paths } from "./schema.js";
