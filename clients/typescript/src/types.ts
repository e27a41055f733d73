/** Names for the shapes of the API, from the generated `schema.ts` (the server's OpenAPI). */
import type { components, operations } from "./schema.js";

type Schemas = components["schemas"];
/** The query parameters of an operation of the API, by its operationId. */
type Query<Id extends keyof operations> = NonNullable<operations[Id]["parameters"]["query"]>;

export type Sensitivity = Schemas["Sensitivity"];
export type MemoryType = Schemas["MemoryType"];
export type SourceKind = Schemas["SourceKind"];
export type RevisionStatus = Schemas["RevisionStatus"];

export type CaptureRequest = Schemas["CaptureRequest"];
export type CaptureBatch = Schemas["CaptureBatch"];
/** An operation: `queued` → `running` → `succeeded` | `failed` (RFC 9.1). */
export type OperationView = Schemas["OperationView"];
export type OperationKind = Schemas["OperationKind"];
export type OperationStatus = Schemas["OperationStatus"];
/** A batch's operations, in the order of its captures. */
export type OperationBatch = Schemas["OperationBatch"];

export type RecordView = Schemas["RecordView"];
export type AuditHistory = Schemas["AuditHistory"];
export type AuditEntry = Schemas["AuditEntry"];
export type RetrieveRequest = Schemas["RetrieveRequest"];
export type RetrieveResult = Schemas["RetrieveResult"];
export type RetrieveDiagnostics = Schemas["RetrieveDiagnostics"];
export type ExpandOptions = Schemas["ExpandOptions"];
export type Metrics = Schemas["Metrics"];
export type MaintenanceRun = Schemas["MaintenanceRun"];
/** `{"error": {"code", "message", "details"}}` (RFC 10.2). */
export type ErrorBody = Schemas["ErrorBody"];

export type RevisedRecord = Schemas["RevisedRecord"];
export type ProvenanceRef = Schemas["ProvenanceRef"];
export type SupersedeBody = Schemas["SupersedeBody"];
export type ForkBody = Schemas["ForkBody"];
export type MergeBody = Schemas["MergeBody"];
export type RetractBody = Schemas["RetractBody"];
export type ContestBody = Schemas["ContestBody"];
export type ReinforceBody = Schemas["ReinforceBody"];
export type PenalizeBody = Schemas["PenalizeBody"];

// -- lists (RFC 10.7) --

/** The filters of `GET /v1/records`: its query parameters; a list repeats its parameter. */
export type RecordFilters = Query<"list_records">;
/** One page of records, newest first; `next_cursor` is null on the last page. */
export type RecordPage = Schemas["RecordPage"];
/** What bounded a page: rows, projected bytes, and which limit cut it. */
export type PageDiagnostics = Schemas["PageDiagnostics"];
/** A record's correction chain: records as nodes, corrections as edges. */
export type Lineage = Schemas["Lineage"];
export type LineageEdge = Schemas["LineageEdge"];
/** The filters of `GET /v1/operations`. */
export type OperationFilters = Query<"list_operations">;
export type OperationSummary = Schemas["OperationSummary"];
export type OperationPage = Schemas["OperationPage"];
/** The query of `GET /v1/work`: `kind` narrows the buried items to those jobs. */
export type WorkFilters = Query<"get_work">;
export type WorkKind = Schemas["WorkKind"];
/** Every job's backlog, the inbox, the embedding lag and a page of buried items. */
export type WorkOverview = Schemas["WorkOverview"];
export type JobBacklog = Schemas["JobBacklog"];
export type BuriedItem = Schemas["BuriedItem"];
export type InboxCount = Schemas["InboxCount"];
export type RequeueRequest = Schemas["RequeueRequest"];
export type RequeueResult = Schemas["RequeueResult"];
export type ScopeList = Schemas["ScopeList"];
export type ScopeCount = Schemas["ScopeCount"];

// -- review (RFC 5.7) --

/** The query of `GET /v1/review`: `scope` (a list), `order` (`age` | `corroboration`), `limit`, `cursor`. */
export type ReviewFilters = Query<"review_queue">;
/** A pending proposal as a reviewer sees it: its records, fact, evidence, corroborators and conflicts. */
export type ReviewEntry = Schemas["ReviewEntry"];
/** One page of the review queue; `next_cursor` is null on the last page. */
export type ReviewPage = Schemas["ReviewPage"];
/** One decision: `approve` (with `mode` beside a conflicting fact), `reject` or `amend` (with `record`). */
export type DecisionRequest = Schemas["DecisionRequest"];
/** `POST /v1/review:decide`: 1 to 1,000 decisions, each applied on its own. */
export type DecideRequest = Schemas["DecideRequest"];
/** One decision's outcome and the records it touched, or its error. */
export type DecisionResult = Schemas["DecisionResult"];
export type DecisionError = Schemas["DecisionError"];
/** Every decision's result, in input order. */
export type DecideResult = Schemas["DecideResult"];

// -- moving and forgetting (RFC 15) --

/** The query of `GET /v1/export`: `scope` and `type` (lists), `created_after`, `created_before`, `with_vectors`, `open_sealed`. */
export type ExportFilters = Query<"export">;
/** What an import wrote and what it left (RFC 15.2). */
export type ImportReport = Schemas["ImportReport"];
/** `POST /v1/erase`: one target (`scope`, `entity` or `records`), `reason`, and `dry_run: false` with the dry run's `confirm` to erase. */
export type ErasureRequest = Schemas["ErasureRequest"];
/** What an erasure removed, or its dry run would, by table, and the dry run's confirmation (RFC 15.4). */
export type ErasureResult = Schemas["ErasureResult"];
