// Run against a real server: LOCI_URL and LOCI_API_KEY (a read-write key of a tenant with a
// "conversations" and a "docs" knowledge base). tests/test_client_library.py starts one and runs this.
import assert from "node:assert/strict";
import { test } from "node:test";

import { BadRequest, Loci, LociError, NotFound, PermissionDenied } from "../dist/index.js";

const base = process.env.LOCI_URL;
const key = process.env.LOCI_API_KEY;
const skip = !base || !key ? "LOCI_URL and LOCI_API_KEY are not set" : false;

test("memories are added, flushed, found, edited and their history read", { skip }, async () => {
  const loci = new Loci(base, key);
  const added = await loci.memories.add("ts1", "s1", [
    { role: "user", content: "My parrot Kiwi whistles the Tetris theme.", timestamp: "2024-05-01T09:00:00Z" },
  ], { kb: "conversations" });
  assert.equal(added.kb, "conversations");
  const flushed = await loci.memories.flush("ts1", "s1", { kb: "conversations" });
  assert.equal(flushed.status, "extracted");
  assert.ok(flushed.job_id); // the server queued it (tests/test_client_library.py): wait polled the job
  assert.equal((await loci.memories.job(flushed.job_id)).status, "done");
  const queued = await loci.memories.add("ts1", "s2", [
    { role: "user", content: "My tortoise Dot eats dandelions.", timestamp: "2024-05-01T09:00:00Z" },
    { role: "assistant", content: "Dandelions are a good treat for Dot.", timestamp: "2024-05-01T09:01:00Z" },
  ], { kb: "conversations", wait: false });
  assert.equal(queued.status, "queued");
  const found = await loci.search("What does Kiwi whistle?", { filters: { user_id: "ts1" }, top_k: 5 });
  const fact = found.facts[0];
  assert.match(fact.atomic_fact, /Tetris/);
  assert.equal(found.query.filters_applied.user_id, "ts1");
  const edited = await loci.memories.update(fact.id, { text: "The user's parrot Kiwi whistles the Tetris theme." });
  assert.equal(edited.text, "The user's parrot Kiwi whistles the Tetris theme.");
  const history = await loci.memories.history(fact.id);
  assert.deepEqual(history.history.map((h) => h.event), ["ADD", "UPDATE"]);
  const records = await loci.export({ userId: "ts1" });
  assert.equal(records[0].type, "loci-export");
  assert.ok(records.some((r) => r.type === "memory" && r.user_id === "ts1"));
  assert.ok((await loci.memories.deleteUser("ts1")).deleted >= 2);
});

test("a document is uploaded, processed by the worker and read back", { skip }, async () => {
  const loci = new Loci(base, key, { kb: "docs" });
  const bytes = new TextEncoder().encode("The lighthouse keeper logs the tide at 06:10 every morning.\n");
  const upload = await loci.documents.upload(bytes, "lighthouse.txt", { contentType: "text/plain" });
  assert.equal(upload.duplicate, false);
  const document = await loci.documents.wait(upload.document.id, { timeoutMs: 300_000, intervalMs: 500 });
  assert.equal(document.status, "ready", document.error);
  const original = new Uint8Array(await loci.documents.original(document.id));
  assert.deepEqual(original, bytes);
  const listed = await loci.documents.list({ kb: "docs" });
  assert.ok(listed.results.some((d) => d.filename === "lighthouse.txt"));
  const kbs = await loci.knowledgeBases.list();
  assert.ok(kbs.map((kb) => kb.slug).includes("docs"));
});

test("error answers throw typed errors with the server's message", { skip }, async () => {
  const loci = new Loci(base, key);
  await assert.rejects(loci.memories.get("00000000-0000-0000-0000-000000000000"), (err) => {
    assert.ok(err instanceof NotFound && err instanceof LociError);
    assert.equal(err.status, 404);
    return true;
  });
  await assert.rejects(loci.search("x", { top_k: 1000 }), (err) => {
    assert.ok(err instanceof BadRequest);
    assert.match(err.message, /top_k/);
    assert.doesNotMatch(err.message, /error:/);
    return true;
  });
  const stranger = new Loci(base, "loci_000000000000_nope");
  await assert.rejects(stranger.knowledgeBases.list(), (err) => err.status === 401);
  if (process.env.LOCI_READ_KEY) {
    const reader = new Loci(base, process.env.LOCI_READ_KEY);
    await assert.rejects(reader.memories.add("ts2", "s", [{ content: "hi", timestamp: "2024-05-01T09:00:00Z" }]),
      (err) => err instanceof PermissionDenied);
  }
});
