/**
 * src/envelope.ts, pinned exactly: parseBody's answer for every kind of body, the `job`/`urn`
 * rules, the exact rejection reasons (the schema_version one renders each kind of value), and
 * reconcileAttempts at its boundaries.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { decodeEnvelope, parseBody, reconcileAttempts } from "../../src/envelope.js";

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

  it("rejects a job that is present but not a non-empty string, even with a good urn", () => {
    for (const job of ["", 5, null, false, ["a"]]) {
      expect(decodeEnvelope({ ...base(), job, urn: "urn:x" })).toEqual({ ok: false, reason: "'job' must be a non-empty string" });
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
