// Compile-time checks of the client's types (npm run typecheck): each @ts-expect-error
// must meet an error, so a type that stops refusing bad input fails the build.
import { InvalidInputError, MembraneClient, MembraneError } from "../src/index.js";
import type {
  DecideResult, DecisionResult, Lineage, OperationStatus, OperationSummary, OperationView, RecordPage,
  RecordView, RequeueResult, RetrieveResult, ReviewEntry, ReviewPage, WorkOverview,
} from "../src/index.js";

const client = new MembraneClient({ baseUrl: "http://127.0.0.1:1" });

export async function accepted(): Promise<void> {
  const op: OperationView = await client.capture(
    { source_kind: "observation", scope: "a", content: { subject: "s", predicate: "p", object: "o" } },
    { idempotencyKey: "k", wait: 5 });
  const status: "queued" | "running" | "succeeded" | "failed" = op.status;
  const again: OperationStatus = (await client.wait(op)).status;
  const record: RecordView = await client.get(op.operation_id, { asOf: "2026-01-01T00:00:00Z" });
  const state: "active" | "contested" | "retracted" | "proposed" = record.status;
  const found: RetrieveResult = await client.retrieve({ query: "q", expand: { hops: 1 } });
  const ids: string[] = found.records.map((r) => r.id);
  await client.supersede(record.id, { record: { subject: "s", predicate: "p", object: "o2" }, rationale: "r" });
  await client.retract(record.id, { rationale: "r" });
  await client.reinforce(record.id);
  await client.runMaintenance(["decay"]);
  await client.captureMany([{ source_kind: "event", scope: "a", content: { text: "t" } }], { chunkSize: 10 });
  void [status, again, state, ids];
}

export async function lists(): Promise<void> {
  const page: RecordPage = await client.listRecords({
    scope: ["a", "b"], type: ["semantic"], status: ["retracted"], max_sensitivity: "low", limit: 10,
  });
  const next: string | null | undefined = page.next_cursor;
  const cut: boolean = page.diagnostics.byte_limit_applied;
  for await (const record of client.iterRecords({ scope: ["a"] })) {
    const id: string = record.id;
    void id;
  }
  const chain: Lineage = await client.lineage("id", { asOf: "2026-01-01T00:00:00Z" });
  const kind: "supersedes" | "merged_into" | "forked_from" | "contests" | undefined = chain.edges[0]?.kind;
  for await (const op of client.iterOperations({ kind: ["capture"], status: ["failed"] })) {
    const summary: OperationSummary = op;
    void summary;
  }
  const work: WorkOverview = await client.work({ kind: ["embed"] });
  const buried: number[] = work.buried.map((item) => item.id);
  const result: RequeueResult = await client.requeueWork(buried);
  await client.requeueWork({ ids: buried, rationale: "the provider is back" });
  const scopes: string[] = (await client.listScopes()).scopes.map((s) => s.scope);
  void [next, cut, kind, result, scopes];
}

export async function review(): Promise<void> {
  const page: ReviewPage = await client.reviewQueue({ scope: ["a"], order: "corroboration", limit: 10 });
  const entry: ReviewEntry | undefined = page.entries[0];
  const conflicts: string[] = entry?.conflicts?.map((r) => r.id) ?? [];
  for await (const e of client.iterReview({ scope: ["a"] })) {
    const proposer: string = e.proposed_by;
    void proposer;
  }
  const found: RetrieveResult = await client.retrieve({ query: "q", include_proposed: true });
  const approved: DecisionResult = await client.approve("p", { mode: "beside", rationale: "checked" });
  const outcome: "approved" | "rejected" | "amended" | "expired" | null | undefined = approved.outcome;
  await client.reject("p", { rationale: "wrong" });
  await client.amend("p", { object: "o2" }, { rationale: "typo", evidence: [{ kind: "artifact", ref: "doc" }] });
  const all: DecideResult = await client.decide([
    { proposal_id: "p", decision: "approve", mode: "replace" },
    { proposal_id: "q", decision: "amend", record: { object: "o" } },
  ]);
  const errors: (string | undefined)[] = all.results.map((r) => r.error?.code);
  void [conflicts, found, outcome, errors];
}

export async function refused(): Promise<void> {
  // @ts-expect-error an unknown source kind
  await client.capture({ source_kind: "rumour", scope: "a", content: {} });
  // @ts-expect-error scope is required
  await client.capture({ source_kind: "event", content: {} });
  // @ts-expect-error limit is a number
  await client.retrieve({ limit: "ten" });
  // @ts-expect-error an unknown memory type
  await client.retrieve({ memory_types: ["gossip"] });
  // @ts-expect-error a supersede needs its rationale
  await client.supersede("id", { record: {} });
  // @ts-expect-error the filter is "scope", repeated: the server would ignore "scopes"
  await client.listRecords({ scopes: ["a"] });
  // @ts-expect-error an unknown memory type
  await client.listRecords({ type: ["gossip"] });
  // @ts-expect-error an unknown job
  await client.work({ kind: ["defrag"] });
  // @ts-expect-error work item ids are numbers
  await client.requeueWork(["1"]);
  // @ts-expect-error an unknown order of the review queue
  await client.reviewQueue({ order: "newest" });
  // @ts-expect-error the filter is "scope", repeated
  await client.reviewQueue({ scopes: ["a"] });
  // @ts-expect-error an approval's mode is replace or beside
  await client.approve("p", { mode: "overwrite" });
  // @ts-expect-error an unknown decision
  await client.decide([{ proposal_id: "p", decision: "defer" }]);
}

export function errors(err: unknown): string | undefined {
  if (err instanceof InvalidInputError) return err.details[0]?.field;
  if (err instanceof MembraneError) return `${err.code} ${err.status}`;
  return undefined;
}
