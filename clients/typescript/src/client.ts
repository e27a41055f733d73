/**
 * A fetch-based client of the Membrane HTTP API (RFC 10).
 *
 * Writes are asynchronous operations (RFC 9.1); each carries an `Idempotency-Key`, so a
 * retry after a lost answer returns the operation the first attempt created (RFC 9.2).
 * Network failures, timeouts, 429 and 503 (but `encryption_key_unavailable`, which only the
 * operator can fix) are retried with jittered exponential backoff,
 * waiting at least the server's `Retry-After` (RFC 10.5); other errors are thrown at once
 * as the {@link MembraneError} subclass of their code. The rules are the Python SDK's.
 */
import {
  ConnectionFailedError, EncryptionKeyUnavailableError, MembraneError, OperationTimeoutError, errorFromBody,
} from "./errors.js";
import type {
  AuditHistory, CaptureRequest, ContestBody, DecideResult, DecisionRequest, DecisionResult, ForkBody,
  Lineage, MaintenanceRun, MergeBody, Metrics, OperationBatch, OperationFilters, OperationPage,
  OperationSummary, OperationView, PenalizeBody, RecordFilters, RecordPage, RecordView, ReinforceBody,
  RequeueRequest, RequeueResult, RetractBody, RetrieveRequest, RetrieveResult, ReviewEntry, ReviewFilters,
  ReviewPage, RevisedRecord, ScopeList, SupersedeBody, WorkFilters, WorkOverview, ExportFilters,
  ImportReport, ErasureRequest, ErasureResult,
} from "./types.js";

export interface ClientOptions {
  /** Where the API listens, e.g. `http://127.0.0.1:8080`. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <key>` (RFC 10.3). */
  apiKey?: string;
  /** Time allowed for one attempt, in ms (default 30 000); a write's `wait` is added to it. */
  timeoutMs?: number;
  /** Retries after the first attempt (default 5). */
  maxRetries?: number;
  /** First pause between attempts, in ms, doubled each retry and jittered (default 200). */
  backoffMs?: number;
  /** Longest pause between two attempts, in ms, whatever the backoff or `Retry-After` (default 60 000). */
  maxBackoffMs?: number;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
}

export interface ReadOptions {
  signal?: AbortSignal;
}

export interface WriteOptions extends ReadOptions {
  /** Default: a fresh `crypto.randomUUID()` per call, kept across its retries. */
  idempotencyKey?: string;
  /** Seconds the server waits for the operation to finish (0 < wait ≤ 30), `?wait=S`. */
  wait?: number;
}

export interface BatchOptions extends WriteOptions {
  /** Captures per request (1 to {@link MAX_BATCH}, the default). */
  chunkSize?: number;
}

export interface WaitOptions extends ReadOptions {
  /** How long to poll before {@link OperationTimeoutError}, in ms (default 30 000). */
  timeoutMs?: number;
  /** First pause between polls, in ms, doubled up to half a second (default 20). */
  intervalMs?: number;
}

export interface GetOptions extends ReadOptions {
  /** The record as it was believed at this time (RFC 5.6). */
  asOf?: string;
  /** Only if the record is valid at this time (RFC 5.6). */
  validAt?: string;
}

export interface LineageOptions extends ReadOptions {
  /** The lineage as it was believed at this time (RFC 5.6). */
  asOf?: string;
}

export interface ApproveOptions extends ReadOptions {
  /** Beside an active fact of the same subject and predicate: supersede it, or keep both (RFC 5.7). */
  mode?: "replace" | "beside";
  rationale?: string;
}

export interface ImportOptions extends ReadOptions {
  /** RFC 15.2: what to do with a record id the store holds (default `skip`) */
  onConflict?: "skip" | "overwrite" | "fail";
}

export interface RejectOptions extends ReadOptions {
  rationale?: string;
}

export interface AmendOptions extends ReadOptions {
  rationale?: string;
  evidence?: DecisionRequest["evidence"];
}

/** Most captures one batch request may carry (RFC 3.6). */
export const MAX_BATCH = 1000;

const RETRIED_STATUSES = new Set([429, 503]);
const FINISHED = new Set(["succeeded", "failed"]);

/** The `Idempotency-Key` of chunk `index` of a batch written under `key`. */
export function chunkKey(key: string, index: number): string {
  return `${key}:${index}`;
}

