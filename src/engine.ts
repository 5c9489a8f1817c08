/**
 * The batch engine (DESIGN §4): the one piece every runtime adapter is a thin translation over.
 *
 * For a batch of deliveries it decodes every body, gates every usable id in ONE store step
 * (`claimMany`, or `seenMany` for a seen-set store; per-id calls in parallel when the store
 * has no batch form), runs the handlers with bounded concurrency, commits the successes in
 * one step and releases the failures in one step, and returns one `MessageResult` per
 * delivery, in order. A bad message never fails its neighbours; FIFO groups run in order and
 * stop at their first unacknowledged message.
 *
 * The verdicts themselves come from `decision.ts`; this file only sequences and batches them.
 *
 * What this is *not*: a runtime adapter. It knows nothing of SQS records, Workers messages,
 * acks or retries — it says `ack: true | false` and the adapter maps that.
 */
import {
  type Claim,
  type ClaimRef,
  type ClaimingStore,
  type Store,
  isClaimingStore,
} from "./contract.js";
import {
  type DecisionPolicy,
  type DedupeMode,
  type GateOutcome,
  type MessageResult,
  afterCommit,
  afterGate,
  afterRun,
  blocked,
  copyOf,
  invalid,
} from "./decision.js";
import { type Envelope, decodeEnvelope, messageId, reconcileAttempts } from "./envelope.js";
import { checkMs } from "./windows.js";
import { GroupBlockedError, InvalidMessageError, InvalidOptionError, StoreUnavailableError } from "./errors.js";

/** One delivery as a runtime adapter hands it to the engine. */
export interface Delivery<RuntimeContext> {
  /** The raw body: a JSON string, bytes, or an already-parsed object. */
  readonly body: unknown;
  /** The runtime's 0-based redelivery count (SQS: ApproximateReceiveCount − 1; Workers: attempts − 1). */
  readonly redeliveries?: number;
  /** FIFO message group. Messages of one group run in order and stop at the first failure. */
  readonly group?: string;
  /** Passed through to the handler's context untouched (the SQS record, the Workers message, …). */
  readonly context: RuntimeContext;
}

/** What the handler receives next to the message: the runtime's context plus the engine's facts. */
export type HandlerContext<RuntimeContext> = RuntimeContext & {
  /** The dedupe key (`meta.id` by default), or undefined when the message had none. */
  readonly key: string | undefined;
  /** Reconciled attempts: max(body.attempts, the runtime's redelivery count). */
  readonly attempts: number;
  /** How this run is guarded. */
  readonly dedupe: DedupeMode;
};

/** The user's side effect. Throwing (or rejecting) means "not done": the delivery is retried. */
export type Handler<Message, RuntimeContext> = (
  message: Message,
  context: HandlerContext<RuntimeContext>,
) => unknown;

/** Something that happened while processing, for logs and metrics. Never carries a body. */
export type EngineEvent =
  | { readonly type: "result"; readonly index: number; readonly result: MessageResult }
  | {
      readonly type: "store-error";
      readonly step: "claim" | "seen" | "commit" | "release";
      readonly ids: number;
      readonly error: unknown;
    };

/** Options of the engine, shared by `wrap`, `sqsHandler` and `queueHandler`. */
export interface EngineOptions<Message = Envelope> {
  /** Lease of a claim (ms). Default: the store's own default. The runtime wrappers extend it to cover the invocation. */
  leaseMs?: number;
  /** Store unreachable at the gate: `"retry"` (default, fail-closed: not run, not acked) or `"run"` (run without dedupe). */
  onStoreError?: "retry" | "run";
  /** A body that is not an accepted message: `"retry"` (default; the queue's DLQ takes it eventually) or `"drop"` (ack it). */
  onInvalid?: "retry" | "drop";
  /** How many handlers may run at once within a batch. Default 10. */
  concurrency?: number;
  /**
   * Turns a raw body into the message the handler gets. Default: BabelQueue envelope decoding.
   * Throw to reject the body (an `InvalidMessageError`'s reason is reported as it is).
   */
  parse?: (body: unknown) => Message;
  /** The dedupe key of a message; undefined or "" means none (runs without dedupe). Default: `meta.id`. */
  key?: (message: Message) => string | undefined;
  /** Extra attempts of a failed commit step, 25 ms then 50 ms apart, before `commit-failed`. Default 2. */
  commitRetries?: number;
  /** Called for every result and store error. Exceptions it throws are ignored. */
  observe?: (event: EngineEvent) => void;
}

