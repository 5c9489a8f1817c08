/**
 * src/envelope.ts, pinned exactly: parseBody's answer for every kind of body, the `job`/`urn`
 * rules, the exact rejection reasons (the schema_version one renders each kind of value),
 * reconcileAttempts at its boundaries, `messageId`, and decoding as a property over generated
 * bodies (text, bytes, objects; hostile getters and proxies; `__proto__` keys).
 */
import fc from "fast-check";
import { afterEach, describe, expect, it, vi } from "vitest";
import { decodeEnvelope, messageId, parseBody, reconcileAttempts } from "../../src/envelope.js";

const base = () => ({
  job: "orders.created",
  trace_id: "t-1",
  data: { n: 1 },
  meta: { id: "m-1", schema_version: 1 },
  attempts: 0,
});

afterEach(() => {
  vi.restoreAllMocks();
});

describe("parseBody", () => {
  it("is 'body is empty' for undefined, null, an empty or blank text and empty bytes", () => {
    for (const body of [undefined, null, "", "   ", " \n\t\r ", new Uint8Array(0), new TextEncoder().encode("  \n")]) {
      expect(parseBody(body)).toEqual({ ok: false, reason: "body is empty" });
    }
  });

  it("passes an already-parsed value through, and parses text and bytes", () => {
    const object = { a: 1 };
    const parsed = parseBody(object);
    expect(parsed).toEqual({ ok: true, message: object });
    expect(parsed.ok && parsed.message).toBe(object);
    expect(parseBody(0)).toEqual({ ok: true, message: 0 });
    expect(parseBody(false)).toEqual({ ok: true, message: false });
    expect(parseBody(' {"a":[1]} ')).toEqual({ ok: true, message: { a: [1] } });
    expect(parseBody("null")).toEqual({ ok: true, message: null });
    expect(parseBody(new TextEncoder().encode("[1,2]"))).toEqual({ ok: true, message: [1, 2] });
    // A UTF-8 byte order mark is not part of the text.
    const withBom = new Uint8Array([0xef, 0xbb, 0xbf, ...new TextEncoder().encode('{"a":1}')]);
    expect(parseBody(withBom)).toEqual({ ok: true, message: { a: 1 } });
    expect(parseBody(withBom.buffer)).toEqual({ ok: true, message: { a: 1 } });
  });

  it("names what is wrong with text that is not JSON, bytes that are not UTF-8, or JSON too deep to parse", () => {
    expect(parseBody("{")).toEqual({ ok: false, reason: "body is not valid JSON" });
    expect(parseBody(new Uint8Array([0xff, 0xfe, 0x00]))).toEqual({ ok: false, reason: "body bytes are not valid UTF-8" });
    // Some runtimes' parsers overflow their stack on deep nesting (RangeError); V8's does not.
    vi.spyOn(JSON, "parse").mockImplementation(() => {
      throw new RangeError("Maximum call stack size exceeded");
    });
    expect(parseBody("[[[1]]]")).toEqual({ ok: false, reason: "body is nested too deeply" });
  });
});

describe("decodeEnvelope: job and urn", () => {
  it("takes urn as the job only when job is absent", () => {
    const { job: _job, ...rest } = base();
    const decoded = decodeEnvelope({ ...rest, urn: "urn:x" });
    expect(decoded).toEqual({ ok: true, message: { ...rest, urn: "urn:x", job: "urn:x" } });
    expect(decodeEnvelope({ ...base(), urn: "urn:x" })).toMatchObject({ ok: true, message: { job: "orders.created", urn: "urn:x" } });
  });

  it("takes urn as the job when job is null or empty, as BabelQueue's Node and Go consumers do", () => {
    for (const job of ["", null]) {
      expect(decodeEnvelope({ ...base(), job, urn: "urn:x" })).toMatchObject({ ok: true, message: { job: "urn:x", urn: "urn:x" } });
      expect(decodeEnvelope(JSON.stringify({ ...base(), job, urn: "urn:x" }))).toMatchObject({ ok: true, message: { job: "urn:x" } });
    }
  });

  it("rejects a job that is present but not a string, even with a good urn, and an empty or null job without one", () => {
    for (const job of [5, false, ["a"], {}]) {
      expect(decodeEnvelope({ ...base(), job, urn: "urn:x" })).toEqual({ ok: false, reason: "'job' must be a non-empty string" });
    }
    for (const job of ["", null]) {
      expect(decodeEnvelope({ ...base(), job })).toEqual({ ok: false, reason: "'job' must be a non-empty string" });
      expect(decodeEnvelope({ ...base(), job, urn: "" })).toEqual({ ok: false, reason: "'job' must be a non-empty string" });
    }
  });

  it("rejects a message with neither a job nor a non-empty string urn", () => {
    const { job: _job, ...rest } = base();
    for (const urn of [undefined, "", 5, null]) {
      expect(decodeEnvelope({ ...rest, urn })).toEqual({ ok: false, reason: "no 'job' or 'urn': the message has no identity" });
    }
  });
});