/** `Retry-After` (seconds or an HTTP date) in milliseconds; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null || value.trim() === "") return undefined;
  if (/^\s*\d+(\.\d+)?\s*$/.test(value)) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** A query parameter's value; a list repeats the parameter (`?scope=a&scope=b`). */
type QueryValue = string | number | boolean | readonly (string | number)[] | null | undefined;
type Query = Record<string, QueryValue>;

interface Call {
  method: "GET" | "POST";
  path: string;
  query?: Query;
  body?: unknown;
  /** a body sent as it is, not as JSON (a bundle's tar, RFC 15.2) */
  raw?: Uint8Array;
  /** the answer is bytes (a bundle's tar, RFC 15.1), not JSON */
  binary?: boolean;
  idempotencyKey?: string;
  signal?: AbortSignal | undefined;
  timeoutMs?: number;
  /** a read that must see this client's own writes: it carries their latest token (RFC 13.2) */
  consistent?: boolean;
}

/** RFC 13.2: a consistency token (`16/B374D848`) as the pair it orders by, or undefined. */
function lsn(token: string): [number, number] | undefined {
  const m = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(token);
  return m ? [parseInt(m[1]!, 16), parseInt(m[2]!, 16)] : undefined;
}

interface Answer {
  status: number;
  ok: boolean;
  headers: Headers;
  text: string;
  bytes?: Uint8Array;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause as { code?: unknown; message?: unknown } | undefined;
  const detail = typeof cause?.code === "string" ? cause.code
    : typeof cause?.message === "string" ? cause.message : undefined;
  return detail ? `${err.message} (${detail})` : err.message;
}

