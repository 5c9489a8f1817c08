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
  constructor(store: string, operation: string, detail: string, options?: { cause?: unknown }) {
    super("STORE_UNAVAILABLE", `${store}.${operation} failed: ${detail}`, options);
    this.store = store;
    this.operation = operation;
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