describe("decodeEnvelope: reasons", () => {
  it("rejects a trace_id that is not a non-blank string with the same reason, never a crash", () => {
    for (const trace_id of [undefined, 5, null, {}, ["t"], "", "  "]) {
      expect(decodeEnvelope({ ...base(), trace_id })).toEqual({ ok: false, reason: "'trace_id' must be a non-blank string" });
    }
  });

  it("renders a wrong schema_version briefly, whatever its kind", () => {
    const reason = (schema_version: unknown) => {
      const decoded = decodeEnvelope({ ...base(), meta: { id: "m", schema_version } });
      return decoded.ok ? "accepted" : decoded.reason;
    };
    expect(reason(undefined)).toBe("meta.schema_version is missing; only 1 is supported");
    expect(reason(2)).toBe("meta.schema_version is 2; only 1 is supported");
    expect(reason(1.5)).toBe("meta.schema_version is 1.5; only 1 is supported");
    expect(reason(true)).toBe("meta.schema_version is true; only 1 is supported");
    expect(reason(false)).toBe("meta.schema_version is false; only 1 is supported");
    expect(reason(null)).toBe("meta.schema_version is null; only 1 is supported");
    expect(reason("1")).toBe("meta.schema_version is a string; only 1 is supported");
    expect(reason([1])).toBe("meta.schema_version is a array; only 1 is supported");
    expect(reason({ v: 1 })).toBe("meta.schema_version is a object; only 1 is supported");
  });
});

describe("reconcileAttempts", () => {
  it("uses the body's count only when it is a safe integer above zero", () => {
    expect(reconcileAttempts(3, undefined)).toBe(3);
    expect(reconcileAttempts(0, undefined)).toBe(0);
    expect(reconcileAttempts(-1, undefined)).toBe(0);
    expect(reconcileAttempts(-1, 0)).toBe(0);
    expect(reconcileAttempts(1.5, undefined)).toBe(0);
    expect(reconcileAttempts(Number.NaN, undefined)).toBe(0);
    expect(reconcileAttempts(2 ** 53, undefined)).toBe(0);
  });

  it("takes the larger of the two, ignoring a missing or garbage native count", () => {
    expect(reconcileAttempts(2, 5)).toBe(5);
    expect(reconcileAttempts(5, 2)).toBe(5);
    expect(reconcileAttempts(0, 0)).toBe(0);
    expect(reconcileAttempts(-3, 4)).toBe(4);
    expect(reconcileAttempts(2, -5)).toBe(2);
    expect(reconcileAttempts(2, 7.5)).toBe(2);
    expect(reconcileAttempts(2, Number.POSITIVE_INFINITY)).toBe(2);
  });
});

const valid = () => ({
  job: "urn:babel:orders:created",
  trace_id: "7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b",
  data: { order_id: 1 },
  meta: { id: "m-1", queue: "orders", lang: "node", schema_version: 1, created_at: 1 },
  attempts: 0,
});

describe("decodeEnvelope: bodies of every form", () => {
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

  it("accepts negative attempts, as BabelQueue's Node and Go consumers do; reconciled, they count as 0", () => {
    const decoded = decodeEnvelope(JSON.stringify({ ...valid(), attempts: -1 }));
    expect(decoded).toMatchObject({ ok: true, message: { attempts: -1 } });
    expect(reconcileAttempts(-1, undefined)).toBe(0);
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

describe("reconcileAttempts, as the handlers use it", () => {
  it("takes the larger of the body and the native count, ignoring garbage", () => {
    expect(reconcileAttempts(0, 0)).toBe(0);
    expect(reconcileAttempts(0, 2)).toBe(2);
    expect(reconcileAttempts(5, 0)).toBe(5);
    expect(reconcileAttempts(4, Number.NaN)).toBe(4);
    expect(reconcileAttempts(3, undefined)).toBe(3);
    expect(reconcileAttempts(3, -1)).toBe(3);
  });
});
