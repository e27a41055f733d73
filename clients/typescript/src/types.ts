/** Names for the shapes of the API, from the generated `schema.ts` (the server's OpenAPI). */
import type { components } from "./schema.js";

type Schemas = components["schemas"];

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
