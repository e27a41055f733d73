// The list calls (RFC 10.7) on a scripted fetch: how a query is written, how pages are
// followed, and what the client refuses to follow.
import assert from "node:assert/strict";
import { test } from "node:test";

import { MembraneClient, MembraneError, RevisionRefusedError } from "../dist/index.js";

const RECORD = {
  type: "episodic", scope: "s", sensitivity: "low", confidence: 1, salience: 1, status: "active",
};
const page = (ids, cursor) => ({
  records: ids.map((id) => ({ ...RECORD, id })),
  next_cursor: cursor,
  diagnostics: {
    returned: ids.length, bytes: 0, row_limit: 50, max_bytes: 1048576,
    row_limit_applied: cursor !== null, byte_limit_applied: false,
  },
});

/** A client whose fetch answers `answer(url, init)` as JSON and records every request. */
function scripted(answer) {
  const seen = [];
  const fetch = async (url, init) => {
    const parsed = new URL(url);
    seen.push({ url: parsed, init });
    return new Response(JSON.stringify(answer(parsed, init)), {
      status: 200, headers: { "content-type": "application/json" },
    });
  };
  return { seen, client: new MembraneClient({ baseUrl: "http://127.0.0.1:1", fetch }) };
}

test("a list's query repeats its list filters and leaves out the unset ones", async () => {
  const { seen, client } = scripted(() => page([], null));
  await client.listRecords({
    scope: ["a", "b"], type: ["semantic"], created_after: "2026-01-02T03:04:05Z", limit: 5, tag: null,
    subject: undefined,
  });
  await client.listRecords();
  const { searchParams, pathname } = seen[0].url;
  assert.equal(pathname, "/v1/records");
  assert.deepEqual(searchParams.getAll("scope"), ["a", "b"]);
  assert.deepEqual(searchParams.getAll("type"), ["semantic"]);
  assert.equal(searchParams.get("created_after"), "2026-01-02T03:04:05Z");
  assert.equal(searchParams.get("limit"), "5");
  assert.ok(!searchParams.has("tag") && !searchParams.has("subject") && !searchParams.has("cursor"));
  assert.equal(seen[1].url.search, "");
});

test("iterRecords follows next_cursor with the same filters, a page at a time", async () => {
  const pages = { "": page(["r1", "r2"], "c1"), c1: page(["r3", "r4"], "c2"), c2: page(["r5"], null) };
  const { seen, client } = scripted((url) => pages[url.searchParams.get("cursor") ?? ""]);
  const records = client.iterRecords({ scope: ["s"], limit: 2 });
  assert.equal(seen.length, 0, "fetched before the first record was asked for");
  const first = await records.next();
  assert.equal(first.value.id, "r1");
  assert.equal(seen.length, 1);
  const ids = ["r1"];
  for await (const record of records) ids.push(record.id);
  assert.deepEqual(ids, ["r1", "r2", "r3", "r4", "r5"]);
  assert.deepEqual(seen.map((r) => r.url.searchParams.get("cursor")), [null, "c1", "c2"]);
  assert.ok(seen.every((r) => r.url.searchParams.getAll("scope").join() === "s"));
  assert.ok(seen.every((r) => r.url.searchParams.get("limit") === "2"));

  // from a given cursor on, by pages
  const later = [];
  for await (const p of client.recordPages({ cursor: "c1" })) later.push(p.records.length);
  assert.deepEqual(later, [2, 1]);
});

test("a cursor that comes back unchanged is an error, not an endless loop", async () => {
  const { seen, client } = scripted(() => page(["r"], "same"));
  await assert.rejects(async () => {
    for await (const record of client.iterRecords()) void record;
  }, (err) => err instanceof MembraneError && err.code === "invalid_response");
  assert.equal(seen.length, 2);
});

