import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeEnvelope, messageId, parseBody, reconcileAttempts } from "../../src/envelope.js";
import { checkNamespace, storeKey, utf8Length } from "../../src/store-kit/keys.js";
import { InvalidOptionError } from "../../src/errors.js";

const valid = () => ({
  job: "urn:babel:orders:created",
  trace_id: "7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b",
  data: { order_id: 1 },
  meta: { id: "m-1", queue: "orders", lang: "node", schema_version: 1, created_at: 1 },
  attempts: 0,
});

describe("decodeEnvelope", () => {
  it("accepts a valid envelope as text, bytes, ArrayBuffer and object", () => {
    const text = JSON.stringify(valid());
    const bytes = new TextEncoder().encode(text);
    for (const body of [text, bytes, bytes.buffer, valid(), Buffer.from(text)]) {
      const decoded = decodeEnvelope(body);
      expect(decoded.ok).toBe(true);
    }
  });

  it("does not mutate a parsed input and copies urn into job", () => {
    const input = { ...valid(), job: undefined as unknown as string, urn: "urn:x" };
    delete (input as Record<string, unknown>).job;
    const decoded = decodeEnvelope(input);
    expect(decoded.ok && decoded.message.job).toBe("urn:x");
    expect("job" in input).toBe(false);
  });

  const rejections: [string, unknown, RegExp][] = [
    ["empty string", "", /empty/],
    ["null", null, /empty/],
    ["bad JSON", "{not json", /not valid JSON/],
    ["invalid UTF-8", new Uint8Array([0xff, 0xfe, 0x7b]), /UTF-8/],
    ["array", "[1,2]", /not a JSON object/],
    ["number", 42, /not a JSON object/],
    ["no identity", { ...valid(), job: undefined }, /'job' or 'urn'/],
    ["empty job", { ...valid(), job: "" }, /'job' must be/],
    ["job not a string", { ...valid(), job: 7 }, /'job' must be/],
    ["meta missing", { ...valid(), meta: undefined }, /'meta'/],
    ["meta an array", { ...valid(), meta: [] }, /'meta'/],
    ["schema_version 2", { ...valid(), meta: { ...valid().meta, schema_version: 2 } }, /schema_version is 2/],
    ["schema_version '1'", { ...valid(), meta: { ...valid().meta, schema_version: "1" } }, /schema_version is a string/],
    ["schema_version missing", { ...valid(), meta: { id: "x" } }, /schema_version is missing/],
    ["blank trace_id", { ...valid(), trace_id: "  " }, /trace_id/],
    ["data null", { ...valid(), data: null }, /'data'/],
    ["data an array", { ...valid(), data: [] }, /'data'/],
    ["attempts fractional", { ...valid(), attempts: 1.5 }, /attempts/],
    ["attempts negative", { ...valid(), attempts: -1 }, /attempts/],
    ["attempts missing", { ...valid(), attempts: undefined }, /attempts/],
    ["deep nesting", "[".repeat(200_000) + "]".repeat(200_000), /nested too deeply|not a JSON object/],
  ];
  for (const [name, body, reason] of rejections) {
    it(`rejects ${name} with a reason`, () => {
      const decoded = decodeEnvelope(body);
      expect(decoded.ok).toBe(false);
      if (!decoded.ok) expect(decoded.reason).toMatch(reason);
    });
  }

  it("treats __proto__ as an ordinary key and never pollutes prototypes", () => {
    const text = `{"__proto__":{"polluted":true},"job":"urn:x","trace_id":"t","data":{"__proto__":{"polluted":true}},"meta":{"id":"i","schema_version":1,"__proto__":{"polluted":true}},"attempts":0}`;
    const decoded = decodeEnvelope(text);
    expect(decoded.ok).toBe(true);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    if (decoded.ok) {
      expect(Object.getPrototypeOf(decoded.message)).toBe(Object.prototype);
      expect((decoded.message as Record<string, unknown>).polluted).toBeUndefined();
    }
  });

  it("survives hostile getters and proxies", () => {
    const getter = Object.defineProperty(valid(), "job", { get: () => { throw new Error("boom"); }, enumerable: true });
    expect(decodeEnvelope(getter).ok).toBe(false);
    const proxy = new Proxy(valid(), { getOwnPropertyDescriptor: () => { throw new Error("boom"); } });
    expect(decodeEnvelope(proxy)).toEqual({ ok: false, reason: "body could not be read as an object" });
  });

  it("never throws, whatever the body (property)", () => {
    fc.assert(
      fc.property(fc.oneof(fc.anything(), fc.string(), fc.json(), fc.uint8Array()), (body) => {
        const decoded = decodeEnvelope(body);
        expect(typeof decoded.ok).toBe("boolean");
      }),
      { numRuns: 2_000 },
    );
  });

  it("reads meta.id only when it is a non-empty string", () => {
    for (const [id, expected] of [["abc", "abc"], ["", undefined], [7, undefined], [null, undefined], [undefined, undefined]] as const) {
      const decoded = decodeEnvelope({ ...valid(), meta: { ...valid().meta, id } });
      expect(decoded.ok && messageId(decoded.message)).toBe(expected);
    }
  });

  it("parseBody leaves non-JSON-text objects as they are", () => {
    const object = { a: 1 };
    expect(parseBody(object)).toEqual({ ok: true, message: object });
  });
});

describe("reconcileAttempts", () => {
  it("takes the larger of the body and the native count, ignoring garbage", () => {
    expect(reconcileAttempts(0, 0)).toBe(0);
    expect(reconcileAttempts(0, 2)).toBe(2);
    expect(reconcileAttempts(5, 0)).toBe(5);
    expect(reconcileAttempts(4, Number.NaN)).toBe(4);
    expect(reconcileAttempts(3, undefined)).toBe(3);
    expect(reconcileAttempts(3, -1)).toBe(3);
  });
});

describe("store keys", () => {
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
