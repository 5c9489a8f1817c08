/**
 * src/store-kit/tokens.ts: a claim token is a non-empty string; anything else names no claim — its
 * release is a no-op (the store filters it out) and a transaction under it is a lost fence.
 */
import { describe, expect, it } from "vitest";
import { FenceLostError, InvalidOptionError } from "../../src/errors.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { fenceToken, heldClaims, isToken, tokenSource } from "../../src/store-kit/tokens.js";

const notTokens: unknown[] = ["", undefined, null, 0, 1, false, true, {}, [], ["t"]];

describe("isToken", () => {
  it("a non-empty string is a token, whatever its characters", () => {
    for (const token of ["t", " ", "0", "tok-1", "é"]) expect(isToken(token)).toBe(true);
  });

  it.each(notTokens.map((value) => [JSON.stringify(value) ?? String(value), value]))("%s is not", (_, value) => {
    expect(isToken(value)).toBe(false);
  });
});

describe("heldClaims", () => {
  it("keeps the claims with a token, in order, and drops the rest", () => {
    const claims = [
      { id: "a", token: "t-a" },
      { id: "b", token: "" },
      { id: "c", token: undefined as unknown as string },
      { id: "d", token: "t-d" },
      undefined as unknown as { id: string; token: string },
    ];
    expect(heldClaims(claims)).toEqual([
      { id: "a", token: "t-a" },
      { id: "d", token: "t-d" },
    ]);
  });

  it("keeps every claim when all hold a token (a new array, the input untouched)", () => {
    const claims = [{ id: "a", token: "x" }];
    const held = heldClaims(claims);
    expect(held).toEqual(claims);
    expect(held).not.toBe(claims);
  });
});

describe("fenceToken", () => {
  it("answers the token of a claim that holds one", () => {
    expect(fenceToken({ id: "a", token: "t-a" })).toBe("t-a");
  });

  it.each([
    ["an empty token", { id: "a", token: "" }, "a"],
    ["no token", { id: "b" } as unknown as { id: string; token: string }, "b"],
    ["no claim", undefined, "undefined"],
  ])("%s is a lost fence naming the id", (_, claim, key) => {
    let thrown: unknown;
    try {
      fenceToken(claim);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(FenceLostError);
    expect((thrown as FenceLostError).key).toBe(key);
    expect((thrown as FenceLostError).code).toBe("FENCE_LOST");
  });
});

describe("tokenSource (every store's token option)", () => {
  it("the fallback when none is given; a given generator's tokens as drawn", () => {
    const fallback = () => "fallback";
    expect(tokenSource(undefined, fallback)).toBe(fallback);
    let n = 0;
    const drawn = tokenSource(() => `t-${(n += 1)}`, fallback);
    expect([drawn(), drawn()]).toEqual(["t-1", "t-2"]);
  });

  it("refuses a generator that is not a function, and each drawn value that is not a token", () => {
    expect(() => tokenSource("abc", () => "x")).toThrow(InvalidOptionError);
    for (const value of notTokens) {
      const bad = tokenSource(() => value, () => "x");
      expect(() => bad(), JSON.stringify(value) ?? String(value)).toThrow(InvalidOptionError);
    }
  });

  it("a store's claim under a generator of empty tokens fails typed, and holds nothing", async () => {
    expect(() => new InMemoryStore({ token: "abc" as unknown as () => string })).toThrow(InvalidOptionError);
    const store = new InMemoryStore({ token: () => "" });
    await expect(store.claim("x")).rejects.toBeInstanceOf(InvalidOptionError);
    expect(await store.inspect("x")).toBeNull();
  });
});
