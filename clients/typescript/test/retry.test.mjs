// Retries against a scripted HTTP server on 127.0.0.1: what is retried, how long the client
// waits, and what it never retries.
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer } from "node:http";
import { after, before, test } from "node:test";

import {
  ConnectionFailedError, EncryptionKeyUnavailableError, InvalidInputError, MembraneClient, OperationTimeoutError, RateLimitedError,
  ServerError, UnavailableError, chunkKey, parseRetryAfter,
} from "../dist/index.js";

const OPERATION = {
  operation_id: "7d1c3c5e-8f64-4b0e-9a43-0c2f8f0b6a11", kind: "capture", status: "queued",
  record_ids: [], created_at: "2026-01-01T12:00:00Z",
};
const error = (code, message, details = []) => ({ error: { code, message, details } });
const UNAVAILABLE = error("unavailable", "postgres unavailable");

// Each test queues the answers; every request is logged with its arrival time.
let script = [];
let seen = [];
const server = createServer((req, res) => {
  let body = "";
  req.on("data", (chunk) => { body += chunk; });
  req.on("end", () => {
    seen.push({ at: performance.now(), method: req.method, url: req.url, headers: req.headers, body });
    const next = script.shift() ?? { status: 500, body: error("internal", "script ran out") };
    if (next.drop) {
      req.socket.destroy();
      return;
    }
    if (next.hang) return; // never answers
    res.writeHead(next.status, { "content-type": "application/json", ...next.headers });
    res.end(JSON.stringify(next.body));
  });
});
let baseUrl;

before(async () => {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  baseUrl = `http://127.0.0.1:${server.address().port}`;
});
after(() => {
  server.closeAllConnections();
  server.close();
});

function client(options = {}) {
  script = [];
  seen = [];
  return new MembraneClient({ baseUrl, backoffMs: 10, ...options });
}

const CAPTURE = { source_kind: "event", scope: "retry-tests", content: { text: "hello" } };

