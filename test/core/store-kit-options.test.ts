/**
 * src/store-kit/options.ts, how near a typo must be for `checkOptions` to suggest the option it meant:
 * within a quarter of the key's length in edits (at least one), counting every character of the key.
 */
import { describe, expect, it } from "vitest";
import { InvalidOptionError } from "../../src/errors.js";
import { checkOptions, optionKeys } from "../../src/store-kit/options.js";
import { caught } from "../support/caught.js";

interface Windows {
  readonly leaseMs?: number;
  readonly retentionMs?: number;
}
const keys = optionKeys<Windows>({ leaseMs: true, retentionMs: true });

function refusal(options: object): string {
  const error = caught(() => checkOptions(options as Windows, keys, "S"));
  expect(error).toBeInstanceOf(InvalidOptionError);
  return (error as InvalidOptionError).message;
}

describe("checkOptions suggestions", () => {
  it("allows two edits in a key of 8 or more characters", () => {
    expect(refusal({ retentonMsx: 1 })).toBe('option "retentonMsx" is not an option of S (did you mean "retentionMs"?)');
  });

  it("allows one edit in a short key", () => {
    expect(refusal({ leaseM: 1 })).toBe('option "leaseM" is not an option of S (did you mean "leaseMs"?)');
    // Two edits from "leaseMs" (a 6-character key allows one): no suggestion, the list instead.
    expect(refusal({ leasMx: 1 })).toBe('option "leasMx" is not an option of S (its options: leaseMs, retentionMs)');
  });

  it("counts every character of the key, its last one included", () => {
    // Four edits from "retentionMs" (two substitutions, two extra characters at the end); a 13-character key allows three.
    expect(refusal({ rxtxntionMsyz: 1 })).toBe('option "rxtxntionMsyz" is not an option of S (its options: leaseMs, retentionMs)');
  });
});

describe("checkOptions, two options equally near", () => {
  it("suggests the first one listed", () => {
    const error = caught(() => checkOptions({ a: 1 } as object, new Set(["ab", "ac"]) as never, "T"));
    expect((error as InvalidOptionError).message).toBe('option "a" is not an option of T (did you mean "ab"?)');
    const reversed = caught(() => checkOptions({ a: 1 } as object, new Set(["ac", "ab"]) as never, "T"));
    expect((reversed as InvalidOptionError).message).toBe('option "a" is not an option of T (did you mean "ac"?)');
  });
});