/** Per-call overrides from the runtime adapter. */
export interface ProcessOptions {
  /** Lease for this batch (ms), e.g. the invocation's remaining time. */
  leaseMs?: number;
}

const DEFAULT_CONCURRENCY = 10;
const DEFAULT_COMMIT_RETRIES = 2;
const COMMIT_RETRY_BASE_MS = 25;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

interface Item<Message, RuntimeContext> {
  readonly index: number;
  readonly delivery: Delivery<RuntimeContext>;
  message?: Message;
  key?: string;
  attempts: number;
  /** Index of the first delivery with the same key in this batch, for later copies. */
  firstCopy?: number;
  gate?: GateOutcome;
  token?: string;
  dedupe: DedupeMode;
  result?: MessageResult;
  commit?: boolean;
}

function defaultParse(body: unknown): never | Envelope {
  const decoded = decodeEnvelope(body);
  if (!decoded.ok) throw new InvalidMessageError(decoded.reason);
  return decoded.message;
}

function defaultKey(message: unknown): string | undefined {
  return messageId(message as Envelope);
}

/** The body's own attempts counter, when the message has one. */
function bodyAttempts(message: unknown): number {
  if (typeof message !== "object" || message === null) return 0;
  const value = Object.getOwnPropertyDescriptor(message, "attempts")?.value as unknown;
  return typeof value === "number" && Number.isSafeInteger(value) && value > 0 ? value : 0;
}

function rejectionReason(error: unknown): string {
  if (error instanceof InvalidMessageError) return error.reason;
  // A parser's own message may quote the body; report only its kind.
  const name = error instanceof Error ? error.name : typeof error;
  return `parse rejected the body (${name})`;
}

function isClaim(value: unknown): value is Claim {
  if (typeof value !== "object" || value === null) return false;
  const claim = value as Record<string, unknown>;
  switch (claim.status) {
    case "claimed":
      return typeof claim.token === "string" && claim.token !== "";
    case "done":
      return true;
    case "in-flight":
      return typeof claim.retryAfterMs === "number" && Number.isFinite(claim.retryAfterMs);
    default:
      return false;
  }
}

/** Runs `work` over `lanes` with at most `limit` at once. */
async function pool<T>(lanes: readonly T[], limit: number, work: (lane: T) => Promise<void>): Promise<void> {
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, lanes.length) }, async () => {
    while (next < lanes.length) {
      const lane = lanes[next++] as T;
      await work(lane);
    }
  });
  await Promise.all(workers);
}

/** Settles every promise of a per-id fallback into values or errors. */
async function settleEach<T>(calls: readonly (() => T | Promise<T>)[]): Promise<({ ok: true; value: T } | { ok: false; error: unknown })[]> {
  return Promise.all(
    calls.map(async (call) => {
      try {
        return { ok: true as const, value: await call() };
      } catch (error) {
        return { ok: false as const, error };
      }
    }),
  );
}

export class BatchEngine<Message = Envelope, RuntimeContext = object> {
  readonly #store: Store;
  readonly #handle: Handler<Message, RuntimeContext>;
  readonly #policy: DecisionPolicy;
  readonly #concurrency: number;
  readonly #leaseMs: number | undefined;
  readonly #commitRetries: number;
  readonly #parse: (body: unknown) => Message;
  readonly #key: (message: Message) => string | undefined;
  readonly #observe: ((event: EngineEvent) => void) | undefined;

