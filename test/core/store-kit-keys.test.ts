/**
 * src/store-kit/keys.ts, pinned exactly: the namespace check and its error, the SHA-256 in base64url (no
 * `+`, `/` or padding), which ids are kept verbatim (the byte limit is inclusive, lone surrogates
 * anywhere are hashed, a well-formed pair is not), and the room a key needs.
 */
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { InvalidOptionError } from "../../src/errors.js";
import { checkNamespace, keyPart, sha256Base64url, storeKey, utf8Length } from "../../src/store-kit/keys.js";
import { caught, caughtAsync } from "../support/caught.js";

const nodeSha = (text: string) => createHash("sha256").update(text, "utf8").digest("base64url");
/** How an ill-formed id is hashed: 0xFF, then the UTF-8 of its JSON escape. */
const illFormedSha = (id: string) => createHash("sha256").update(Buffer.from([0xff])).update(JSON.stringify(id), "utf8").digest("base64url");

describe("checkNamespace", () => {
  it("returns a valid namespace as is", () => {
    expect(checkNamespace("")).toBe("");
    expect(checkNamespace("orders/v2_A.b-c")).toBe("orders/v2_A.b-c");
    expect(checkNamespace("n".repeat(200))).toBe("n".repeat(200));
  });

  it("rejects a bad one with InvalidOptionError, option namespace and the rule in the message", () => {
    for (const bad of ["a:b", "n".repeat(201), "sp ace", "é", 42, null, undefined, ["a"]]) {
      const error = caught(() => checkNamespace(bad as string));
      expect(error).toBeInstanceOf(InvalidOptionError);
      expect(error).toMatchObject({
        code: "INVALID_OPTION",
        option: "namespace",
        message: `option "namespace" must be 0-200 characters of A-Z a-z 0-9 _ . - / (no ':', which separates namespace and id)`,
      });
    }
  });
});

describe("utf8Length", () => {
  it("counts UTF-8 bytes", () => {
    expect(utf8Length("")).toBe(0);
    expect(utf8Length("abc\u0000\u007f")).toBe(5);
    expect(utf8Length("é")).toBe(2);
    expect(utf8Length("a€")).toBe(4);
    expect(utf8Length("\ud83d\ude00")).toBe(4);
  });
});

describe("sha256Base64url", () => {
  it("is the SHA-256 of the UTF-8 text in base64url: '-' and '_' for '+' and '/', no padding", async () => {
    // These digests' plain base64 holds '+', '/' and a trailing '='.
    expect(await sha256Base64url("")).toBe("47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU");
    expect(await sha256Base64url("abc")).toBe("ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0");
    expect(await sha256Base64url("id-6")).toBe("w8cgorMFOg_cyBuXeQazqw4lSgrViOmMFMCwY3W92F0");
    for (const text of ["", "abc", "id-1", "id-7", "é😀", "x".repeat(500)]) {
      const digest = await sha256Base64url(text);
      expect(digest).toBe(nodeSha(text));
      expect(digest).toMatch(/^[A-Za-z0-9_-]{43}$/);
    }
  });

  it("hashes an ill-formed string through its JSON escape after a 0xFF byte, apart from the well-formed string of that escape", async () => {
    expect(await sha256Base64url("\ud800")).toBe(illFormedSha("\ud800"));
    expect(await sha256Base64url("\ud800")).not.toBe(await sha256Base64url(JSON.stringify("\ud800")));
  });
});

