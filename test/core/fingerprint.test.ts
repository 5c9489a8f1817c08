/**
 * src/fingerprint.ts, pinned exactly: the canonical JSON of every kind of value, the hash's exact
 * output (stored fingerprints must stay comparable across versions and SDKs), what the default
 * fingerprint hashes for a non-record message, and how `fingerprintOf` settles each answer.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MAX_FINGERPRINT_LENGTH } from "../../src/contract.js";
import { canonicalJson, defaultFingerprint, fingerprintOf, fingerprintsDiffer, hash128, phpStableJson } from "../../src/fingerprint.js";

describe("canonicalJson", () => {
  it("renders scalars as JSON.stringify does, non-finite numbers as null", () => {
    expect(canonicalJson(null)).toBe("null");
    expect(canonicalJson(true)).toBe("true");
    expect(canonicalJson(false)).toBe("false");
    expect(canonicalJson("a\"b")).toBe('"a\\"b"');
    expect(canonicalJson(1.5)).toBe("1.5");
    expect(canonicalJson(Number.NaN)).toBe("null");
    expect(canonicalJson(Number.POSITIVE_INFINITY)).toBe("null");
    expect(canonicalJson([Number.NEGATIVE_INFINITY, null, 0])).toBe("[null,null,0]");
    expect(canonicalJson({ a: null, b: Number.NaN })).toBe('{"a":null,"b":null}');
  });

  it("sorts object keys at every depth", () => {
    expect(canonicalJson({ b: 1, a: { d: [2, { z: 1, y: 2 }], c: "x" } })).toBe('{"a":{"c":"x","d":[2,{"y":2,"z":1}]},"b":1}');
  });

  it("skips undefined, functions and symbols in objects, renders them null in arrays, and has no form for them alone", () => {
    const skipped = { a: undefined, b: () => 1, c: Symbol("s"), d: 1 };
    expect(canonicalJson(skipped)).toBe('{"d":1}');
    expect(canonicalJson([undefined, () => 1, Symbol("s"), 1])).toBe("[null,null,null,1]");
    expect(canonicalJson(undefined)).toBeUndefined();
    expect(canonicalJson(() => 1)).toBeUndefined();
    expect(canonicalJson(Symbol("s"))).toBeUndefined();
    // Same as JSON.stringify, key order aside.
    expect(canonicalJson(skipped)).toBe(JSON.stringify(skipped));
  });

  it("has no form for a BigInt, at any depth", () => {
    expect(canonicalJson(1n)).toBeUndefined();
    expect(canonicalJson({ a: 1, b: 2n })).toBeUndefined();
    expect(canonicalJson([1, [2n]])).toBeUndefined();
  });

  it("uses toJSON, and canonicalises what it returns", () => {
    expect(canonicalJson(new Date(0))).toBe('"1970-01-01T00:00:00.000Z"');
    expect(canonicalJson({ at: new Date(0) })).toBe('{"at":"1970-01-01T00:00:00.000Z"}');
    expect(canonicalJson({ toJSON: () => ({ y: 1, x: [2] }) })).toBe('{"x":[2],"y":1}');
  });

  it("has no form for a cycle, but renders the same object twice when it is shared, not cyclic", () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    expect(canonicalJson(cyclic)).toBeUndefined();
    const loop: unknown[] = [1];
    loop.push(loop);
    expect(canonicalJson(loop)).toBeUndefined();

    const shared = { v: 1 };
    expect(canonicalJson({ a: shared, b: shared })).toBe('{"a":{"v":1},"b":{"v":1}}');
    expect(canonicalJson([shared, [shared]])).toBe('[{"v":1},[{"v":1}]]');
  });
});

describe("hash128", () => {
  it("is exactly the same hash it always was: 22 base64url characters", () => {
    expect(hash128("")).toBe("7TJ-706u8nTH5hq4LH4w-A");
    expect(hash128("a")).toBe("SyMevQUmMbRIaHD3JGowBA");
    expect(hash128("hello")).toBe("TKCaTHlN4v9gqVDmmbGH9g");
    expect(hash128('{"data":{},"job":"j"}')).toBe("VxIhbEjcoZ2wcTO2ayib9A");
    expect(hash128("x".repeat(1000))).toBe("flj7kEPwZSs43--xK1AhaA");
    expect(hash128("\u00e9\ud83d\ude00")).toBe("zP1SqpwWsV2EA9pzn9mEnA");
  });
});

describe("defaultFingerprint", () => {
  it("is h1: + the hash of the canonical { job, data }, whatever else the envelope carries", () => {
    const message = { job: "email.send", data: { to: "a@b.c", n: 1 } };
    expect(defaultFingerprint(message)).toBe("h1:Tn3zP0v4KmZ5_t5MqT6zjQ");
    expect(defaultFingerprint({ attempts: 3, meta: { id: "x" }, data: { n: 1, to: "a@b.c" }, job: "email.send" })).toBe(
      "h1:Tn3zP0v4KmZ5_t5MqT6zjQ",
    );
    expect(defaultFingerprint({ job: "j", data: { a: [1] } })).toBe(`h1:${hash128('{"data":{"a":[1]},"job":"j"}')}`);
  });

  it("is h2: + the hash of the PHP-stable form when the payload holds {} or [] or an object keyed 0…n-1", () => {
    const php = `h2:${hash128('{"data":[],"job":"j"}')}`;
    expect(defaultFingerprint({ job: "j", data: {} })).toBe(php);
    expect(defaultFingerprint({ job: "j", data: [] })).toBe(php);
    const lists = `h2:${hash128('{"data":{"a":["x","y"],"b":[[]]},"job":"j"}')}`;
    expect(defaultFingerprint({ job: "j", data: { b: [{}], a: { 0: "x", 1: "y" } } })).toBe(lists);
    expect(defaultFingerprint({ job: "j", data: { b: [[]], a: ["x", "y"] } })).toBe(lists);
    expect(defaultFingerprint({ job: "j", data: { b: [{}], a: { 1: "y", 0: "x" } } })).toBe(lists); // the same object in JS
    // Not PHP lists: keys with a gap, not from 0, or not in canonical integer form; they stay objects, and h1:.
    expect(defaultFingerprint({ job: "j", data: { 0: "x", 2: "y" } })).toBe(`h1:${hash128('{"data":{"0":"x","2":"y"},"job":"j"}')}`);
    expect(defaultFingerprint({ job: "j", data: { 1: "y" } })).toBe(`h1:${hash128('{"data":{"1":"y"},"job":"j"}')}`);
    expect(defaultFingerprint({ job: "j", data: { "00": "x" } })).toBe(`h1:${hash128('{"data":{"00":"x"},"job":"j"}')}`);
    expect(defaultFingerprint({ job: "j", data: { 0: "x", a: 1 } })).toBe(`h1:${hash128('{"data":{"0":"x","a":1},"job":"j"}')}`);
    // An empty job object is payload too.
    expect(defaultFingerprint({ job: {}, data: 1 })).toBe(`h2:${hash128('{"data":1,"job":[]}')}`);
    // A skipped value in a PHP list is null, as in an array.
    expect(defaultFingerprint({ job: "j", data: { 0: undefined, 1: 1 } })).toBe(`h2:${hash128('{"data":[null,1],"job":"j"}')}`);
  });

  it("phpStableJson: canonicalJson with PHP's lists, and whether it met one", () => {
    expect(phpStableJson({ b: [{}], a: { 0: "x", 1: "y" } })).toStrictEqual({ text: '{"a":["x","y"],"b":[[]]}', listed: true });
    expect(phpStableJson({ 0: undefined, 1: () => 1 })).toStrictEqual({ text: "[null,null]", listed: true });
    expect(phpStableJson([])).toStrictEqual({ text: "[]", listed: true });
    expect(phpStableJson({ b: 1, a: [2] })).toStrictEqual({ text: '{"a":[2],"b":1}', listed: false });
    expect(phpStableJson({ "00": 1, 1: 2 })).toStrictEqual({ text: '{"00":1,"1":2}', listed: false });
    expect(phpStableJson(1)).toStrictEqual({ text: "1", listed: false });
    expect(phpStableJson({ n: 1n })).toBeUndefined();
  });

  it("treats a message that is not a plain record as the data of one", () => {
    expect(defaultFingerprint(null)).toBe("h1:1788_2lPEKWfWHDJTagBTQ");
    expect(defaultFingerprint({ data: null })).toBe("h1:1788_2lPEKWfWHDJTagBTQ");
    expect(defaultFingerprint([1, 2])).toBe("h1:7rWFYjuRWvdoSDQpP8wEkA");
    expect(defaultFingerprint({ data: [1, 2] })).toBe("h1:7rWFYjuRWvdoSDQpP8wEkA");
    expect(defaultFingerprint("x")).toBe("h1:mWbbGG0oK9XC-BNhjNGzqA");
    expect(defaultFingerprint({ data: "x" })).toBe("h1:mWbbGG0oK9XC-BNhjNGzqA");
    expect(defaultFingerprint(7)).toBe(`h1:${hash128('{"data":7}')}`);
    // A record with neither field is the canonical "{}".
    expect(defaultFingerprint({})).toBe("h1:4uPDyLlqVF_-qgIWjH5vSQ");
    expect(defaultFingerprint({})).toBe(`h1:${hash128("{}")}`);
  });

  it("hashes while walking exactly the canonical JSON canonicalJson builds: random values of every kind", () => {
    const values = fc.anything({
      withBigInt: true,
      withBoxedValues: true,
      withDate: true,
      withMap: true,
      withNullPrototype: true,
      withObjectString: true,
      withSparseArray: true,
      withTypedArray: true,
      withUnicodeString: true,
    });
    const expected = (message: unknown) => {
      const record = typeof message === "object" && message !== null && !Array.isArray(message) ? (message as Record<string, unknown>) : { data: message };
      const canonical = canonicalJson({ job: record.job, data: record.data });
      const php = phpStableJson({ job: record.job, data: record.data });
      if (canonical === undefined || php === undefined || php.text === undefined) return undefined;
      // Without a PHP list anywhere, the PHP-stable text is canonicalJson's: every h1: value stays.
      if (!php.listed) expect(php.text).toBe(canonical);
      return php.listed ? `h2:${hash128(php.text)}` : `h1:${hash128(canonical)}`;
    };
    fc.assert(
      fc.property(fc.oneof(values, fc.record({ job: values, data: values }, { requiredKeys: [] })), (message) => {
        expect(defaultFingerprint(message)).toBe(expected(message));
      }),
      { numRuns: 2_000 },
    );
    // Strings that need escaping, lone surrogates, toJSON, holes, and objects of more than 16 keys.
    const many = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`k${(i * 7919) % 40}`, i]));
    const holey = [1, 2, 3];
    delete holey[1];
    for (const data of [{ s: 'q"\\\n\u0001\ud800x\udc00\ud83d\ude00' }, holey, { at: new Date(0), n: { toJSON: () => undefined } }, many, { "": 1, a: -0 }]) {
      expect(defaultFingerprint({ job: "j", data })).toBe(expected({ job: "j", data }));
    }
  });

  it("has none for a payload without a JSON form (a BigInt, a cycle)", () => {
    expect(defaultFingerprint({ job: "j", data: { n: 1n } })).toBeUndefined();
    const data: Record<string, unknown> = {};
    data.self = data;
    expect(defaultFingerprint({ job: "j", data })).toBeUndefined();
    expect(defaultFingerprint(2n)).toBeUndefined();
  });
});

describe("fingerprintOf", () => {
  it("has none without a fingerprinter", () => {
    expect(fingerprintOf(undefined, { job: "j" })).toBeUndefined();
  });

  it("keeps an answer of up to 64 characters verbatim and hashes a longer one down", () => {
    expect(MAX_FINGERPRINT_LENGTH).toBe(64);
    expect(fingerprintOf(() => "f", 1)).toBe("f");
    expect(fingerprintOf(() => "y".repeat(64), 1)).toBe("y".repeat(64));
    expect(fingerprintOf(() => "y".repeat(65), 1)).toBe("f:Ue4FE4HWWnwkLR_pQFoXZg");
    expect(fingerprintOf(() => "y".repeat(65), 1)).toBe(`f:${hash128("y".repeat(65))}`);
  });

  it("passes the message to the fingerprinter", () => {
    expect(fingerprintOf((message: { id: string }) => `fp-${message.id}`, { id: "7" })).toBe("fp-7");
  });

  it("means none for an empty string, a non-string or a throw", () => {
    expect(fingerprintOf(() => "", 1)).toBeUndefined();
    expect(fingerprintOf(() => 42 as unknown as string, 1)).toBeUndefined();
    expect(fingerprintOf(() => null as unknown as string, 1)).toBeUndefined();
    expect(fingerprintOf(() => ({ length: 3 }) as unknown as string, 1)).toBeUndefined();
    expect(
      fingerprintOf(() => {
        throw new Error("boom");
      }, 1),
    ).toBeUndefined();
  });

  it("settles an asynchronous answer the same way, a rejection as none", async () => {
    expect(fingerprintOf(async () => "f", 1)).toBeInstanceOf(Promise);
    await expect(fingerprintOf(async () => "f", 1)).resolves.toBe("f");
    await expect(fingerprintOf(async () => "", 1)).resolves.toBeUndefined();
    await expect(fingerprintOf(async () => "y".repeat(65), 1)).resolves.toBe("f:Ue4FE4HWWnwkLR_pQFoXZg");
    await expect(fingerprintOf(() => Promise.reject(new Error("boom")), 1)).resolves.toBeUndefined();
  });
});

describe("fingerprintsDiffer", () => {
  const h1 = (c: string) => `h1:${c.repeat(22)}`;
  const h2 = (c: string) => `h2:${c.repeat(22)}`;

  // Two plain strings, and a side without one: test/engine/conflicts.test.ts.
  it("matches when neither side has one", () => {
    expect(fingerprintsDiffer(undefined, undefined)).toBe(false);
  });

  it("compares hashes of one version, and never hashes of two versions (a deploy that changes the default hash)", () => {
    expect(fingerprintsDiffer(h1("A"), h1("B"))).toBe(true);
    expect(fingerprintsDiffer(h2("A"), h2("B"))).toBe(true);
    expect(fingerprintsDiffer(h1("A"), h1("A"))).toBe(false);
    expect(fingerprintsDiffer(h1("A"), h2("B"))).toBe(false);
    expect(fingerprintsDiffer(h2("B"), h1("A"))).toBe(false);
    expect(fingerprintsDiffer(`h10:${"A".repeat(22)}`, `h100:${"B".repeat(22)}`)).toBe(false);
    expect(fingerprintsDiffer(`h100:${"A".repeat(22)}`, `h100:${"B".repeat(22)}`)).toBe(true);
  });

  it("never compares a hash with a fingerprint function's answer (a deploy that turns a fingerprint function on or off)", () => {
    expect(fingerprintsDiffer(h1("A"), "v1")).toBe(false);
    expect(fingerprintsDiffer("v1", h2("A"))).toBe(false);
    // Two answers of a fingerprint function are compared as strings.
    expect(fingerprintsDiffer("v1", "v2")).toBe(true);
  });

  it("reads only the exact hash form as a hash: anything near it is a function's answer, so not compared with a hash of its version", () => {
    // Near the form but not in it: 21 or 23 characters, a character outside base64url, a suffix or prefix, an upper-case H.
    // Read as a hash, each would be compared with the h1 / h2 hash beside it (and differ).
    expect(fingerprintsDiffer(`h2:${"A".repeat(21)}`, h2("B"))).toBe(false);
    expect(fingerprintsDiffer(`h2:${"A".repeat(23)}`, h2("B"))).toBe(false);
    expect(fingerprintsDiffer(`h2:${"A".repeat(21)}+`, h2("B"))).toBe(false);
    expect(fingerprintsDiffer(h1("A"), `h1:${"A".repeat(21)}=`)).toBe(false);
    expect(fingerprintsDiffer(h1("A"), `${h1("B")}\n`)).toBe(false);
    expect(fingerprintsDiffer(h1("A"), `x${h1("B")}`)).toBe(false);
    expect(fingerprintsDiffer(h1("A"), `H1:${"B".repeat(22)}`)).toBe(false);
    // A version 0 or of four digits is no version: two such strings are compared as strings.
    expect(fingerprintsDiffer(`h0:${"A".repeat(22)}`, `h0:${"B".repeat(22)}`)).toBe(true);
    expect(fingerprintsDiffer(`h1000:${"A".repeat(22)}`, h1("A"))).toBe(false);
  });

  it("the default fingerprint is in the hash form; an over-long answer hashed down stays a function's answer", () => {
    const print = defaultFingerprint({ job: "j", data: { x: 1 } }) as string;
    expect(fingerprintsDiffer(print, h1("Z"))).toBe(true);
    expect(fingerprintsDiffer(print, h2("Z"))).toBe(false);
    const long = fingerprintOf(() => "y".repeat(65), 1) as string;
    expect(fingerprintsDiffer(long, h1("Z"))).toBe(false);
    expect(fingerprintsDiffer(long, fingerprintOf(() => "z".repeat(65), 1) as string)).toBe(true);
  });
});
