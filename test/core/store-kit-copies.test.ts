/**
 * src/store-kit/copies.ts: a key decided once per step, its later copies sharing the answer — a copy
 * of a key the step just claimed answers in flight for the lease, any other answer is repeated.
 */
import { describe, expect, it } from "vitest";
import type { Claim } from "../../src/contract.js";
import { answerPerKey } from "../../src/store-kit/copies.js";

describe("answerPerKey", () => {
  it("the first copy gets the store's answer; a later copy of a claimed key is in flight for the lease", () => {
    const answers = new Map<string, Claim>([
      ["a", { status: "claimed", token: "t-a" }],
      ["b", { status: "done", fingerprint: "fp" }],
      ["c", { status: "in-flight", retryAfterMs: 7 }],
    ]);
    expect(answerPerKey(["a", "b", "a", "c", "b", "c", "a"], answers, 500)).toEqual([
      { status: "claimed", token: "t-a" },
      { status: "done", fingerprint: "fp" },
      { status: "in-flight", retryAfterMs: 500 },
      { status: "in-flight", retryAfterMs: 7 },
      { status: "done", fingerprint: "fp" },
      { status: "in-flight", retryAfterMs: 7 },
      { status: "in-flight", retryAfterMs: 500 },
    ]);
  });

  it("no keys, no answers", () => {
    expect(answerPerKey([], new Map(), 1)).toEqual([]);
  });
});
