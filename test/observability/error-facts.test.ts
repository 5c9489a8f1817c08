/**
 * errorFacts: exactly which facts of an error may be printed — a short identifier `code`, the
 * payload-free details of this package's own errors, an AWS SDK `$metadata.httpStatusCode`, the
 * cause's name and code — and, as strictly, which are left out (no key with an undefined value).
 */
import { describe, expect, it } from "vitest";
import { GroupBlockedError, InFlightError, InvalidMessageError, PayloadConflictError, StoreUnavailableError } from "../../src/errors.js";
import { errorFacts } from "../../src/observability/error-facts.js";

/** An Error with own fields, as a backend or a handler may throw it. */
const failure = (fields: Record<string, unknown>, name?: string) => Object.assign(new Error("secret message"), name === undefined ? {} : { name }, fields);

describe("errorFacts of a thrown non-object", () => {
  it("is its type; null is 'null'", () => {
    expect(errorFacts(null)).toStrictEqual({ name: "null" });
    expect(errorFacts(undefined)).toStrictEqual({ name: "undefined" });
    expect(errorFacts("boom")).toStrictEqual({ name: "string" });
    expect(errorFacts(42)).toStrictEqual({ name: "number" });
  });
});

describe("name", () => {
  it("is error.name when it is a short identifier, else 'Error'", () => {
    expect(errorFacts(new TypeError("x"))).toStrictEqual({ name: "TypeError" });
    expect(errorFacts(failure({}, "has spaces in it"))).toStrictEqual({ name: "Error" });
    expect(errorFacts(failure({}, ""))).toStrictEqual({ name: "Error" });
    expect(errorFacts(failure({ name: 7 }))).toStrictEqual({ name: "7" });
    expect(errorFacts({})).toStrictEqual({ name: "Error" });
  });

  it("is 'Error' when reading the name throws", () => {
    const hostile = Object.create(null, {
      name: {
        get() {
          throw new Error("trap");
        },
      },
    }) as object;
    expect(errorFacts(hostile)).toStrictEqual({ name: "Error" });
  });
});

describe("code", () => {
  it("keeps a short identifier or a finite number, nothing else", () => {
    expect(errorFacts(failure({ code: "ECONNREFUSED" }))).toStrictEqual({ name: "Error", code: "ECONNREFUSED" });
    expect(errorFacts(failure({ code: "a.b:c-d_9" }))).toStrictEqual({ name: "Error", code: "a.b:c-d_9" });
    expect(errorFacts(failure({ code: 404 }))).toStrictEqual({ name: "Error", code: "404" });
    for (const bad of [Number.POSITIVE_INFINITY, Number.NaN, "has space", "", "!!ABC", "ABC!!", "x".repeat(65), { toString: () => "X" }, true, null]) {
      expect(errorFacts(failure({ code: bad })), String(bad)).toStrictEqual({ name: "Error" });
    }
    expect(errorFacts(failure({ code: "x".repeat(64) }))).toStrictEqual({ name: "Error", code: "x".repeat(64) });
  });

  it("reads only own data properties: never a getter, never the prototype", () => {
    const getter = Object.defineProperty(new Error("x"), "code", {
      get() {
        return "FROM_GETTER";
      },
    });
    expect(errorFacts(getter)).toStrictEqual({ name: "Error" });
    const inherited = Object.create({ code: "INHERITED" }) as object;
    expect(errorFacts(inherited)).toStrictEqual({ name: "Error" });
  });
});