  constructor(store: Store, handle: Handler<Message, RuntimeContext>, options: EngineOptions<Message> = {}) {
    if (typeof store?.seen !== "function" || typeof store.remember !== "function" || typeof store.forget !== "function") {
      throw new InvalidOptionError("store", "must implement seen, remember and forget");
    }
    if (typeof handle !== "function") throw new InvalidOptionError("handle", "must be a function");
    const concurrency = options.concurrency ?? DEFAULT_CONCURRENCY;
    if (!Number.isSafeInteger(concurrency) || concurrency < 1) throw new InvalidOptionError("concurrency", "must be an integer >= 1");
    if (options.leaseMs !== undefined) checkMs("leaseMs", options.leaseMs);
    const commitRetries = options.commitRetries ?? DEFAULT_COMMIT_RETRIES;
    if (!Number.isSafeInteger(commitRetries) || commitRetries < 0 || commitRetries > 10) {
      throw new InvalidOptionError("commitRetries", "must be an integer from 0 to 10");
    }
    const onStoreError = options.onStoreError ?? "retry";
    if (onStoreError !== "retry" && onStoreError !== "run") throw new InvalidOptionError("onStoreError", 'must be "retry" or "run"');
    const onInvalid = options.onInvalid ?? "retry";
    if (onInvalid !== "retry" && onInvalid !== "drop") throw new InvalidOptionError("onInvalid", 'must be "retry" or "drop"');
    this.#store = store;
    this.#handle = handle;
    this.#policy = { onStoreError, onInvalid };
    this.#concurrency = concurrency;
    this.#leaseMs = options.leaseMs;
    this.#commitRetries = commitRetries;
    this.#parse = options.parse ?? (defaultParse as (body: unknown) => Message);
    this.#key = options.key ?? defaultKey;
    this.#observe = options.observe;
  }

