/**
 * src/store-kit/failures.ts, pinned exactly: which driver codes and HTTP statuses are shown, the
 * wording `Name[: message][ (CODE)][ (HTTP n)][ (retryable)]`, what is cut, scrubbed and truncated
 * from a backend's message, the scrubbed copy kept as `cause`, and the `StoreUnavailableError` a
 * store throws (prefix, suffix, typed errors passed through).
 */
import { describe, expect, it } from "vitest";
import { InvalidOptionError, PartialStepError, StoreUnavailableError } from "../../src/errors.js";
import { MAX_FAILURE_DETAIL, describeFailure, errorCode, httpStatus, scrubbedError, storeFailure, throwStepFailures } from "../../src/store-kit/failures.js";

/** An error as a driver throws it: a message plus whatever fields the driver adds. */
function driverError(message: string, fields: Record<string, unknown> = {}, options?: { cause?: unknown }): Error {
  return Object.assign(new Error(message, options), fields);
}

describe("errorCode", () => {
  it("returns a driver code or a SQLSTATE", () => {
    expect(errorCode(driverError("x", { code: "ECONNREFUSED" }))).toBe("ECONNREFUSED");
    expect(errorCode({ code: "42P01" })).toBe("42P01");
    expect(errorCode({ code: "NOSCRIPT" })).toBe("NOSCRIPT");
  });

  it("accepts 2 to 40 upper-case letters, digits and underscores, nothing else", () => {
    expect(errorCode({ code: "AB" })).toBe("AB");
    expect(errorCode({ code: "A".repeat(40) })).toBe("A".repeat(40));
    expect(errorCode({ code: "A" })).toBeUndefined();
    expect(errorCode({ code: "A".repeat(41) })).toBeUndefined();
    expect(errorCode({ code: "econnrefused" })).toBeUndefined();
    // A "code" that is a sentence (and could quote anything) is not shown, even if it ends like a code.
    expect(errorCode({ code: "connect ECONNREFUSED" })).toBeUndefined();
    expect(errorCode({ code: "ECONNREFUSED at 10.0.0.1" })).toBeUndefined();
  });

  it("returns undefined for a numeric code, no code, or a value that is not an object", () => {
    expect(errorCode({ code: 503 })).toBeUndefined();
    expect(errorCode(new Error("x"))).toBeUndefined();
    expect(errorCode(null)).toBeUndefined();
    expect(errorCode(undefined)).toBeUndefined();
    expect(errorCode("ECONNREFUSED")).toBeUndefined();
  });
});

describe("httpStatus", () => {
  it("returns the status of an AWS SDK error's $metadata", () => {
    expect(httpStatus(driverError("x", { $metadata: { httpStatusCode: 503 } }))).toBe(503);
  });

  it("returns undefined without a numeric status, and for null or undefined", () => {
    expect(httpStatus(driverError("x", { $metadata: { httpStatusCode: "503" } }))).toBeUndefined();
    expect(httpStatus(driverError("x", { $metadata: {} }))).toBeUndefined();
    expect(httpStatus(new Error("x"))).toBeUndefined();
    expect(httpStatus(null)).toBeUndefined();
    expect(httpStatus(undefined)).toBeUndefined();
  });
});

