// A webhook's signature, checked as a receiver would. Needs no server: the vectors below were made by the
// server's own webhooks.delivery.sign; tests/test_webhook_verifiers.py runs this file with fresh ones
// (LOCI_WEBHOOK_SECRET, LOCI_WEBHOOK_VECTORS).
import assert from "node:assert/strict";
import { test } from "node:test";

import { verifySignature } from "../dist/index.js";

const T = 1717400000;
const BODY = '{"event":"memory.created","text":"Dana leads the Harbor project"}';
// sign("whsec_test-secret", 1717400000, BODY.encode())
const HEADER = "t=1717400000,v1=d229b25bb90cf666b81e09d40c0831388e6a129c7e41068ccbaa3d6a61c3e7da";
const secret = process.env.LOCI_WEBHOOK_SECRET ?? "whsec_test-secret";
const vectors = process.env.LOCI_WEBHOOK_VECTORS ? JSON.parse(process.env.LOCI_WEBHOOK_VECTORS) : [
  { name: "signed", header: HEADER, body: BODY, now: T + 10, accepted: true },
  { name: "another body", header: HEADER, body: BODY.replace("Harbor", "Harbour"), now: T + 10, accepted: false },
  { name: "too old", header: HEADER, body: BODY, now: T + 301, accepted: false },
  { name: "garbage", header: "hello", body: BODY, now: T, accepted: false },
];

test("a webhook's signature is accepted only for its body, its secret and its time", async () => {
  for (const v of vectors) {
    assert.equal(await verifySignature(secret, v.header, v.body, { now: v.now }), v.accepted, v.name);
    const bytes = new TextEncoder().encode(v.body);
    assert.equal(await verifySignature(secret, v.header, bytes, { now: v.now }), v.accepted, `${v.name} (bytes)`);
  }
});