describe("keyPart", () => {
  it("keeps an id of up to maxIdBytes UTF-8 bytes verbatim, the limit included", async () => {
    expect(await keyPart("abc", 3)).toBe("abc");
    expect(await keyPart("abcd", 3)).toBe(`#${nodeSha("abcd")}`);
    expect(await keyPart("é", 2)).toBe("é");
    expect(await keyPart("é", 1)).toBe(`#${nodeSha("é")}`);
    expect(await keyPart("", 0)).toBe("");
  });

  it("hashes an id that begins with '#', but not one with '#' elsewhere", async () => {
    expect(await keyPart("#x", 100)).toBe(`#${nodeSha("#x")}`);
    expect(await keyPart("x#", 100)).toBe("x#");
  });

  it("keeps a well-formed surrogate pair and hashes a lone surrogate wherever it stands", async () => {
    const pair = "a\ud83d\ude00b";
    expect(await keyPart(pair, 100)).toBe(pair);
    expect(await keyPart("\ud83d\ude00", 100)).toBe("\ud83d\ude00");
    for (const lone of ["\ud800", "x\ud800", "\ud800x", "\udc00", "a\udc00", "\udc00a", "\ude00\ud83d", "\ud83d\ud83d"]) {
      expect(await keyPart(lone, 100)).toBe(`#${illFormedSha(lone)}`);
    }
  });

  it("never gives an ill-formed id the key of a long well-formed id that spells out its JSON escape", async () => {
    const lone = `\ud800${"x".repeat(600)}`;
    const spelled = JSON.stringify(lone); // 608 well-formed characters: hashed for its length
    expect(await storeKey("orders", lone, 512)).not.toBe(await storeKey("orders", spelled, 512));
    expect(await storeKey("orders", spelled, 512)).toBe(`orders:#${nodeSha(spelled)}`);
  });
});

describe("storeKey", () => {
  it("is prefix + namespace + ':' + the id part", async () => {
    expect(await storeKey("ns", "id-1", 100)).toBe("ns:id-1");
    expect(await storeKey("ns", "id-1", 100, "p/")).toBe("p/ns:id-1");
    expect(await storeKey("", "other:x", 100)).toBe(":other:x");
  });

  it("gives the id the bytes the head leaves, and never exceeds maxKeyBytes", async () => {
    // "ns:" is 3 bytes: 44 are left for the id.
    expect(await storeKey("ns", "x".repeat(44), 47)).toBe(`ns:${"x".repeat(44)}`);
    const hashed = await storeKey("ns", "x".repeat(45), 47);
    expect(hashed).toBe(`ns:#${nodeSha("x".repeat(45))}`);
    expect(hashed).toHaveLength(47);
    expect(await storeKey("ns", "é".repeat(22), 47, "")).toBe(`ns:${"é".repeat(22)}`);
    expect(await storeKey("ns", "é".repeat(23), 50, "pp/")).toBe(`pp/ns:#${nodeSha("é".repeat(23))}`);
  });

  it("throws InvalidOptionError when the head leaves fewer than 44 bytes for the id", async () => {
    const error = await caughtAsync(() => storeKey("ns", "id", 46));
    expect(error).toBeInstanceOf(InvalidOptionError);
    expect(error).toMatchObject({
      code: "INVALID_OPTION",
      option: "namespace",
      message: 'option "namespace" leaves no room for a key within 46 bytes',
    });
    await expect(storeKey("ns", "id", 53, "abcdefg")).rejects.toThrow('option "namespace" leaves no room for a key within 53 bytes');
    await expect(storeKey("ns", "id", 47)).resolves.toBe("ns:id");
    await expect(storeKey("ns", "id", 54, "abcdefg")).resolves.toBe("abcdefgns:id");
    // The head's bytes, not its characters, count.
    await expect(storeKey("ns", "id", 49, "é")).resolves.toBe("éns:id");
    await expect(storeKey("ns", "id", 48, "é")).rejects.toThrow(InvalidOptionError);
  });
});

describe("store keys, as stores use them", () => {
  it("keeps short ids verbatim and hashes long or '#'-leading ones to a fixed length", async () => {
    expect(await storeKey("ns", "abc", 100)).toBe("ns:abc");
    const long = await storeKey("ns", "x".repeat(5000), 100);
    expect(long).toMatch(/^ns:#[A-Za-z0-9_-]{43}$/);
    expect(await storeKey("ns", "#abc", 100)).toMatch(/^ns:#[A-Za-z0-9_-]{43}$/);
    expect(await storeKey("ns", "é".repeat(60), 100)).toMatch(/^ns:#/);
    expect(utf8Length(await storeKey("p/", "é".repeat(60), 100, "pre:"))).toBeLessThanOrEqual(100);
  });

  it("rejects a namespace with ':' or odd characters", () => {
    expect(() => checkNamespace("a:b")).toThrow(InvalidOptionError);
    expect(() => checkNamespace("a b")).toThrow(InvalidOptionError);
    expect(checkNamespace("orders-v2/eu")).toBe("orders-v2/eu");
  });
});
