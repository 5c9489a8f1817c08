/**
 * The engine's settings: every option of `BatchEngine` (and of the runtime wrappers, which pass
 * theirs on) validated and defaulted ONCE, at construction, into one `EngineSettings` that every
 * batch and every phase reads. A wrong option is an `InvalidOptionError` when the engine is made,
 * never a surprise per message.
 *
 * What this is *not*: per-batch state. What one `process` call adds (its lease, deadline, observer,
 * interceptor) is `ProcessOptions`, held by that batch's `BatchRun`.
 */
import { type Store, isTransactionalStore } from "../contract.js";
import type { DecisionPolicy } from "../decision.js";
import { type Envelope, decodeEnvelope, messageId } from "../envelope.js";
import { InvalidMessageError, InvalidOptionError } from "../errors.js";
import type { EngineEvent, RunInterceptor } from "../events.js";
import { type Fingerprinter, defaultFingerprint } from "../fingerprint.js";
import { type OptionKeys, checkOptions, optionKeys } from "../store-kit/options.js";
import { checkMs } from "../store-kit/windows.js";
import type { EngineOptions, Handler } from "./types.js";

export const DEFAULT_CONCURRENCY = 10;
export const DEFAULT_COMMIT_RETRIES = 2;
export const DEFAULT_DEADLINE_MARGIN_MS = 1_000;

/** Every key of `EngineOptions`: anything else is refused (a typo, an option of a newer version). */
// Stryker disable BooleanLiteral: optionKeys reads only the keys; each `true` lets the compiler check the list against the options type
export const ENGINE_OPTION_KEYS: OptionKeys<EngineOptions<unknown>> = optionKeys<EngineOptions<unknown>>({
  leaseMs: true,
  onStoreError: true,
  onInvalid: true,
  onConflict: true,
  fingerprint: true,
  concurrency: true,
  parse: true,
  key: true,
  commitRetries: true,
  commitLingerMs: true,
  deadlineMarginMs: true,
  transactional: true,
  observe: true,
  intercept: true,
});
// Stryker restore BooleanLiteral

/** The engine's options, validated and defaulted: the one shape every batch and phase reads. */
export interface EngineSettings<Message, RuntimeContext> {
  readonly store: Store;
  readonly handle: Handler<Message, RuntimeContext>;
  readonly policy: DecisionPolicy;
  readonly concurrency: number;
  /** The engine's lease option (ms); undefined: the store's default (a batch may pass its own). */
  readonly leaseMs: number | undefined;
  readonly commitRetries: number;
  /** The fixed linger (ms), or undefined for the adaptive one (linger.ts, the default). */
  readonly commitLingerMs: number | undefined;
  readonly deadlineMarginMs: number;
  readonly transactional: boolean;
  readonly parse: (body: unknown) => Message;
  readonly key: (message: Message) => string | undefined;
  /** The payload fingerprint function; undefined when fingerprints are off. */
  readonly fingerprint: Fingerprinter<Message> | undefined;
  readonly observe: ((event: EngineEvent) => void) | undefined;
  readonly intercept: RunInterceptor | undefined;
}

/** The default `parse`: BabelQueue envelope decoding, a rejection as an `InvalidMessageError`. */
export function defaultParse(body: unknown): Envelope {
  const decoded = decodeEnvelope(body);
  if (!decoded.ok) throw new InvalidMessageError(decoded.reason);
  return decoded.message;
}

/** The default `key`: the envelope's `meta.id`. */
export function defaultKey(message: unknown): string | undefined {
  return messageId(message as Envelope);
}

function integerOption(name: string, value: number, min: number, max: number): number {
  if (!Number.isSafeInteger(value) || value < min || value > max) throw new InvalidOptionError(name, `must be an integer from ${min} to ${max}`);
  return value;
}

function oneOf<T extends string>(name: string, value: T, allowed: readonly T[]): T {
  if (!allowed.includes(value)) throw new InvalidOptionError(name, `must be ${allowed.map((v) => `"${v}"`).join(" or ")}`);
  return value;
}

/** Validates and defaults the engine's options. Throws `InvalidOptionError` naming the first wrong one. */
export function engineSettings<Message, RuntimeContext>(
  store: Store,
  handle: Handler<Message, RuntimeContext>,
  options: EngineOptions<Message> = {},
  owner = "BatchEngine",
): EngineSettings<Message, RuntimeContext> {
  if (typeof store?.seen !== "function" || typeof store.remember !== "function" || typeof store.forget !== "function") {
    throw new InvalidOptionError("store", "must implement seen, remember and forget");
  }
  if (typeof handle !== "function") throw new InvalidOptionError("handle", "must be a function");
  checkOptions(options, ENGINE_OPTION_KEYS as OptionKeys<EngineOptions<Message>>, owner);
  const concurrency = integerOption("concurrency", options.concurrency ?? DEFAULT_CONCURRENCY, 1, Number.MAX_SAFE_INTEGER);
  if (options.leaseMs !== undefined) checkMs("leaseMs", options.leaseMs);
  const commitRetries = integerOption("commitRetries", options.commitRetries ?? DEFAULT_COMMIT_RETRIES, 0, 10);
  const commitLingerMs = options.commitLingerMs === undefined ? undefined : integerOption("commitLingerMs", options.commitLingerMs, 0, 1_000);
  const deadlineMarginMs = integerOption("deadlineMarginMs", options.deadlineMarginMs ?? DEFAULT_DEADLINE_MARGIN_MS, 0, 60_000);
  const policy: DecisionPolicy = {
    onStoreError: oneOf("onStoreError", options.onStoreError ?? "retry", ["retry", "run"]),
    onInvalid: oneOf("onInvalid", options.onInvalid ?? "retry", ["retry", "drop"]),
    onConflict: oneOf("onConflict", options.onConflict ?? "retry", ["retry", "drop"]),
  };
  const fingerprint = options.fingerprint;
  if (fingerprint !== undefined && fingerprint !== false && typeof fingerprint !== "function") {
    throw new InvalidOptionError("fingerprint", "must be a function of the message, or false");
  }
  const transactional = options.transactional === true;
  if (transactional && !isTransactionalStore(store)) {
    throw new InvalidOptionError("transactional", "needs a store with transact() (TransactionalDynamoDBStore, PostgresStore, D1Store)");
  }
  return {
    store,
    handle,
    policy,
    concurrency,
    leaseMs: options.leaseMs,
    commitRetries,
    commitLingerMs,
    deadlineMarginMs,
    transactional,
    parse: options.parse ?? (defaultParse as (body: unknown) => Message),
    key: options.key ?? defaultKey,
    fingerprint: fingerprint === false ? undefined : ((fingerprint ?? defaultFingerprint) as Fingerprinter<Message>),
    observe: options.observe,
    intercept: options.intercept,
  };
}
