/**
 * trace-context: the header lookup (exact name first, then case-insensitive), the edges of the
 * W3C `traceparent` form and of the `trace_id` mapping, the remote parent of a `trace_id`, and the
 * replay-bypass marker.
 */
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { header, isReplay, parseTraceparent, spanIdOf, otelTraceId, traceIdParent } from "../../src/observability/trace-context.js";

const hex = (text: string) => createHash("sha256").update(text).digest("hex");
const VALID = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

describe("header", () => {
  it("prefers the exact name, else the first name that matches case-insensitively and has a string value", () => {
    expect(header(undefined, "traceparent")).toBeUndefined();
    expect(header({}, "traceparent")).toBeUndefined();
    expect(header({ other: "x" }, "traceparent")).toBeUndefined();
    expect(header({ other: "x", traceparent: "exact" }, "traceparent")).toBe("exact");
    expect(header({ TraceParent: "mixed" }, "traceparent")).toBe("mixed");
    expect(header({ other: "x", TRACEPARENT: "upper" }, "traceparent")).toBe("upper");
    // the exact name wins over an earlier entry that only matches case-insensitively
    expect(header({ TRACEPARENT: "upper", traceparent: "exact" }, "traceparent")).toBe("exact");
    // a value that is not a string is skipped
    const odd = { TraceParent: 5, TRACEPARENT: "string" } as unknown as Record<string, string>;
    expect(header(odd, "traceparent")).toBe("string");
    const exactNotString = { traceparent: 5, TraceParent: "string" } as unknown as Record<string, string>;
    expect(header(exactNotString, "traceparent")).toBe("string");
    // only the header's own entries count, not the prototype's
    expect(header(Object.create({ traceparent: "inherited" }) as Record<string, string>, "traceparent")).toBeUndefined();
  });
});

describe("parseTraceparent", () => {
  it("is anchored at both ends", () => {
    expect(parseTraceparent(VALID)).toStrictEqual({ traceId: "0af7651916cd43dd8448eb211c80319c", spanId: "b7ad6b7169203331", traceFlags: 1, isRemote: true });
    expect(parseTraceparent(`x${VALID}`)).toBeUndefined();
    expect(parseTraceparent(`${VALID}x`)).toBeUndefined();
    expect(parseTraceparent(`${VALID.slice(0, -2)}00`)).toStrictEqual({ traceId: "0af7651916cd43dd8448eb211c80319c", spanId: "b7ad6b7169203331", traceFlags: 0, isRemote: true });
  });
});

describe("otelTraceId", () => {
  it("takes a string's own hex only when it is exactly 32 hex digits (dashes aside)", async () => {
    expect(await otelTraceId("A".repeat(32))).toBe("a".repeat(32));
    expect(await otelTraceId("a".repeat(33))).toBe(hex("a".repeat(33)).slice(0, 32));
    expect(await otelTraceId("a".repeat(31))).toBe(hex("a".repeat(31)).slice(0, 32));
    expect(await otelTraceId(`g${"a".repeat(32)}`)).toBe(hex(`g${"a".repeat(32)}`).slice(0, 32));
    expect(await otelTraceId(`${"a".repeat(32)}g`)).toBe(hex(`${"a".repeat(32)}g`).slice(0, 32));
  });
});

describe("traceIdParent", () => {
  it("is the mapped trace id, the deterministic span id, sampled and remote", async () => {
    expect(await traceIdParent("order-flow-42")).toStrictEqual({
      traceId: hex("order-flow-42").slice(0, 32),
      spanId: hex("babelqueue-span:order-flow-42").slice(0, 16),
      traceFlags: 1,
      isRemote: true,
    });
    expect(await spanIdOf("x")).toBe(hex("babelqueue-span:x").slice(0, 16));
  });
});

describe("isReplay", () => {
  it("is true for a non-empty bq-replay-bypass header, in any case", () => {
    expect(isReplay(undefined)).toBe(false);
    expect(isReplay({})).toBe(false);
    expect(isReplay({ "bq-replay-bypass": "" })).toBe(false);
    expect(isReplay({ "bq-replay-bypass": "1" })).toBe(true);
    expect(isReplay({ "BQ-Replay-Bypass": "yes" })).toBe(true);
  });
});
