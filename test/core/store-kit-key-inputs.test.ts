/**
 * src/store-kit/keys.ts `storeKey`, the inputs the key tests leave out: an id that is not a string (a
 * typed error, not a crash in the hashing), and `hashNul`, which hashes exactly the ids that contain NUL
 * for backends whose text cannot hold it (PostgreSQL, D1) and changes nothing else.
 */
import { describe, expect, it } from "vitest";
import { InvalidOptionError } from "../../src/errors.js";
import { sha256Base64url, storeKey } from "../../src/store-kit/keys.js";
import { caughtAsync } from "../support/caught.js";

describe("storeKey inputs", () => {
  it("refuses an id that is not a string with an InvalidOptionError naming `id`", async () => {
    for (const id of [42, undefined, null, { id: "a" }]) {
      const error = await caughtAsync(() => storeKey("ns", id as never, 250));
      expect(error).toBeInstanceOf(InvalidOptionError);
      expect((error as InvalidOptionError).option).toBe("id");
      expect((error as InvalidOptionError).message).toBe('option "id" must be a string');
    }
  });

  it("with hashNul, keeps the hash of an id that contains NUL", async () => {
    const id = "order\u00001";
    const key = await storeKey("ns", id, 250, "bq:", { hashNul: true });
    expect(key).toBe(`bq:ns:#${await sha256Base64url(id)}`);
    expect(key).not.toContain("\u0000");
  });

  it("with hashNul, keeps an id without NUL verbatim; without it, keeps NUL verbatim", async () => {
    expect(await storeKey("ns", "order-1", 250, "bq:", { hashNul: true })).toBe("bq:ns:order-1");
    expect(await storeKey("ns", "order\u00001", 250, "bq:")).toBe("bq:ns:order\u00001");
    expect(await storeKey("ns", "order\u00001", 250, "bq:", { hashNul: false })).toBe("bq:ns:order\u00001");
  });
});
