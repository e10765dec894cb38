/**
 * Checking a webhook's `Loci-Signature` header in a receiver, with the Web Crypto API (Node 19+, browsers,
 * Deno, Bun, workers; on Node 18 set `globalThis.crypto = require("node:crypto").webcrypto` first).
 *
 * The server (webhooks/delivery.py) sends `Loci-Signature: t=<unix time>,v1=<hex HMAC-SHA256 of
 * "<t>.<raw body>" under the endpoint's secret>`; a receiver recomputes it over the raw body, as received,
 * and refuses an old `t`, so that a captured delivery cannot be replayed later.
 */

export const SIGNATURE_HEADER = "Loci-Signature";
/** Seconds a signature stays good either side of now: the server's own default, room for clock skew. */
export const DEFAULT_TOLERANCE_SECONDS = 300;

export interface VerifyOptions {
  toleranceSeconds?: number;
  /** Unix time in seconds (default: now). */
  now?: number;
}

/** True when `header` (the Loci-Signature value) signs the raw `body` under `secret`, made within the tolerance. */
export async function verifySignature(secret: string, header: string, body: string | Uint8Array,
                                      options: VerifyOptions = {}): Promise<boolean> {
  const fields = new Map<string, string>();
  for (const part of header.split(",")) {
    const at = part.indexOf("=");
    if (at >= 0) fields.set(part.slice(0, at).trim(), part.slice(at + 1).trim());
  }
  const timestamp = fields.get("t") ?? "";
  const given = fields.get("v1") ?? "";
  if (!/^[0-9]+$/.test(timestamp) || !/^[0-9a-f]{64}$/.test(given)) return false;
  const now = options.now ?? Date.now() / 1000;
  if (Math.abs(now - Number(timestamp)) > (options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS)) return false;
  const encoder = new TextEncoder();
  const raw = typeof body === "string" ? encoder.encode(body) : body;
  const prefix = encoder.encode(`${timestamp}.`);
  const signed = new Uint8Array(prefix.length + raw.length);
  signed.set(prefix);
  signed.set(raw, prefix.length);
  const mac = new Uint8Array(32);
  for (let i = 0; i < 32; i++) mac[i] = parseInt(given.slice(2 * i, 2 * i + 2), 16);
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" },
                                            false, ["verify"]);
  // verify() compares in constant time: the check leaks nothing of the expected MAC.
  return crypto.subtle.verify("HMAC", key, mac, signed);
}