test("iterOperations, lineage, work and scopes reach their routes", async () => {
  const { seen, client } = scripted((url) => {
    if (url.pathname === "/v1/operations") return { operations: [{ operation_id: "o1" }], next_cursor: null };
    if (url.pathname === "/v1/work:requeue") return { requeued: [7], unchanged: [8] };
    return {};
  });
  const ops = [];
  for await (const op of client.iterOperations({ kind: ["capture", "retract"], status: ["failed"] })) {
    ops.push(op.operation_id);
  }
  assert.deepEqual(ops, ["o1"]);
  await client.lineage("a b", { asOf: "2026-01-01T00:00:00Z" });
  await client.work({ kind: ["embed"], limit: 10 });
  const requeued = await client.requeueWork([7, 8]);
  await client.requeueWork({ ids: [9], rationale: "the provider is back" });
  await client.listScopes();
  const at = (i) => `${seen[i].init.method} ${seen[i].url.pathname}${seen[i].url.search}`;
  assert.equal(at(0), "GET /v1/operations?kind=capture&kind=retract&status=failed");
  assert.equal(at(1), "GET /v1/records/a%20b/lineage?as_of=2026-01-01T00%3A00%3A00Z");
  assert.equal(at(2), "GET /v1/work?kind=embed&limit=10");
  assert.equal(at(3), "POST /v1/work:requeue");
  assert.deepEqual(JSON.parse(seen[3].init.body), { ids: [7, 8] });
  assert.equal(seen[3].init.headers["idempotency-key"], undefined);
  assert.deepEqual(JSON.parse(seen[4].init.body), { ids: [9], rationale: "the provider is back" });
  assert.deepEqual(requeued, { requeued: [7], unchanged: [8] });
  assert.equal(at(5), "GET /v1/scopes");
});

test("the review queue's query, its pages and the decisions' bodies (RFC 5.7)", async () => {
  const entry = (id) => ({ proposal_id: id, scope: "s", proposed_by: "model" });
  const queue = { "": { entries: [entry("p1"), entry("p2")], next_cursor: "c1" },
                  c1: { entries: [entry("p3")], next_cursor: null } };
  const { seen, client } = scripted((url, init) => {
    if (url.pathname === "/v1/review") return queue[url.searchParams.get("cursor") ?? ""];
    const [first] = JSON.parse(init.body).decisions;
    const error = first.decision === "reject"
      ? { code: "revision_refused", message: "already approved", details: [] } : null;
    return { results: [{ proposal_id: first.proposal_id, outcome: error ? null : "approved", record_ids: [], error }] };
  });
  const ids = [];
  for await (const e of client.iterReview({ scope: ["a", "b"], order: "corroboration", limit: 2 })) {
    ids.push(e.proposal_id);
  }
  assert.deepEqual(ids, ["p1", "p2", "p3"]);
  assert.deepEqual(seen.map((r) => r.url.searchParams.get("cursor")), [null, "c1"]);
  assert.ok(seen.every((r) => r.url.searchParams.getAll("scope").join() === "a,b"));
  assert.ok(seen.every((r) => r.url.searchParams.get("order") === "corroboration"));

  const approved = await client.approve("p1", { mode: "beside", rationale: "seen it" });
  assert.equal(approved.outcome, "approved");
  await client.amend("p2", { object: "x" }, { evidence: [{ kind: "artifact", ref: "doc" }] });
  await assert.rejects(client.reject("p3"), (err) => err instanceof RevisionRefusedError && err.status === 200);
  const bodies = seen.slice(2).map((r) => JSON.parse(r.init.body));
  assert.deepEqual(bodies[0], { decisions: [
    { proposal_id: "p1", decision: "approve", mode: "beside", rationale: "seen it" }] });
  assert.deepEqual(bodies[1], { decisions: [
    { proposal_id: "p2", decision: "amend", record: { object: "x" }, evidence: [{ kind: "artifact", ref: "doc" }] }] });
  assert.deepEqual(bodies[2], { decisions: [{ proposal_id: "p3", decision: "reject" }] });
  assert.ok(seen.slice(2).every((r) => r.init.method === "POST" && r.url.pathname === "/v1/review:decide"));
  assert.ok(seen.every((r) => r.init.headers["idempotency-key"] === undefined));
});