test("a 503 is retried after its Retry-After, with the same Idempotency-Key", async () => {
  const c = client();
  script = [{ status: 503, headers: { "retry-after": "1" }, body: UNAVAILABLE }, { status: 202, body: OPERATION }];
  const op = await c.capture(CAPTURE);
  assert.equal(op.operation_id, OPERATION.operation_id);
  assert.equal(seen.length, 2);
  const gap = seen[1].at - seen[0].at;
  assert.ok(gap >= 990, `retried after ${gap} ms, before the Retry-After of 1 s`);
  assert.ok(gap < 3000, `retried after ${gap} ms`);
  const keys = seen.map((r) => r.headers["idempotency-key"]);
  assert.match(keys[0], /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.equal(keys[1], keys[0]);
});

test("control: a 503 without Retry-After is retried after the short backoff only", async () => {
  const c = client();
  script = [{ status: 503, body: UNAVAILABLE }, { status: 200, body: { records: [] } }];
  await c.retrieve({ query: "x" });
  assert.equal(seen.length, 2);
  assert.ok(seen[1].at - seen[0].at < 500, "the second attempt came late");
});

test("429, a dropped connection and 503 are all retried; the given key is kept", async () => {
  const c = client();
  script = [
    { status: 429, headers: { "retry-after": "0" }, body: error("too_many_requests", "slow down") },
    { drop: true },
    { status: 503, body: UNAVAILABLE },
    { status: 202, body: OPERATION },
  ];
  const op = await c.capture(CAPTURE, { idempotencyKey: "mine-1" });
  assert.equal(op.status, "queued");
  assert.deepEqual(seen.map((r) => r.headers["idempotency-key"]), ["mine-1", "mine-1", "mine-1", "mine-1"]);
});

test("retries are bounded: the last 503 is thrown as UnavailableError", async () => {
  const c = client({ maxRetries: 2 });  // three attempts
  script = Array.from({ length: 5 }, () => ({ status: 503, headers: { "retry-after": "0" }, body: UNAVAILABLE }));
  await assert.rejects(c.metrics(), (err) => {
    assert.ok(err instanceof UnavailableError);
    assert.equal(err.code, "unavailable");
    assert.equal(err.status, 503);
    assert.equal(err.retryAfterMs, 0);
    return true;
  });
  assert.equal(seen.length, 3);
});

test("a missing encryption key is thrown at once; an outage's 503 in the same run is retried", async () => {
  const c = client();
  script = [
    { status: 503, headers: { "retry-after": "0" }, body: UNAVAILABLE },
    { status: 503, headers: { "retry-after": "60" }, body: error("encryption_key_unavailable", "key k1 is not in the ring") },
    { status: 200, body: { records: [] } },
  ];
  await assert.rejects(c.retrieve({ query: "x" }), (err) => {
    assert.ok(err instanceof EncryptionKeyUnavailableError && err instanceof UnavailableError);
    assert.equal(err.retryAfterMs, 60000);
    return true;
  });
  assert.equal(seen.length, 2);  // the outage was retried once, the key not at all
});

test("a pause is capped at maxBackoffMs, whatever the Retry-After", async () => {
  const c = client({ maxBackoffMs: 300 });
  script = [{ status: 503, headers: { "retry-after": "120" }, body: UNAVAILABLE },
            { status: 202, body: OPERATION }];
  await c.capture(CAPTURE);
  assert.equal(seen.length, 2);
  const gap = seen[1].at - seen[0].at;
  assert.ok(gap >= 290 && gap < 2000, `retried after ${gap} ms`);
});

test("errors are typed by code, then by status", async () => {
  const c = client({ maxRetries: 0 });
  script = [{ status: 429, body: error("rate_limited", "slow down") }, { status: 502, body: "<html>" },
            { status: 409, body: error("some_new_conflict", "?") }];
  await assert.rejects(c.metrics(), RateLimitedError);
  await assert.rejects(c.metrics(), (err) => err instanceof ServerError && err.status === 502);
  await assert.rejects(c.metrics(), { name: "ConflictError", code: "some_new_conflict" });
});

test("other 4xx are never retried", async () => {
  const c = client();
  script = [
    { status: 422, body: error("invalid_input", "bad", [{ field: "scope", message: "empty", type: "x" }]) },
    { status: 202, body: OPERATION },
  ];
  await assert.rejects(c.capture(CAPTURE), InvalidInputError);
  assert.equal(seen.length, 1);
  script = [{ status: 409, body: error("idempotency_conflict", "other body") }, { status: 202, body: OPERATION }];
  seen = [];
  await assert.rejects(c.capture(CAPTURE), { name: "IdempotencyConflictError", status: 409 });
  assert.equal(seen.length, 1);
});

test("an unreachable server is a ConnectionFailedError after the retries", async () => {
  const closed = createServer();
  closed.listen(0, "127.0.0.1");
  await once(closed, "listening");
  const port = closed.address().port;
  closed.close();
  await once(closed, "close");
  const c = new MembraneClient({ baseUrl: `http://127.0.0.1:${port}`, maxRetries: 1, backoffMs: 1 });
  await assert.rejects(c.operation("x"), (err) => err instanceof ConnectionFailedError && err.status === 0);
});

test("a batch is sent in chunks keyed from the caller's key and the chunk's index", async () => {
  const c = client();
  const ops = (n) => ({
    operations: Array.from({ length: n }, (_, i) => ({ ...OPERATION, operation_id: `op-${i}` })),
  });
  script = [{ status: 202, body: ops(2) }, { status: 202, body: ops(1) }];
  const all = await c.captureMany([CAPTURE, CAPTURE, CAPTURE],
                                  { chunkSize: 2, idempotencyKey: "nightly", wait: 2 });
  assert.equal(all.length, 3);
  assert.deepEqual(seen.map((r) => r.headers["idempotency-key"]),
                   [chunkKey("nightly", 0), chunkKey("nightly", 1)]);
  assert.notEqual(chunkKey("nightly", 0), chunkKey("nightly", 1));
  assert.deepEqual(seen.map((r) => JSON.parse(r.body).captures.length), [2, 1]);
  assert.ok(seen.every((r) => r.url === "/v1/captures:batch?wait=2"));
});

test("Retry-After: seconds or an HTTP date", () => {
  assert.equal(parseRetryAfter("3"), 3000);
  assert.equal(parseRetryAfter(new Date(10_000).toUTCString(), 4000), 6000);
  assert.equal(parseRetryAfter(null), undefined);
  assert.equal(parseRetryAfter("soon"), undefined);
});

test("the API key is sent as a bearer token; reads carry no Idempotency-Key", async () => {
  const c = client({ apiKey: "secret-key" });
  script = [{ status: 200, body: OPERATION }];
  await c.operation(OPERATION.operation_id);
  assert.equal(seen[0].headers.authorization, "Bearer secret-key");
  assert.equal(seen[0].headers["idempotency-key"], undefined);
});

test("an attempt that gets no answer times out and is retried", async () => {
  const c = client({ timeoutMs: 100, maxRetries: 1 });
  script = [{ hang: true }, { hang: true }];
  await assert.rejects(c.operation("x"),
    (err) => err instanceof ConnectionFailedError && /timed out/.test(err.message));
  assert.equal(seen.length, 2);
});

test("the caller's signal stops the retries at once", async () => {
  const c = client();
  script = [{ status: 503, headers: { "retry-after": "5" }, body: UNAVAILABLE }, { status: 202, body: OPERATION }];
  const started = performance.now();
  await assert.rejects(c.capture(CAPTURE, { signal: AbortSignal.timeout(100) }), { name: "TimeoutError" });
  assert.ok(performance.now() - started < 2000, "waited out the Retry-After despite the signal");
  assert.equal(seen.length, 1);
});

test("wait polls until the operation finished, or throws OperationTimeoutError", async () => {
  const c = client();
  script = [{ status: 200, body: OPERATION }, { status: 200, body: { ...OPERATION, status: "running" } },
            { status: 200, body: { ...OPERATION, status: "succeeded", record_ids: ["r1"] } }];
  const done = await c.wait(OPERATION.operation_id, { intervalMs: 5 });
  assert.equal(done.status, "succeeded");
  assert.equal(seen.length, 3);
  assert.ok(seen.every((r) => r.url === `/v1/operations/${OPERATION.operation_id}`));

  script = Array.from({ length: 50 }, () => ({ status: 200, body: OPERATION }));
  await assert.rejects(c.wait(OPERATION, { timeoutMs: 150, intervalMs: 10 }),
    (err) => err instanceof OperationTimeoutError && err.operation.status === "queued");
});
