// Against a live Membrane API at MEMBRANE_URL (tests/clients/test_typescript_client.py starts one);
// skipped when it is not set.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  IdempotencyConflictError, InvalidInputError, MembraneClient, MembraneError, NotFoundError,
} from "../dist/index.js";

const baseUrl = process.env.MEMBRANE_URL;
const SCOPE = "ts-client";
const fact = (object) => ({
  source_kind: "observation", scope: SCOPE,
  content: { subject: "acme-api", predicate: "runs_on", object },
});

async function objects(client) {
  const found = await client.retrieve({
    query: "acme-api runs on", scopes: [SCOPE], memory_types: ["semantic"],
  });
  return found.records.map((r) => r.payload?.object);
}

// Each test is skipped on its own, so a run without a server reports them as skipped.
const skip = baseUrl ? false : "MEMBRANE_URL is not set";
const live = (name, fn) => test(name, { skip }, fn);

const client = new MembraneClient({ baseUrl: baseUrl || "http://127.0.0.1:1", backoffMs: 50 });

live("capture, retrieve, supersede: only the replacement comes back", async () => {
  const captured = await client.wait(await client.capture(fact("Python 3.12")));
  assert.equal(captured.status, "succeeded", JSON.stringify(captured.error));
  const old = captured.record_ids[1];
  assert.equal((await client.get(old)).type, "semantic");
  assert.deepEqual(await objects(client), ["Python 3.12"]);

  const revised = await client.supersede(old, {
    record: { subject: "acme-api", predicate: "runs_on", object: "Python 3.13" },
    rationale: "the Dockerfile moved to 3.13", evidence: [{ kind: "artifact", ref: "Dockerfile" }],
  }, { wait: 10 });
  assert.equal(revised.status, "succeeded", JSON.stringify(revised.error));
  const replacement = revised.record_ids[0];
  assert.notEqual(replacement, old);

  assert.deepEqual(await objects(client), ["Python 3.13"]);
  assert.equal((await client.get(old)).status, "retracted");
  const now = await client.get(replacement);
  assert.equal(now.status, "active");
  assert.equal(now.payload?.object, "Python 3.13");
  const history = await client.audit(old);
  assert.equal(history.chain_valid, true);
  assert.ok(history.entries.some((e) => e.rationale === "the Dockerfile moved to 3.13"));
});

live("expand returns the graph around the roots", async () => {
  const op = await client.capture(fact("Python 3.12"), { wait: 10 });
  assert.equal(op.status, "succeeded");
  const found = await client.retrieve({ query: "acme-api", scopes: [SCOPE], expand: { hops: 1, max_nodes: 5 } });
  assert.ok(found.records.length >= 1);
  assert.ok(Array.isArray(found.neighbors) && Array.isArray(found.edges));
});

live("a write retried after a lost answer returns the same operation", async () => {
  const keys = [];
  let lost;
  const flaky = async (url, init) => {
    keys.push(init.headers["idempotency-key"]);
    const response = await fetch(url, init);
    if (lost === undefined) {
      lost = await response.json(); // the server accepted it; the caller never hears
      throw new TypeError("fetch failed");
    }
    return response;
  };
  const retrying = new MembraneClient({ baseUrl, backoffMs: 10, fetch: flaky });
  const body = { source_kind: "event", scope: SCOPE, content: { text: "deploy finished" } };
  const op = await retrying.capture(body);
  assert.equal(keys.length, 2);
  assert.equal(keys[1], keys[0]);
  assert.equal(op.operation_id, lost.operation_id);
  assert.equal(op.record_id, lost.record_id);

  // control: the same body under a new key is a new operation
  const fresh = await client.capture(body);
  assert.notEqual(fresh.operation_id, op.operation_id);
});

live("an explicit Idempotency-Key replays; another body under it conflicts", async () => {
  const body = { source_kind: "event", scope: SCOPE, content: { text: "tests passed" } };
  const first = await client.capture(body, { idempotencyKey: "ts-live-1" });
  const again = await client.capture(body, { idempotencyKey: "ts-live-1" });
  assert.equal(again.operation_id, first.operation_id);
  const other = await client.capture(body, { idempotencyKey: "ts-live-2" });
  assert.notEqual(other.operation_id, first.operation_id);
  const changed = { ...body, content: { text: "tests failed" } };
  await assert.rejects(client.capture(changed, { idempotencyKey: "ts-live-1" }), (err) =>
    err instanceof IdempotencyConflictError && err.status === 409 && err.code === "idempotency_conflict");
});