function parseBody(text: string): unknown {
  if (text === "") return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

const segment = encodeURIComponent;

export class MembraneClient {
  readonly baseUrl: string;
  private readonly apiKey: string | undefined;
  /** RFC 13.2: the latest consistency token of this client's writes */
  private token: string | undefined;
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly backoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly fetchImpl: typeof fetch;

  constructor(options: ClientOptions) {
    if (!options.baseUrl) throw new TypeError("baseUrl is required");
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.apiKey = options.apiKey;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.maxRetries = Math.max(0, options.maxRetries ?? 5);
    this.backoffMs = options.backoffMs ?? 200;
    this.maxBackoffMs = options.maxBackoffMs ?? 60_000;
    this.fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  // -- captures (RFC 3.3, 3.6) --

  /** Capture one observation, event, tool output, outcome or working state. */
  capture(body: CaptureRequest, options: WriteOptions = {}): Promise<OperationView> {
    return this.write<OperationView>("/v1/captures", body, options);
  }

  /**
   * Capture many, in chunks of at most {@link MAX_BATCH}; the operations come back in input
   * order. Chunk `i` is sent under `chunkKey(key, i)`, so calling again with the same key
   * after a failure part-way replays the chunks already accepted.
   */
  async captureMany(captures: CaptureRequest[], options: BatchOptions = {}): Promise<OperationView[]> {
    const size = options.chunkSize ?? MAX_BATCH;
    if (!Number.isInteger(size) || size < 1 || size > MAX_BATCH) {
      throw new RangeError(`chunkSize must be an integer from 1 to ${MAX_BATCH}`);
    }
    const key = options.idempotencyKey ?? crypto.randomUUID();
    const operations: OperationView[] = [];
    for (let start = 0, index = 0; start < captures.length; start += size, index++) {
      const batch = await this.write<OperationBatch>(
        "/v1/captures:batch", { captures: captures.slice(start, start + size) }, options,
        chunkKey(key, index));
      operations.push(...batch.operations);
    }
    return operations;
  }

  // -- reads (RFC 5.5, 8, 9.1) --

  /** One record, trust-checked and marked with its status (RFC 5.1). */
  get(recordId: string, options: GetOptions = {}): Promise<RecordView> {
    return this.request<RecordView>({
      method: "GET", path: `/v1/records/${segment(recordId)}`,
      query: { as_of: options.asOf, valid_at: options.validAt }, signal: options.signal,
    });
  }

  /** A record's audit history and whether its hash chain verifies (RFC 5.5). */
  audit(recordId: string, options: ReadOptions = {}): Promise<AuditHistory> {
    return this.request<AuditHistory>({
      method: "GET", path: `/v1/records/${segment(recordId)}/audit`, signal: options.signal,
    });
  }

  /** Bounded, trust-aware retrieval; `expand` adds graph neighbours (RFC 8, 8.4). */
  retrieve(request: RetrieveRequest = {}, options: ReadOptions = {}): Promise<RetrieveResult> {
    return this.request<RetrieveResult>({
      method: "POST", path: "/v1/retrieve", body: request, signal: options.signal, consistent: true,
    });
  }

  /** An operation's status and the records it wrote (RFC 9.1). */
  operation(operationId: string, options: ReadOptions = {}): Promise<OperationView> {
    return this.request<OperationView>({
      method: "GET", path: `/v1/operations/${segment(operationId)}`, signal: options.signal,
    });
  }

  /** Poll an operation until it has `succeeded` or `failed`, quickly at first. */
  async wait(operation: string | OperationView, options: WaitOptions = {}): Promise<OperationView> {
    if (typeof operation !== "string" && FINISHED.has(operation.status)) return operation;
    const id = typeof operation === "string" ? operation : operation.operation_id;
    const timeoutMs = options.timeoutMs ?? 30_000;
    const deadline = Date.now() + timeoutMs;
    let interval = options.intervalMs ?? 20;
    for (;;) {
      const view = await this.operation(id, options);
      if (FINISHED.has(view.status)) return view;
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new OperationTimeoutError(`operation ${id} is still ${view.status} after ${timeoutMs} ms`, view);
      }
      await sleep(Math.min(interval, left), options.signal);
      interval = Math.min(interval * 2, 500);
    }
  }

  /** Totals, averages, audit counts and, for an operator, queue depths (RFC 14.2). */
  metrics(options: ReadOptions = {}): Promise<Metrics> {
    return this.request<Metrics>({ method: "GET", path: "/v1/metrics", signal: options.signal });
  }

  // -- lists (RFC 10.7) --

  /**
   * One page of records, newest first, trust-checked and redacted as retrieval is; pass its
   * `next_cursor` as `cursor` for the next page.
   */
  listRecords(filters: RecordFilters = {}, options: ReadOptions = {}): Promise<RecordPage> {
    return this.request<RecordPage>({
      method: "GET", path: "/v1/records", query: filters, signal: options.signal, consistent: true,
    });
  }

  /** Every page of {@link listRecords} from `filters.cursor` on, each fetched as the one before is used up. */
  recordPages(filters: RecordFilters = {}, options: ReadOptions = {}): AsyncGenerator<RecordPage> {
    return this.pages<RecordPage>("/v1/records", filters, options);
  }

  /** Every record {@link listRecords} matches, page after page: `for await (const r of ...)`. */
  async *iterRecords(filters: RecordFilters = {}, options: ReadOptions = {}): AsyncGenerator<RecordView> {
    for await (const page of this.recordPages(filters, options)) yield* page.records;
  }

  /** A record's correction chain: supersedes, merged into, forked from, contests. */
  lineage(recordId: string, options: LineageOptions = {}): Promise<Lineage> {
    return this.request<Lineage>({
      method: "GET", path: `/v1/records/${segment(recordId)}/lineage`, query: { as_of: options.asOf },
      signal: options.signal,
    });
  }

  /** One page of operations, newest first: the caller's own, every one for an operator. */
  listOperations(filters: OperationFilters = {}, options: ReadOptions = {}): Promise<OperationPage> {
    return this.request<OperationPage>({
      method: "GET", path: "/v1/operations", query: filters, signal: options.signal,
    });
  }

  /** Every operation {@link listOperations} matches, page after page. */
  async *iterOperations(filters: OperationFilters = {}, options: ReadOptions = {},
                        ): AsyncGenerator<OperationSummary> {
    for await (const page of this.pages<OperationPage>("/v1/operations", filters, options)) {
      yield* page.operations;
    }
  }

  /** The scopes the caller may read, with the records it sees in each. */
  listScopes(options: ReadOptions = {}): Promise<ScopeList> {
    return this.request<ScopeList>({ method: "GET", path: "/v1/scopes", signal: options.signal });
  }

  // -- revisions (RFC 5.2) --

  /** Replace a fact with a new version; the old one is retracted. */
  supersede(recordId: string, body: SupersedeBody, options: WriteOptions = {}): Promise<OperationView> {
    return this.write<OperationView>(`/v1/records/${segment(recordId)}/supersede`, body, options);
  }

  /** Fork a conditional variant of a fact. */
  fork(recordId: string, body: ForkBody, options: WriteOptions = {}): Promise<OperationView> {
    return this.write<OperationView>(`/v1/records/${segment(recordId)}/fork`, body, options);
  }

  /** Merge records into one. */
  merge(body: MergeBody, options: WriteOptions = {}): Promise<OperationView> {
    return this.write<OperationView>("/v1/records:merge", body, options);
  }

  /** Retract a record. */
  retract(recordId: string, body: RetractBody, options: WriteOptions = {}): Promise<OperationView> {
    return this.write<OperationView>(`/v1/records/${segment(recordId)}/retract`, body, options);
  }

  /** Mark a record contested. */
  contest(recordId: string, body: ContestBody, options: WriteOptions = {}): Promise<OperationView> {
    return this.write<OperationView>(`/v1/records/${segment(recordId)}/contest`, body, options);
  }

  /** Raise a record's salience. */
  reinforce(recordId: string, body: ReinforceBody = {}, options: WriteOptions = {}): Promise<OperationView> {
    return this.write<OperationView>(`/v1/records/${segment(recordId)}/reinforce`, body, options);
  }

  /** Lower a record's salience. */
  penalize(recordId: string, body: PenalizeBody = {}, options: WriteOptions = {}): Promise<OperationView> {
    return this.write<OperationView>(`/v1/records/${segment(recordId)}/penalize`, body, options);
  }

  // -- operators (RFC 6.5) --

  /** Run one batch of each maintenance job now. */
  runMaintenance(jobs: MaintenanceRun["jobs"] | MaintenanceRun, options: WriteOptions = {},
                 ): Promise<OperationView> {
    const body: MaintenanceRun = Array.isArray(jobs) ? { jobs } : jobs;
    return this.write<OperationView>("/v1/maintenance/run", body, options);
  }

  /** Every job's backlog, the inbox, the embedding lag and a page of buried items (RFC 10.7). */
  work(filters: WorkFilters = {}, options: ReadOptions = {}): Promise<WorkOverview> {
    return this.request<WorkOverview>({
      method: "GET", path: "/v1/work", query: filters, signal: options.signal,
    });
  }

  /**
   * Put buried work items back, due now; each is audited on its record (RFC 10.7). Putting an
   * item back twice leaves it as once, so the call carries no `Idempotency-Key`.
   */
  requeueWork(ids: RequeueRequest["ids"] | RequeueRequest, options: ReadOptions = {},
              ): Promise<RequeueResult> {
    const body: RequeueRequest = Array.isArray(ids) ? { ids } : ids;
    return this.request<RequeueResult>({
      method: "POST", path: "/v1/work:requeue", body, signal: options.signal,
    });
  }

  // -- review (RFC 5.7) --

  /**
   * One page of the pending proposals a reviewer key may decide, oldest first (`order:
   * "corroboration"`: most corroborated first), each with its records, evidence, corroborators
   * and conflicting facts; pass `next_cursor` as `cursor` for the next page. Other keys: 403.
   */
  reviewQueue(filters: ReviewFilters = {}, options: ReadOptions = {}): Promise<ReviewPage> {
    return this.request<ReviewPage>({
      method: "GET", path: "/v1/review", query: filters, signal: options.signal,
    });
  }

  /** Every entry of {@link reviewQueue}, page after page: `for await (const e of ...)`. */
  async *iterReview(filters: ReviewFilters = {}, options: ReadOptions = {}): AsyncGenerator<ReviewEntry> {
    for await (const page of this.pages<ReviewPage>("/v1/review", filters, options)) yield* page.entries;
  }

  /**
   * Apply 1 to 1,000 decisions, each on its own; the results come in input order, a refused one
   * with its `error`. No `Idempotency-Key`: a decision sent again is refused as already decided
   * (`revision_refused`), so a retry after a lost answer changes nothing.
   */
  decide(decisions: DecisionRequest[], options: ReadOptions = {}): Promise<DecideResult> {
    return this.request<DecideResult>({
      method: "POST", path: "/v1/review:decide", body: { decisions }, signal: options.signal,
    });
  }

  /**
   * Approve a proposal: its records become active (`mode` beside a conflicting active fact).
   * A refused decision is thrown as the error of its code (`RevisionRefusedError` when already
   * decided, `ForbiddenError` for the caller's own proposal).
   */
  approve(proposalId: string, options: ApproveOptions = {}): Promise<DecisionResult> {
    const { mode, rationale } = options;
    return this.decideOne({ proposal_id: proposalId, decision: "approve", mode, rationale }, options);
  }

  /** Reject a proposal: its records are retracted and its triple tombstoned; a refusal is thrown. */
  reject(proposalId: string, options: RejectOptions = {}): Promise<DecisionResult> {
    const decision: DecisionRequest = { proposal_id: proposalId, decision: "reject", rationale: options.rationale };
    return this.decideOne(decision, options);
  }

  /**
   * Amend a proposal: `record` (as a supersede's) becomes an active fact superseding the proposed
   * one, whose id is the last of `record_ids`; the proposal's other records are approved. A
   * refusal is thrown.
   */
  amend(proposalId: string, record: RevisedRecord, options: AmendOptions = {}): Promise<DecisionResult> {
    const { rationale, evidence } = options;
    const decision: DecisionRequest = { proposal_id: proposalId, decision: "amend", record, rationale, evidence };
    return this.decideOne(decision, options);
  }

  // -- moving and forgetting (RFC 15) --

  /**
   * The records the key sees in the scopes asked, with their history, corrections and audit,
   * as the bytes of a tar of NDJSON files and a manifest (RFC 15.1); a refusal is thrown
   * before any byte.
   */
  export(filters: ExportFilters = {}, options: ReadOptions = {}): Promise<Uint8Array> {
    return this.request<Uint8Array>({
      method: "GET", path: "/v1/export", query: filters, binary: true, signal: options.signal,
      timeoutMs: Math.max(this.timeoutMs, 600_000),
    });
  }

  /**
   * Import a bundle's tar (operator keys), checked whole before anything is written; ids the
   * store holds are skipped, overwritten where they differ, or refuse it (`onConflict`, RFC 15.2).
   * Importing the same bundle again changes nothing, so a retry is safe.
   */
  importBundle(bundle: Uint8Array, options: ImportOptions = {}): Promise<ImportReport> {
    return this.request<ImportReport>({
      method: "POST", path: "/v1/import", raw: bundle, query: { on_conflict: options.onConflict },
      signal: options.signal, timeoutMs: Math.max(this.timeoutMs, 600_000),
    });
  }

  /**
   * Erase a scope, an entity and what names it, or records (keys with `erase`): without
   * `dry_run: false` a dry run counting what would go by table; with it and the dry run's
   * `confirm`, the erasure, refused when the store changed since (RFC 15.4).
   */
  erase(request: ErasureRequest, options: ReadOptions = {}): Promise<ErasureResult> {
    return this.request<ErasureResult>({ method: "POST", path: "/v1/erase", body: request, signal: options.signal });
  }

  private async decideOne(decision: DecisionRequest, options: ReadOptions): Promise<DecisionResult> {
    const { results } = await this.decide([decision], options);  // unset fields are not sent
    const [result] = results;
    if (results.length !== 1 || result === undefined) {
      throw new MembraneError("invalid_response", 200,
        `POST /v1/review:decide: ${results.length} results for one decision`);
    }
    // the answer was a 200; the decision's own error is thrown as the class of its code
    if (result.error) throw errorFromBody(200, { error: result.error });
    return result;
  }

  // -- transport --

  /** The pages of a list from `query.cursor` on, following `next_cursor` (RFC 10.7). */
  private async *pages<P extends { next_cursor?: string | null }>(
    path: string, query: Query, options: ReadOptions): AsyncGenerator<P> {
    let cursor = query.cursor;
    for (;;) {
      const page = await this.request<P>({
        method: "GET", path, query: { ...query, cursor }, signal: options.signal,
        consistent: path === "/v1/records",
      });
      yield page;
      const next = page.next_cursor;
      if (next === undefined || next === null) return;
      // a server that hands back the cursor it was given would be paged forever
      if (next === cursor) {
        throw new MembraneError("invalid_response", 200, `GET ${path}: the same cursor came back`);
      }
      cursor = next;
    }
  }

  private write<T>(path: string, body: unknown, options: WriteOptions,
                   key: string = options.idempotencyKey ?? crypto.randomUUID()): Promise<T> {
    return this.request<T>({
      method: "POST", path, body, query: { wait: options.wait }, idempotencyKey: key,
      signal: options.signal, timeoutMs: this.timeoutMs + (options.wait ?? 0) * 1000,
    });
  }

  private url(path: string, query: Query = {}): string {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(query)) {
      if (value === undefined || value === null) continue;
      if (Array.isArray(value)) {
        for (const item of value) params.append(name, String(item));
      } else {
        params.set(name, String(value));
      }
    }
    const search = params.toString();
    return `${this.baseUrl}${path}${search ? `?${search}` : ""}`;
  }

  /**
   * Pause before retry `attempt` (0-based): an exponential step with jitter, so clients that
   * failed together do not come back together; `Retry-After` is a floor, `maxBackoffMs` a cap.
   */
  private delay(attempt: number, retryAfterMs?: number): number {
    const step = Math.min(this.maxBackoffMs, this.backoffMs * 2 ** attempt);
    const jittered = step * (0.5 + Math.random() / 2);
    return Math.min(this.maxBackoffMs, Math.max(jittered, retryAfterMs ?? 0));
  }

  /** The latest consistency token of this client's writes, sent with its reads (RFC 13.2). */
  get consistencyToken(): string | undefined {
    return this.token;
  }

  /** Keep `token` if it is later than the one kept. */
  private keep(token: string | null): void {
    const next = token ? lsn(token) : undefined;
    if (next === undefined) return;
    const kept = this.token === undefined ? undefined : lsn(this.token);
    if (kept === undefined || next[0] > kept[0] || (next[0] === kept[0] && next[1] > kept[1])) {
      this.token = token!;
    }
  }

  private async request<T>(call: Call): Promise<T> {
    const url = this.url(call.path, call.query);
    const headers: Record<string, string> = { accept: "application/json" };
    if (this.apiKey) headers.authorization = `Bearer ${this.apiKey}`;
    if (call.idempotencyKey !== undefined) headers["idempotency-key"] = call.idempotencyKey;
    let body: BodyInit | undefined = call.body === undefined ? undefined : JSON.stringify(call.body);
    if (body !== undefined) headers["content-type"] = "application/json";
    if (call.raw !== undefined) {
      body = new Blob([call.raw as Uint8Array<ArrayBuffer>]);
      headers["content-type"] = "application/x-tar";
    }
    if (call.binary) headers.accept = "application/x-tar, application/json";
    if (call.consistent && this.token !== undefined) headers["membrane-consistency"] = this.token;

    for (let attempt = 0; ; attempt++) {
      const retry = attempt < this.maxRetries;
      let answer: Answer;
      try {
        answer = await this.send(url, { method: call.method, headers, body }, call);
      } catch (err) {
        if (call.signal?.aborted) throw err;
        if (!retry) {
          throw new ConnectionFailedError("connection_failed", 0,
            `${call.method} ${call.path}: ${describe(err)}`, [], { cause: err });
        }
        await sleep(this.delay(attempt), call.signal);
        continue;
      }
      this.keep(answer.headers.get("membrane-consistency"));
      if (answer.ok && answer.bytes !== undefined) return answer.bytes as T;
      const parsed = parseBody(answer.text);
      if (answer.ok) {
        if (typeof parsed === "string") {
          throw new MembraneError("invalid_response", answer.status,
            `${call.method} ${call.path}: the answer is not JSON`);
        }
        return parsed as T;
      }
      const retryAfterMs = parseRetryAfter(answer.headers.get("retry-after"));
      const error = errorFromBody(answer.status, parsed, retryAfterMs);
      if (!retry || !RETRIED_STATUSES.has(answer.status) || error instanceof EncryptionKeyUnavailableError) {
        throw error;
      }
      await sleep(this.delay(attempt, retryAfterMs), call.signal);
    }
  }

  /** One attempt, body included, within the timeout. */
  private async send(url: string, init: RequestInit, call: Call): Promise<Answer> {
    const timeoutMs = call.timeoutMs ?? this.timeoutMs;
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
    const onAbort = (): void => controller.abort(call.signal?.reason);
    if (call.signal?.aborted) onAbort();
    call.signal?.addEventListener("abort", onAbort, { once: true });
    try {
      const response = await this.fetchImpl(url, { ...init, signal: controller.signal });
      if (call.binary && response.ok) {
        const bytes = new Uint8Array(await response.arrayBuffer());
        return { status: response.status, ok: true, headers: response.headers, text: "", bytes };
      }
      const text = await response.text();
      return { status: response.status, ok: response.ok, headers: response.headers, text };
    } finally {
      clearTimeout(timer);
      call.signal?.removeEventListener("abort", onAbort);
    }
  }
}