describe("this package's errors", () => {
  it("InvalidMessageError: its reason, cut to 200 characters; an empty reason is left out", () => {
    expect(errorFacts(new InvalidMessageError("no 'job'"))).toStrictEqual({ name: "InvalidMessageError", code: "INVALID_MESSAGE", reason: "no 'job'" });
    expect(errorFacts(new InvalidMessageError("r".repeat(200)))).toStrictEqual({ name: "InvalidMessageError", code: "INVALID_MESSAGE", reason: "r".repeat(200) });
    expect(errorFacts(new InvalidMessageError("r".repeat(201)))).toStrictEqual({ name: "InvalidMessageError", code: "INVALID_MESSAGE", reason: `${"r".repeat(200)}…` });
    expect(errorFacts(failure({ code: "INVALID_MESSAGE", reason: "" }))).toStrictEqual({ name: "Error", code: "INVALID_MESSAGE" });
    expect(errorFacts(failure({ code: "INVALID_MESSAGE", reason: 5 }))).toStrictEqual({ name: "Error", code: "INVALID_MESSAGE" });
    expect(errorFacts(failure({ code: "INVALID_MESSAGE" }))).toStrictEqual({ name: "Error", code: "INVALID_MESSAGE" });
  });

  it("StoreUnavailableError: store and operation when they are identifiers", () => {
    expect(errorFacts(new StoreUnavailableError("dynamodb", "claim", "down"))).toStrictEqual({
      name: "StoreUnavailableError",
      code: "STORE_UNAVAILABLE",
      store: "dynamodb",
      operation: "claim",
    });
    expect(errorFacts(failure({ code: "STORE_UNAVAILABLE" }))).toStrictEqual({ name: "Error", code: "STORE_UNAVAILABLE" });
    expect(errorFacts(failure({ code: "STORE_UNAVAILABLE", store: "a b", operation: "x y" }))).toStrictEqual({ name: "Error", code: "STORE_UNAVAILABLE" });
  });

  it("GroupBlockedError: its group", () => {
    expect(errorFacts(new GroupBlockedError("g-1"))).toStrictEqual({ name: "GroupBlockedError", code: "GROUP_BLOCKED", group: "g-1" });
    expect(errorFacts(failure({ code: "GROUP_BLOCKED" }))).toStrictEqual({ name: "Error", code: "GROUP_BLOCKED" });
  });

  it("PayloadConflictError: the state and both fingerprints", () => {
    expect(errorFacts(new PayloadConflictError("k", "in-flight", "fp-a", "fp-b"))).toStrictEqual({
      name: "PayloadConflictError",
      code: "PAYLOAD_CONFLICT",
      state: "in-flight",
      storedFingerprint: "fp-a",
      receivedFingerprint: "fp-b",
    });
    expect(errorFacts(failure({ code: "PAYLOAD_CONFLICT" }))).toStrictEqual({ name: "Error", code: "PAYLOAD_CONFLICT" });
    expect(errorFacts(failure({ code: "PAYLOAD_CONFLICT", received: "fp-only" }))).toStrictEqual({ name: "Error", code: "PAYLOAD_CONFLICT", receivedFingerprint: "fp-only" });
  });

  it("InFlightError: its retry delay when it is a finite number", () => {
    expect(errorFacts(new InFlightError("k", 1500))).toStrictEqual({ name: "InFlightError", code: "IN_FLIGHT", retryAfterMs: 1500 });
    expect(errorFacts(failure({ code: "IN_FLIGHT", retryAfterMs: Number.NaN }))).toStrictEqual({ name: "Error", code: "IN_FLIGHT" });
    expect(errorFacts(failure({ code: "IN_FLIGHT", retryAfterMs: "1500" }))).toStrictEqual({ name: "Error", code: "IN_FLIGHT" });
    expect(errorFacts(failure({ code: "IN_FLIGHT" }))).toStrictEqual({ name: "Error", code: "IN_FLIGHT" });
    // the details of one error kind are not read for another
    expect(errorFacts(failure({ code: "OTHER", retryAfterMs: 5, reason: "r", store: "s", group: "g", state: "done" }))).toStrictEqual({ name: "Error", code: "OTHER" });
  });
});

describe("AWS SDK metadata and the cause", () => {
  it("keeps an integer $metadata.httpStatusCode of a metadata object", () => {
    expect(errorFacts(failure({ $metadata: { httpStatusCode: 503, requestId: "r-1" } }, "ThrottlingException"))).toStrictEqual({
      name: "ThrottlingException",
      httpStatusCode: 503,
    });
    for (const metadata of [{ httpStatusCode: 503.5 }, { httpStatusCode: "503" }, {}, null, 503, Object.assign(() => undefined, { httpStatusCode: 500 })]) {
      expect(errorFacts(failure({ $metadata: metadata })), String(metadata)).toStrictEqual({ name: "Error" });
    }
  });

  it("keeps the cause's name and code, one level deep", () => {
    const cause = Object.assign(new Error("inner secret"), { name: "TimeoutError", code: "ETIMEDOUT", cause: new Error("deeper") });
    expect(errorFacts(new Error("outer", { cause }))).toStrictEqual({ name: "Error", cause: { name: "TimeoutError", code: "ETIMEDOUT" } });
    expect(errorFacts(new Error("outer", { cause: new RangeError("no code") }))).toStrictEqual({ name: "Error", cause: { name: "RangeError" } });
    expect(errorFacts(new Error("outer", { cause: null }))).toStrictEqual({ name: "Error" });
    expect(errorFacts(new Error("outer", { cause: "a string cause" }))).toStrictEqual({ name: "Error" });
    expect(errorFacts(new Error("outer"))).toStrictEqual({ name: "Error" });
  });
});