live("a batch replayed under its key returns the same operations", async () => {
  const captures = [1, 2, 3].map((i) => ({
    source_kind: "event", scope: SCOPE, content: { text: `step ${i}` },
  }));
  const first = await client.captureMany(captures, { chunkSize: 2, idempotencyKey: "ts-batch", wait: 10 });
  assert.equal(first.length, 3);
  assert.ok(first.every((op) => op.status === "succeeded"));
  const again = await client.captureMany(captures, { chunkSize: 2, idempotencyKey: "ts-batch" });
  assert.deepEqual(again.map((op) => op.operation_id), first.map((op) => op.operation_id));
  const other = await client.captureMany(captures, { chunkSize: 2, idempotencyKey: "ts-batch-2" });
  assert.equal(new Set([...other, ...first].map((op) => op.operation_id)).size, 6);
});

live("a 422 is an InvalidInputError naming the field; a 404 a NotFoundError", async () => {
  const calls = [];
  const counting = new MembraneClient({
    baseUrl, fetch: (url, init) => { calls.push(url); return fetch(url, init); },
  });
  await assert.rejects(counting.capture({ source_kind: "event", scope: "", content: { text: "x" } }), (err) => {
    assert.ok(err instanceof InvalidInputError && err instanceof MembraneError);
    assert.equal(err.code, "invalid_input");
    assert.equal(err.status, 422);
    assert.ok(err.details.some((d) => d.field === "scope"), JSON.stringify(err.details));
    return true;
  });
  assert.equal(calls.length, 1, "a 422 was retried");
  await assert.rejects(counting.get("00000000-0000-4000-8000-000000000000"), (err) => {
    assert.ok(err instanceof NotFoundError && !(err instanceof InvalidInputError));
    assert.equal(err.status, 404);
    return true;
  });
});

live("retract, reinforce, maintenance and metrics", async () => {
  const op = await client.capture(fact("Go 1.22"), { wait: 10 });
  const id = op.record_ids[1];
  assert.equal((await client.reinforce(id, {}, { wait: 10 })).status, "succeeded");
  const retracted = await client.retract(id, { rationale: "wrong service" });
  assert.equal((await client.wait(retracted)).status, "succeeded");
  assert.equal((await client.get(id)).status, "retracted");
  assert.equal((await client.runMaintenance(["decay"], { wait: 10 })).status, "succeeded");
  const metrics = await client.metrics();
  assert.equal(typeof metrics, "object");
});

live("records: a page, every page, filters and a superseded fact's lineage", async () => {
  const scope = `ts-lists-${crypto.randomUUID().slice(0, 8)}`;
  const captures = [1, 2, 3].map((i) => ({ source_kind: "event", scope, content: { text: `list ${i}` } }));
  const ops = await client.captureMany([...captures, { ...fact("Python 3.12"), scope }], { wait: 10 });
  assert.ok(ops.every((op) => op.status === "succeeded"), JSON.stringify(ops.map((op) => op.error)));
  const old = ops[3].record_ids[1];

  const first = await client.listRecords({ scope: [scope], limit: 2 });
  assert.equal(first.records.length, 2);
  assert.ok(first.next_cursor);
  assert.equal(first.diagnostics.row_limit_applied, true);
  const ids = [];
  for await (const record of client.iterRecords({ scope: [scope], limit: 2 })) ids.push(record.id);
  assert.equal(ids.length, 5);  // three episodes, the fact's episode and the fact
  assert.equal(new Set(ids).size, 5);
  assert.deepEqual(ids.slice(0, 2), first.records.map((r) => r.id));
  const facts = await client.listRecords({ scope: [scope], type: ["semantic"] });
  assert.deepEqual(facts.records.map((r) => r.id), [old]);
  await assert.rejects(client.listRecords({ type: ["gossip"] }), (err) => err instanceof InvalidInputError);

  const revised = await client.supersede(old, {
    record: { object: "Python 3.13" }, rationale: "the Dockerfile moved to 3.13",
    evidence: [{ kind: "artifact", ref: "Dockerfile" }],
  }, { wait: 10 });
  assert.equal(revised.status, "succeeded", JSON.stringify(revised.error));
  const lineage = await client.lineage(old);
  assert.deepEqual(lineage.edges.map((e) => [e.kind, e.source_id, e.target_id]),
                   [["supersedes", revised.record_ids[0], old]]);
  assert.equal(lineage.edges[0].rationale, "the Dockerfile moved to 3.13");
  const retracted = await client.listRecords({ scope: [scope], status: ["retracted"] });
  assert.deepEqual(retracted.records.map((r) => r.id), [old]);
  await assert.rejects(client.lineage("00000000-0000-4000-8000-000000000000"),
    (err) => err instanceof NotFoundError);
});

