/**
 * Typed errors. Each carries a `code` a program can switch on and a message a person can act on.
 * No error built here ever includes a message body, a token or a credential.
 */

/** Base class of every error this package throws or reports. */
export class BabelQueueServerlessError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** A constructor or wrapper option is out of range or of the wrong type. */
export class InvalidOptionError extends BabelQueueServerlessError {
  readonly option: string;
  constructor(option: string, problem: string) {
    super("INVALID_OPTION", `option "${option}" ${problem}`);
    this.option = option;
  }
}

/**
 * The store could not answer (network, throttling, timeout, a backend error). Stores wrap
 * their backend's failures in it; `cause` keeps the original for debugging.
 */
export class StoreUnavailableError extends BabelQueueServerlessError {
  readonly store: string;
  readonly operation: string;
  /**
   * The backend said it is overloaded (a Durable Object error's `.overloaded`): the engine does not
   * retry the step at once, as a retry would only add to the load.
   */
  readonly overloaded: boolean;
  constructor(store: string, operation: string, detail: string, options?: { cause?: unknown; overloaded?: boolean }) {
    super("STORE_UNAVAILABLE", `${store}.${operation} failed: ${detail}`, options);
    this.store = store;
    this.operation = operation;
    this.overloaded = options?.overloaded === true;
  }
}

/**
 * A batch step that failed for some of its ids only — a Durable Object shard, a DynamoDB
 * `BatchWriteItem` chunk or a Redis bucket that failed while the rest were written. `errors[i]` is
 * the error of the step's i-th id, undefined where that id's write landed. Thrown by `rememberMany`
 * / `releaseMany` (see the store contract); the engine settles each id on its own, so only the
 * failed ids are retried and reported `commit-failed`. Read as one error, it is the first failure's
 * (`overloaded` included).
 */
export class PartialStepError extends StoreUnavailableError {
  readonly errors: readonly (Error | undefined)[];
  constructor(store: string, operation: string, errors: readonly (Error | undefined)[]) {
    const failed = errors.filter((error): error is Error => error !== undefined);
    const first = failed[0];
    super(store, operation, `${failed.length} of ${errors.length} ids (the others were written); the first: ${first?.message ?? "none"}`, {
      cause: first,
      overloaded: first instanceof StoreUnavailableError && first.overloaded,
    });
    this.errors = errors;
  }
}

/** The message body is not an accepted BabelQueue envelope (or the user's `parse` rejected it). */
export class InvalidMessageError extends BabelQueueServerlessError {
  readonly reason: string;
  constructor(reason: string) {
    super("INVALID_MESSAGE", `message rejected: ${reason}`);
    this.reason = reason;
  }
}

/** A FIFO message that was not run because an earlier message of its group was not acknowledged. */
export class GroupBlockedError extends BabelQueueServerlessError {
  readonly group: string;
  constructor(group: string) {
    super("GROUP_BLOCKED", `not run: an earlier message of FIFO group "${group}" was not acknowledged`);
    this.group = group;
  }
}

/**
 * Another delivery holds the id's claim right now: not run, not acknowledged. Retry after
 * `retryAfterMs` (the other delivery's remaining lease; 0 when the store cannot tell).
 */
export class InFlightError extends BabelQueueServerlessError {
  readonly key: string;
  readonly retryAfterMs: number;
  constructor(key: string, retryAfterMs: number) {
    super("IN_FLIGHT", `not run: another delivery of this id holds its claim (retry after ${retryAfterMs} ms)`);
    this.key = key;
    this.retryAfterMs = retryAfterMs;
  }
}

/**
 * The id was already claimed or committed under another payload fingerprint: a producer reused an
 * id for a different message. Not run. The message names the key, never the payload.
 */
export class PayloadConflictError extends BabelQueueServerlessError {
  readonly key: string;
  readonly stored: string;
  readonly received: string;
  readonly state: "done" | "in-flight";
  constructor(key: string, state: "done" | "in-flight", stored: string, received: string) {
    super(
      "PAYLOAD_CONFLICT",
      `id ${JSON.stringify(key.length > 200 ? `${key.slice(0, 200)}…` : key)} was ${state === "done" ? "committed" : "claimed"} with another payload (fingerprint ${stored}, this message ${received})`,
    );
    this.key = key;
    this.state = state;
    this.stored = stored;
    this.received = received;
  }
}

/** Transactional mode: the claim is no longer this delivery's (lease expired and re-claimed, or forgotten). Nothing was written. */
export class FenceLostError extends BabelQueueServerlessError {
  readonly key: string;
  constructor(key: string) {
    super("FENCE_LOST", "transaction not committed: this delivery no longer owns the id's claim; nothing was written");
    this.key = key;
  }
}

/** Transactional mode: a condition of the handler's own writes failed. Nothing was written. */
export class TransactionConditionError extends BabelQueueServerlessError {
  /** Indexes (in the handler's order) of the writes whose condition failed, when the backend says. */
  readonly failed: readonly number[];
  constructor(detail: string, failed: readonly number[] = [], options?: { cause?: unknown }) {
    super("TRANSACTION_CONDITION", `transaction not committed: ${detail}`, options);
    this.failed = failed;
  }
}

/**
 * The runtime's deadline (e.g. the Lambda invocation's timeout, minus the margin) came first:
 * the message was `"not started"`, or its handler was `"still running"` (its claim is kept).
 */
export class DeadlineExceededError extends BabelQueueServerlessError {
  readonly phase: "not started" | "still running";
  constructor(phase: "not started" | "still running") {
    super(
      "DEADLINE_EXCEEDED",
      phase === "not started"
        ? "not run: the invocation's deadline was near, so the handler was not started"
        : "not acknowledged: the handler was still running at the invocation's deadline (its claim is kept)",
    );
    this.phase = phase;
  }
}
