// Review (RFC 5.7) against a live Membrane API at MEMBRANE_REVIEW_URL, served with the keys
// below (tests/clients/test_typescript_client.py starts it); skipped when it is not set.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  ForbiddenError, InvalidInputError, MembraneClient, NotFoundError, RevisionRefusedError,
} from "../dist/index.js";

const baseUrl = process.env.MEMBRANE_REVIEW_URL;
const SCOPE = "ts-review";
const skip = baseUrl ? false : "MEMBRANE_REVIEW_URL is not set";
const live = (name, fn) => test(name, { skip }, fn);

const as = (apiKey) => new MembraneClient({ baseUrl: baseUrl || "http://127.0.0.1:1", apiKey, backoffMs: 50 });
// a model's key, whose writes are proposed; a trusted writer; a reviewer
const model = as("ts-model-key");
const writer = as("ts-writer-key");
const reviewer = as("ts-reviewer-key");

const fact = (subject, predicate, object) => ({
  source_kind: "observation", scope: SCOPE, content: { subject, predicate, object },
});

async function captured(client, body) {
  const op = await client.capture(body, { wait: 10 });
  assert.equal(op.status, "succeeded", JSON.stringify(op.error));
  return op;
}

/** The facts a retrieval returns, by id, with their status. */
async function facts(query, extra = {}) {
  const found = await writer.retrieve({
    query, scopes: [SCOPE], memory_types: ["semantic"], limit: 50, ...extra,
  });
  return Object.fromEntries(found.records.map((r) => [r.id, r.status]));
}

async function queued() {
  const ids = [];
  for await (const entry of reviewer.iterReview({ scope: [SCOPE] })) ids.push(entry.proposal_id);
  return ids;
}

live("a reviewed capture is retrievable only once a reviewer approves it", async () => {
  const trusted = await captured(writer, fact("ts-api", "runs_on", "Node 22"));
  assert.equal(trusted.result?.proposal_id ?? null, null);
  const kept = trusted.record_ids[1];
  const proposed = await captured(model, fact("ts-api", "deploys_to", "eu-west-1"));
  const proposal = proposed.result?.proposal_id;
  assert.equal(typeof proposal, "string");
  const [episode, factId] = proposed.record_ids;

  // hidden from retrieval; the trusted fact in the same answer is the control
  let seen = await facts("ts-api");
  assert.equal(seen[kept], "active");
  assert.equal(seen[factId], undefined);
  seen = await facts("ts-api", { include_proposed: true });
  assert.equal(seen[factId], "proposed");
  assert.equal((await writer.get(factId)).status, "proposed");

  const { entries, next_cursor } = await reviewer.reviewQueue({ scope: [SCOPE] });
  const entry = entries.find((e) => e.proposal_id === proposal);
  assert.ok(entry, JSON.stringify(entries.map((e) => e.proposal_id)));
  assert.equal(next_cursor ?? null, null);
  assert.equal(entry.proposed_by, "ts-model");
  assert.equal(entry.source, "capture");
  assert.equal(entry.fact?.id, factId);
  assert.ok(entry.records?.some((r) => r.id === episode));

  // only a reviewer decides: the proposer and a writer get 403, and nothing changes
  for (const refused of [model, writer]) {
    await assert.rejects(refused.approve(proposal),
      (err) => err instanceof ForbiddenError && err.status === 403);
    await assert.rejects(refused.reviewQueue(), (err) => err instanceof ForbiddenError);
  }
  assert.equal((await facts("ts-api"))[factId], undefined);

  const approved = await reviewer.approve(proposal, { rationale: "checked the deploy config" });
  assert.equal(approved.outcome, "approved");
  assert.ok(approved.record_ids?.includes(factId));
  seen = await facts("ts-api");
  assert.equal(seen[factId], "active");
  assert.equal(seen[kept], "active");
  assert.ok(!(await queued()).includes(proposal));
  const last = (await writer.audit(factId)).entries.at(-1);
  assert.deepEqual([last?.action, last?.actor], ["review", "ts-reviewer"]);

  await assert.rejects(reviewer.reject(proposal), (err) =>
    err instanceof RevisionRefusedError && err.code === "revision_refused" && /approved/.test(err.message));
});

live("reject, amend, a batch of decisions and the queue over two pages", async () => {
  const ops = [];
  for (const object of ["Perl 5", "team-paymnets", "Rust"]) {
    const predicate = object.startsWith("team") ? "owned_by" : `runs_on_${ops.length}`;
    ops.push(await captured(model, fact("ts-billing", predicate, object)));
  }
  const [wrong, typo, other] = ops.map((op) => op.result?.proposal_id);

  const first = await reviewer.reviewQueue({ scope: [SCOPE], limit: 2 });
  assert.equal(first.entries.length, 2);
  assert.ok(first.next_cursor);
  const pages = [];
  for await (const entry of reviewer.iterReview({ scope: [SCOPE], limit: 2 })) pages.push(entry.proposal_id);
  assert.deepEqual(pages.slice(0, 2), first.entries.map((e) => e.proposal_id));
  assert.deepEqual(new Set(pages), new Set([wrong, typo, other]));

  assert.equal((await reviewer.reject(wrong, { rationale: "a poisoned page" })).outcome, "rejected");
  assert.equal((await writer.get(ops[0].record_ids[1])).status, "retracted");

  const amended = await reviewer.amend(typo, { object: "team-payments" }, { rationale: "a typo" });
  assert.equal(amended.outcome, "amended");
  const replacement = await writer.get(amended.record_ids.at(-1));
  assert.equal(replacement.payload?.object, "team-payments");
  assert.equal(replacement.status, "active");

  const missing = "00000000-0000-4000-8000-000000000000";
  const { results } = await reviewer.decide([
    { proposal_id: missing, decision: "approve" },
    { proposal_id: other, decision: "approve", rationale: "batch" },
    { proposal_id: typo, decision: "reject" },
  ]);
  assert.deepEqual(results.map((r) => r.proposal_id), [missing, other, typo]);
  assert.deepEqual(results.map((r) => r.outcome ?? null), [null, "approved", null]);
  assert.deepEqual(results.map((r) => r.error?.code ?? null), ["not_found", null, "revision_refused"]);
  assert.equal((await writer.get(ops[2].record_ids[1])).status, "active");
  await assert.rejects(reviewer.approve(missing), (err) => err instanceof NotFoundError);
  await assert.rejects(reviewer.decide([]), (err) => err instanceof InvalidInputError);
  assert.deepEqual(await queued(), []);
});