live("operations, scopes and the work queue", async () => {
  const scope = `ts-ops-${crypto.randomUUID().slice(0, 8)}`;
  const ops = await client.captureMany([1, 2].map((i) => ({
    source_kind: "event", scope, content: { text: `op ${i}` },
  })), { wait: 10 });
  const listed = [];
  for await (const op of client.iterOperations({ scope, kind: ["capture"], limit: 1 })) {
    listed.push(op.operation_id);
  }
  assert.deepEqual(listed, ops.map((op) => op.operation_id).reverse());  // newest first
  const page = await client.listOperations({ scope, limit: 1 });
  assert.equal(page.operations.length, 1);
  assert.equal(page.operations[0].principal, "development");

  const { scopes } = await client.listScopes();
  const mine = scopes.find((s) => s.scope === scope);
  assert.equal(mine?.records, 2);
  assert.equal(mine?.active, 2);

  const work = await client.work();
  assert.ok(Array.isArray(work.jobs) && Array.isArray(work.inbox) && Array.isArray(work.buried));
  assert.ok(work.jobs.some((job) => job.kind === "embed"), JSON.stringify(work.jobs));
  const requeued = await client.requeueWork([1_000_000_000]);
  assert.deepEqual(requeued, { requeued: [], unchanged: [1_000_000_000] });
});

live("export a scope as a tar, import it back, and erase it after a dry run (RFC 15)", async () => {
  const scope = "ts-transfer";
  const op = await client.capture({ source_kind: "event", scope, content: { text: "moved and forgotten" } }, { wait: 10 });
  assert.equal(op.status, "succeeded", JSON.stringify(op.error));
  const tar = await client.export({ scope: [scope] });
  assert.ok(tar instanceof Uint8Array && tar.length > 1024);
  assert.ok(new TextDecoder().decode(tar).includes("manifest.json"));

  const again = await client.importBundle(tar);  // the same store: every record is held
  assert.equal(again.records_written, 0);
  assert.equal(again.records_skipped, 1);
  await assert.rejects(client.importBundle(tar, { onConflict: "fail" }), (err) => err.status === 409);
  await assert.rejects(client.importBundle(new TextEncoder().encode("not a tar")), InvalidInputError);

  const dry = await client.erase({ scope, reason: "asked" });
  assert.equal(dry.dry_run, true);
  assert.equal(dry.counts.memory_records, 1);
  const done = await client.erase({ scope, reason: "asked", dry_run: false, confirm: dry.confirm });
  assert.equal(done.dry_run, false);
  await assert.rejects(client.get(op.record_ids[0]), NotFoundError);
});

live("a write's consistency token is kept, advances, and goes with the reads", async () => {
  const fresh = new MembraneClient({ baseUrl, backoffMs: 50 });
  assert.equal(fresh.consistencyToken, undefined);
  await fresh.capture(fact("Rust 1.80"), { wait: 10 });
  const first = fresh.consistencyToken;
  assert.match(first ?? "", /^[0-9A-F]{1,8}\/[0-9A-F]{1,8}$/);
  await fresh.capture(fact("Rust 1.81"), { wait: 10 });
  const [hi1, lo1] = first.split("/").map((x) => parseInt(x, 16));
  const [hi2, lo2] = fresh.consistencyToken.split("/").map((x) => parseInt(x, 16));
  assert.ok(hi2 > hi1 || (hi2 === hi1 && lo2 > lo1), `${first} then ${fresh.consistencyToken}`);
  // the server takes the token the client sends: a page and a retrieval answer as usual
  const found = await fresh.retrieve({ query: "acme-api runs on", scopes: [SCOPE] });
  assert.equal(found.diagnostics.served_by, "primary");
  const page = await fresh.listRecords({ scope: SCOPE });
  assert.equal(page.diagnostics.served_by, "primary");
});
