/**
 * Small edges of three modules: the schema gate shows a value of exactly 24 characters whole (only a
 * longer one is shortened), `wrap` and `wrapResult` name themselves when they refuse an option, and
 * `messageTraceId` of null or undefined is `{}`, not a crash.
 */
import { describe, expect, it } from "vitest";
import { messageTraceId } from "../../src/envelope.js";
import { InvalidOptionError } from "../../src/errors.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { schemaVersionRejection } from "../../src/schema-gate.js";
import { wrap, wrapResult } from "../../src/wrap.js";
import { caught } from "../support/caught.js";

describe("schemaVersionRejection reason", () => {
  it("shows a value of exactly 24 characters whole, without the ellipsis", () => {
    expect(schemaVersionRejection("9".repeat(24))).toBe(
      `transport property bq-schema-version is "${"9".repeat(24)}"; only "1" is supported, so the body was not decoded`,
    );
    expect(schemaVersionRejection("9".repeat(25))).toBe(
      `transport property bq-schema-version is "${"9".repeat(24)}\\u2026"; only "1" is supported, so the body was not decoded`,
    );
  });
});

describe("wrap options", () => {
  it("an unknown option is an InvalidOptionError naming wrap, thrown when wrapping", () => {
    for (const wrapper of [wrap, wrapResult]) {
      const error = caught(() => wrapper(new InMemoryStore(), async () => {}, { leaseMS: 1 } as never));
      expect(error).toBeInstanceOf(InvalidOptionError);
      expect((error as InvalidOptionError).option).toBe("leaseMS");
      expect((error as InvalidOptionError).message).toBe('option "leaseMS" is not an option of wrap (did you mean "leaseMs"?)');
    }
  });
});

describe("messageTraceId", () => {
  it("is {} for null, undefined and a scalar, and the trace id of a message that has one", () => {
    expect(messageTraceId(null)).toEqual({});
    expect(messageTraceId(undefined)).toEqual({});
    expect(messageTraceId("t-1")).toEqual({});
    expect(messageTraceId({ trace_id: "t-1" })).toEqual({ traceId: "t-1" });
    expect(messageTraceId({ trace_id: "  " })).toEqual({});
  });
});