  /** True when the store claims atomically (claim mode); false for a seen-set store. */
  get claimMode(): boolean {
    return isClaimingStore(this.#store);
  }

  /** Processes one batch. Never throws for a message's sake; one result per delivery, in order. */
  async process(deliveries: readonly Delivery<RuntimeContext>[], run: ProcessOptions = {}): Promise<MessageResult[]> {
    if (run.leaseMs !== undefined) checkMs("leaseMs", run.leaseMs);
    const items = deliveries.map((delivery, index) => this.#decode(delivery, index));
    const gated = this.#markCopiesAndBlocked(items);
    await this.#gate(gated, run.leaseMs ?? this.#leaseMs);

    const toCommit: Item<Message, RuntimeContext>[] = [];
    const toRelease: Item<Message, RuntimeContext>[] = [];
    await pool(this.#lanes(items), this.#concurrency, async (lane) => {
      let blockedBy: string | undefined;
      for (const item of lane) {
        if (blockedBy !== undefined) {
          item.result = blocked(new GroupBlockedError(blockedBy), item.dedupe, item.key);
          if (item.token !== undefined) toRelease.push(item);
          continue;
        }
        await this.#runOne(item, toCommit, toRelease);
        const acked = item.commit === true || item.result?.ack === true;
        if (!acked && item.delivery.group !== undefined) blockedBy = item.delivery.group;
      }
    });

    await Promise.all([this.#commit(toCommit), this.#release(toRelease)]);

    const results = items.map((item) => {
      if (item.result === undefined && item.firstCopy !== undefined) {
        item.result = copyOf(items[item.firstCopy]?.result as MessageResult);
      }
      return item.result as MessageResult;
    });
    results.forEach((result, index) => this.#emit({ type: "result", index, result }));
    return results;
  }

  #decode(delivery: Delivery<RuntimeContext>, index: number): Item<Message, RuntimeContext> {
    const item: Item<Message, RuntimeContext> = { index, delivery, attempts: 0, dedupe: "none" };
    let message: Message;
    try {
      message = this.#parse(delivery.body);
    } catch (error) {
      item.result = invalid(rejectionReason(error), this.#policy);
      return item;
    }
    let key: string | undefined;
    try {
      key = this.#key(message);
    } catch (error) {
      item.result = invalid(`the key function threw (${error instanceof Error ? error.name : typeof error})`, this.#policy);
      return item;
    }
    item.message = message;
    if (typeof key === "string" && key !== "") item.key = key;
    item.attempts = reconcileAttempts(bodyAttempts(message), delivery.redeliveries);
    return item;
  }

  /**
   * Marks later copies of a key (they share the first copy's fate) and FIFO messages already
   * blocked by an earlier unacknowledged invalid body of their group (no point claiming them).
   * Returns the items that need the store's gate.
   */
  #markCopiesAndBlocked(items: Item<Message, RuntimeContext>[]): Item<Message, RuntimeContext>[] {
    const firstByKey = new Map<string, number>();
    const blockedGroups = new Set<string>();
    const gated: Item<Message, RuntimeContext>[] = [];
    for (const item of items) {
      const group = item.delivery.group;
      if (group !== undefined && blockedGroups.has(group)) continue;
      if (item.result !== undefined) {
        if (!item.result.ack && group !== undefined) blockedGroups.add(group);
        continue;
      }
      if (item.key === undefined) {
        item.gate = { kind: "no-key" };
        continue;
      }
      const first = firstByKey.get(item.key);
      if (first !== undefined) {
        item.firstCopy = first;
        continue;
      }
      firstByKey.set(item.key, item.index);
      gated.push(item);
    }
    return gated;
  }

  async #gate(items: Item<Message, RuntimeContext>[], leaseMs: number | undefined): Promise<void> {
    if (items.length === 0) return;
    const keys = items.map((item) => item.key as string);
    const store = this.#store;
    if (isClaimingStore(store)) {
      const answers = await this.#gateStep("claim", keys, store.claimMany?.bind(store), (key) => store.claim(key, leaseMs), leaseMs);
      items.forEach((item, i) => {
        const answer = answers[i] as { ok: true; value: unknown } | { ok: false; error: unknown };
        if (answer.ok && isClaim(answer.value)) {
          item.gate = { kind: "claim", claim: answer.value };
          // Held from here on: whatever happens next, this claim is committed or released.
          if (answer.value.status === "claimed") item.token = answer.value.token;
        }
        else item.gate = { kind: "store-error", mode: "claim", error: answer.ok ? malformed("claim") : answer.error };
      });
    } else {
      const answers = await this.#gateStep("seen", keys, store.seenMany?.bind(store), async (key) => store.seen(key), undefined);
      items.forEach((item, i) => {
        const answer = answers[i] as { ok: true; value: unknown } | { ok: false; error: unknown };
        if (answer.ok && typeof answer.value === "boolean") item.gate = { kind: "seen", seen: answer.value };
        else item.gate = { kind: "store-error", mode: "seen-set", error: answer.ok ? malformed("seen") : answer.error };
      });
    }
  }

  /** One store step for the whole batch when the store has the batch form, else per-id calls in parallel. */
  async #gateStep<T>(
    step: "claim" | "seen",
    keys: string[],
    many: ((ids: readonly string[], leaseMs?: number) => Promise<T[]>) | undefined,
    one: (key: string) => Promise<T>,
    leaseMs: number | undefined,
  ): Promise<({ ok: true; value: T } | { ok: false; error: unknown })[]> {
    if (many !== undefined) {
      try {
        const values = await many(keys, leaseMs);
        if (!Array.isArray(values) || values.length !== keys.length) throw malformed(`${step}Many`);
        return values.map((value) => ({ ok: true as const, value }));
      } catch (error) {
        this.#emit({ type: "store-error", step, ids: keys.length, error });
        return keys.map(() => ({ ok: false as const, error }));
      }
    }
    const answers = await settleEach(keys.map((key) => () => one(key)));
    const failed = answers.filter((answer) => !answer.ok);
    if (failed.length > 0) this.#emit({ type: "store-error", step, ids: failed.length, error: (failed[0] as { error: unknown }).error });
    return answers;
  }

  /** Groups items into lanes: one per FIFO group (in order), one per ungrouped message. Later copies are not run. */
  #lanes(items: Item<Message, RuntimeContext>[]): Item<Message, RuntimeContext>[][] {
    const lanes: Item<Message, RuntimeContext>[][] = [];
    const byGroup = new Map<string, Item<Message, RuntimeContext>[]>();
    for (const item of items) {
      if (item.firstCopy !== undefined) continue;
      const group = item.delivery.group;
      if (group === undefined) {
        if (item.result === undefined) lanes.push([item]);
        continue;
      }
      let lane = byGroup.get(group);
      if (lane === undefined) {
        lane = [];
        byGroup.set(group, lane);
        lanes.push(lane);
      }
      lane.push(item);
    }
    return lanes;
  }

  async #runOne(
    item: Item<Message, RuntimeContext>,
    toCommit: Item<Message, RuntimeContext>[],
    toRelease: Item<Message, RuntimeContext>[],
  ): Promise<void> {
    if (item.result !== undefined || item.gate === undefined) return;
    const step = afterGate(item.gate, this.#policy, item.key);
    if (step.next === "stop") {
      item.result = step.result;
      item.dedupe = step.result.dedupe;
      return;
    }
    item.dedupe = step.dedupe;
    let outcome: { ok: true } | { ok: false; error: unknown };
    try {
      const context = { ...item.delivery.context, key: item.key, attempts: item.attempts, dedupe: step.dedupe };
      await this.#handle(item.message as Message, context as HandlerContext<RuntimeContext>);
      outcome = { ok: true };
    } catch (error) {
      outcome = { ok: false, error };
    }
    const next = afterRun(outcome, step.dedupe, item.key, item.token !== undefined);
    if (next.next === "commit") {
      item.commit = true;
      toCommit.push(item);
      return;
    }
    item.result = next.result;
    if (next.next === "release") toRelease.push(item);
  }

  /**
   * Commits the successes. A commit is idempotent, and every commit that fails widens the one
   * window no store can close (the effect ran, the store does not know), so a failed commit is
   * retried `commitRetries` times, quickly, before it is reported as `commit-failed`.
   */
  async #commit(items: Item<Message, RuntimeContext>[]): Promise<void> {
    if (items.length === 0) return;
    let pending = items;
    const errors = new Map<Item<Message, RuntimeContext>, unknown>();
    for (let attempt = 0; pending.length > 0; attempt += 1) {
      if (attempt > 0) await sleep(COMMIT_RETRY_BASE_MS * 2 ** (attempt - 1));
      const failures = await this.#commitOnce(pending.map((item) => item.key as string));
      errors.clear();
      pending = pending.filter((item, i) => {
        if (failures[i] === undefined) return false;
        errors.set(item, failures[i]);
        return true;
      });
      if (pending.length > 0) this.#emit({ type: "store-error", step: "commit", ids: pending.length, error: errors.get(pending[0] as Item<Message, RuntimeContext>) });
      if (attempt >= this.#commitRetries) break;
    }
    for (const item of items) item.result = afterCommit(errors.get(item), item.dedupe, item.key as string);
  }

  /** One commit step: the error of each key, undefined where it was committed. */
  async #commitOnce(keys: string[]): Promise<unknown[]> {
    const store = this.#store;
    if (store.rememberMany !== undefined) {
      try {
        await store.rememberMany(keys);
        return keys.map(() => undefined);
      } catch (error) {
        return keys.map(() => error);
      }
    }
    return (await settleEach(keys.map((key) => () => store.remember(key)))).map((answer) => (answer.ok ? undefined : answer.error));
  }

  async #release(items: Item<Message, RuntimeContext>[]): Promise<void> {
    if (items.length === 0) return;
    const store = this.#store as ClaimingStore;
    const claims: ClaimRef[] = items.map((item) => ({ id: item.key as string, token: item.token as string }));
    // A failed release only means the redelivery waits for the lease to end: report it, go on.
    if (store.releaseMany !== undefined) {
      try {
        await store.releaseMany(claims);
      } catch (error) {
        this.#emit({ type: "store-error", step: "release", ids: claims.length, error });
      }
      return;
    }
    const answers = await settleEach(claims.map((claim) => () => store.release(claim.id, claim.token)));
    const failed = answers.filter((answer) => !answer.ok);
    if (failed.length > 0) this.#emit({ type: "store-error", step: "release", ids: failed.length, error: (failed[0] as { error: unknown }).error });
  }

  #emit(event: EngineEvent): void {
    if (this.#observe === undefined) return;
    try {
      this.#observe(event);
    } catch {
      // An observer must never change an outcome.
    }
  }
}

function malformed(operation: string): StoreUnavailableError {
  return new StoreUnavailableError("store", operation, "returned an answer of the wrong shape");
}