describe("describeFailure", () => {
  it("words an error as name, message, code, HTTP status and retryable, in that order", () => {
    const error = driverError("Throughput exceeded", {
      name: "ProvisionedThroughputExceededException",
      code: "THROTTLED",
      $metadata: { httpStatusCode: 400 },
      retryable: true,
    });
    expect(describeFailure(error)).toBe("ProvisionedThroughputExceededException: Throughput exceeded (THROTTLED) (HTTP 400) (retryable)");
  });

  it("leaves out what the error does not carry", () => {
    expect(describeFailure(new Error("boom"))).toBe("Error: boom");
    expect(describeFailure(new TypeError("bad"))).toBe("TypeError: bad");
    expect(describeFailure(driverError("boom", { retryable: false }))).toBe("Error: boom");
    expect(describeFailure(driverError("boom", { retryable: "yes" }))).toBe("Error: boom");
    expect(describeFailure(driverError("boom", { code: "not a code" }))).toBe("Error: boom");
  });

  it("takes the code from the cause when the error has none, its own first", () => {
    const wrapped = new Error("fetch failed", { cause: driverError("connect", { code: "ECONNRESET" }) });
    expect(describeFailure(wrapped)).toBe("Error: fetch failed (ECONNRESET)");
    const both = driverError("x", { code: "OWN" }, { cause: driverError("y", { code: "CAUSE" }) });
    expect(describeFailure(both)).toBe("Error: x (OWN)");
  });

  it("leaves the message out when `message` is false, keeps it when true or unset", () => {
    const error = driverError("item {pk: 'secret-key'} too large", { name: "ValidationException", $metadata: { httpStatusCode: 400 } });
    expect(describeFailure(error, { message: false })).toBe("ValidationException (HTTP 400)");
    expect(describeFailure(error, { message: true })).toBe("ValidationException: item {pk: 'secret-key'} too large (HTTP 400)");
    expect(describeFailure(error, {})).toBe("ValidationException: item {pk: 'secret-key'} too large (HTTP 400)");
  });

  it("names only the type of a thrown value that is not an Error", () => {
    expect(describeFailure("connection string with a password")).toBe("failed with a non-error value (string)");
    expect(describeFailure({ message: "token abc" })).toBe("failed with a non-error value (object)");
    expect(describeFailure(undefined)).toBe("failed with a non-error value (undefined)");
  });

  it("cuts the message at each marker, and keeps a message without one whole", () => {
    const wording = { cutAt: [", command was:"] };
    expect(describeFailure(new Error('ERR wrong type, command was: ["set","k","v"]'), wording)).toBe("Error: ERR wrong type");
    expect(describeFailure(new Error("ERR wrong type"), wording)).toBe("Error: ERR wrong type");
    expect(describeFailure(new Error(", command was: everything"), wording)).toBe("Error: ");
    expect(describeFailure(new Error("a | b # c"), { cutAt: [" # ", " | "] })).toBe("Error: a");
  });

  it("replaces every occurrence of each secret with [redacted], and ignores an empty secret", () => {
    const error = new Error("token tok-1 rejected; tok-1 expired; fence 42");
    expect(describeFailure(error, { secrets: ["tok-1", "42"] })).toBe("Error: token [redacted] rejected; [redacted] expired; fence [redacted]");
    expect(describeFailure(error, { secrets: [""] })).toBe("Error: token tok-1 rejected; tok-1 expired; fence 42");
  });

  it(`keeps at most ${MAX_FAILURE_DETAIL} characters of the message, marking a cut with …`, () => {
    expect(MAX_FAILURE_DETAIL).toBe(200);
    const exact = "m".repeat(MAX_FAILURE_DETAIL);
    expect(describeFailure(new Error(exact))).toBe(`Error: ${exact}`);
    expect(describeFailure(new Error(`${exact}tail`))).toBe(`Error: ${exact}…`);
  });
});

describe("scrubbedError", () => {
  it("keeps only the name, the worded message and the code", () => {
    const error = driverError("duplicate key value (id)=(secret) violates constraint", {
      name: "DatabaseError",
      code: "23505",
      detail: "Key (id)=(secret) already exists.",
      parameters: ["secret"],
    });
    const copy = scrubbedError(error, { cutAt: [" ("] });
    expect(copy).toBeInstanceOf(Error);
    expect(copy).not.toBe(error);
    expect(copy.name).toBe("DatabaseError");
    expect(copy.message).toBe("duplicate key value");
    expect((copy as Error & { code?: string }).code).toBe("23505");
    expect(Object.keys(copy).sort()).toEqual(["code", "name"]);
    expect(copy.cause).toBeUndefined();
  });

  it("keeps a string code even when it is not shown in the description, and no code that is not a string", () => {
    expect((scrubbedError(driverError("x", { code: "ERR-connection-lost" })) as Error & { code?: string }).code).toBe("ERR-connection-lost");
    expect("code" in scrubbedError(driverError("x", { code: 503 }))).toBe(false);
    expect("code" in scrubbedError(new Error("x"))).toBe(false);
  });

  it("scrubs secrets and truncates like describeFailure", () => {
    const copy = scrubbedError(new Error(`auth tok-9 ${"x".repeat(300)}`), { secrets: ["tok-9"] });
    expect(copy.message).toBe(`auth [redacted] ${"x".repeat(MAX_FAILURE_DETAIL - "auth [redacted] ".length)}…`);
  });

  it("turns a thrown value that is not an Error into an Error that keeps only its type (the value may quote anything)", () => {
    const copy = scrubbedError("key order-7 token tok-1");
    expect(copy.name).toBe("Error");
    expect(copy.message).toBe("a non-error value (string)");
    const fromNull = scrubbedError(null);
    expect(fromNull.name).toBe("Error");
    expect(fromNull.message).toBe("a non-error value (object)");
  });

  it("keeps no message with `message: false`, as describeFailure shows none", () => {
    const copy = scrubbedError(driverError("item {id: order-7} too large", { name: "ValidationException", code: "VALIDATION" }), { message: false });
    expect(copy.name).toBe("ValidationException");
    expect(copy.message).toBe("");
    expect((copy as Error & { code?: string }).code).toBe("VALIDATION");
    expect(storeFailure("S", "op", new Error("order-7"), { message: false }).cause).toMatchObject({ message: "" });
  });
});

describe("storeFailure", () => {
  it("wraps a backend error in a StoreUnavailableError naming the store and operation", () => {
    const error = driverError("connect ECONNREFUSED 127.0.0.1:6379", { code: "ECONNREFUSED" });
    const failure = storeFailure("RedisStore", "claim", error);
    expect(failure).toBeInstanceOf(StoreUnavailableError);
    expect(failure.code).toBe("STORE_UNAVAILABLE");
    expect((failure as StoreUnavailableError).store).toBe("RedisStore");
    expect((failure as StoreUnavailableError).operation).toBe("claim");
    expect(failure.message).toBe("RedisStore.claim failed: Error: connect ECONNREFUSED 127.0.0.1:6379 (ECONNREFUSED)");
  });

  it("an error the backend marks overloaded (a Durable Object's .overloaded) is an overloaded StoreUnavailableError, whichever cause is kept", () => {
    for (const cause of ["original", "scrubbed"] as const) {
      const failure = storeFailure("DurableObjectStore", "commit", driverError("Durable Object is overloaded", { overloaded: true, retryable: false }), { message: false, cause });
      expect(failure).toBeInstanceOf(StoreUnavailableError);
      expect((failure as StoreUnavailableError).overloaded).toBe(true);
      expect(failure.message).toBe("DurableObjectStore.commit failed: Error (overloaded)");
    }
    for (const flag of [false, "true", 1, undefined]) {
      const failure = storeFailure("DurableObjectStore", "commit", driverError("boom", { overloaded: flag }));
      expect((failure as StoreUnavailableError).overloaded).toBe(false);
      expect(failure.message).toBe("DurableObjectStore.commit failed: Error: boom");
    }
    for (const thrown of [null, undefined, "overloaded"]) expect((storeFailure("S", "op", thrown) as StoreUnavailableError).overloaded).toBe(false);
    expect(new StoreUnavailableError("S", "op", "x").overloaded).toBe(false);
    expect(new StoreUnavailableError("S", "op", "x", { overloaded: true }).overloaded).toBe(true);
  });

  it("puts the prefix before the description and the suffix after it", () => {
    const error = driverError("boom", { $metadata: { httpStatusCode: 503 } });
    expect(storeFailure("KvStore", "commit", error, { prefix: "the KV call failed" }).message).toBe(
      "KvStore.commit failed: the KV call failed: Error: boom (HTTP 503)",
    );
    expect(storeFailure("DynamoDBStore", "claim", error, { suffix: "on table t" }).message).toBe(
      "DynamoDBStore.claim failed: Error: boom (HTTP 503) on table t",
    );
    expect(storeFailure("S", "op", error, { prefix: "p", suffix: "s", message: false }).message).toBe("S.op failed: p: Error (HTTP 503) s");
  });

  it("keeps a scrubbed copy as the cause by default, and the original when asked", () => {
    const error = driverError("ERR bad, command was: SET k secret", { code: "ERR", command: ["SET", "k", "secret"] });
    const wording = { cutAt: [", command was:"] };
    for (const options of [wording, { ...wording, cause: "scrubbed" as const }]) {
      const cause = storeFailure("UpstashStore", "claim", error, options).cause as Error & { code?: string };
      expect(cause).toBeInstanceOf(Error);
      expect(cause).not.toBe(error);
      expect(cause.message).toBe("ERR bad");
      expect(cause.code).toBe("ERR");
      expect("command" in cause).toBe(false);
    }
    expect(storeFailure("UpstashStore", "claim", error, { ...wording, cause: "original" }).cause).toBe(error);
  });

  it("passes an error this package already typed through unchanged", () => {
    const typed = new InvalidOptionError("leaseMs", "must be a positive number");
    expect(storeFailure("S", "claim", typed)).toBe(typed);
    const unavailable = new StoreUnavailableError("Inner", "get", "down");
    expect(storeFailure("Outer", "claim", unavailable)).toBe(unavailable);
  });
});

describe("throwStepFailures", () => {
  it("returns when no id failed, throws the error itself when every id did, else a PartialStepError naming each id's", () => {
    const a = new StoreUnavailableError("S", "remember", "a");
    const b = new StoreUnavailableError("S", "remember", "b");
    expect(() => throwStepFailures("S", "remember", [])).not.toThrow();
    expect(() => throwStepFailures("S", "remember", [undefined, undefined])).not.toThrow();
    expect(catching(() => throwStepFailures("S", "remember", [a, b]))).toBe(a);
    const partial = catching(() => throwStepFailures("S", "remember", [undefined, b, undefined]));
    expect(partial).toBeInstanceOf(PartialStepError);
    expect([(partial as PartialStepError).errors, (partial as PartialStepError).store, (partial as PartialStepError).operation]).toEqual([[undefined, b, undefined], "S", "remember"]);
  });
});

function catching(run: () => void): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  return undefined;
}
