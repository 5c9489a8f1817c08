/**
 * Phase 1, the gate: decode every body, fingerprint every message, mark in-batch copies and
 * FIFO messages already blocked, and ask the store about every usable id in ONE step
 * (`claimMany`, or `recallMany` / `seenMany` for a seen-set store; per-id calls in parallel when
 * the store has no batch form).
 *
 * What this is *not*: the verdict. It records what the store said (`item.gate`); decision.ts
 * turns that into run / stop.
 */
import { type Claim, type ClaimingStore, type Recall, type Store, isClaimingStore } from "../contract.js";
import { type DecisionPolicy, invalid } from "../decision.js";
import { type Envelope, decodeEnvelope, messageId, reconcileAttempts } from "../envelope.js";
import { InvalidMessageError, StoreUnavailableError } from "../errors.js";
import type { EngineEvent, StoreStep } from "../events.js";
import { type Fingerprinter, fingerprintOf } from "../fingerprint.js";
import type { Delivery, Item } from "./types.js";

export type Answer<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: unknown };

/** What the phases need of the engine. */
export interface PhaseDeps<Message> {
  readonly store: Store;
  readonly policy: DecisionPolicy;
  readonly emit: (event: EngineEvent) => void;
  readonly parse: (body: unknown) => Message;
  readonly key: (message: Message) => string | undefined;
  readonly fingerprint: Fingerprinter<Message> | undefined;
}

export function defaultParse(body: unknown): Envelope {
  const decoded = decodeEnvelope(body);
  if (!decoded.ok) throw new InvalidMessageError(decoded.reason);
  return decoded.message;
}

export function defaultKey(message: unknown): string | undefined {
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

export function malformed(operation: string): StoreUnavailableError {
  return new StoreUnavailableError("store", operation, "returned an answer of the wrong shape");
}

/** Decodes one delivery into an item: its message, key and attempts, or an `invalid` result. */
export function decode<Message, RC>(deps: PhaseDeps<Message>, delivery: Delivery<RC>, index: number): Item<Message, RC> {
  const item: Item<Message, RC> = { index, delivery, attempts: 0, dedupe: "none", stage: "waiting" };
  let message: Message;
  try {
    message = deps.parse(delivery.body);
  } catch (error) {
    item.result = invalid(rejectionReason(error), deps.policy);
    return item;
  }
  let key: string | undefined;
  try {
    key = deps.key(message);
  } catch (error) {
    item.result = invalid(`the key function threw (${error instanceof Error ? error.name : typeof error})`, deps.policy);
    return item;
  }
  item.message = message;
  if (typeof key === "string" && key !== "") item.key = key;
  item.attempts = reconcileAttempts(bodyAttempts(message), delivery.redeliveries);
  return item;
}

/** Fingerprints every keyed message: synchronously for the default, awaiting only a user's async fingerprint function. */
export async function fingerprintAll<Message, RC>(deps: PhaseDeps<Message>, items: readonly Item<Message, RC>[]): Promise<void> {
  if (deps.fingerprint === undefined) return;
  const pending: Promise<void>[] = [];
  for (const item of items) {
    if (item.key === undefined || item.result !== undefined) continue;
    const value = fingerprintOf(deps.fingerprint, item.message as Message);
    if (value instanceof Promise) {
      pending.push(
        value.then((fingerprint) => {
          item.fingerprint = fingerprint;
        }),
      );
    }
    else item.fingerprint = value;
  }
  if (pending.length > 0) await Promise.all(pending);
}

/**
 * Marks later copies of a key (they share the first copy's fate) and FIFO messages already
 * blocked by an earlier unacknowledged invalid body of their group (no point claiming them).
 * Returns the items that need the store's gate.
 */
export function markCopiesAndBlocked<Message, RC>(items: Item<Message, RC>[]): Item<Message, RC>[] {
  const firstByKey = new Map<string, number>();
  const blockedGroups = new Set<string>();
  const gated: Item<Message, RC>[] = [];
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

function isClaim(value: unknown): value is Claim {
  if (typeof value !== "object" || value === null) return false;
  const claim = value as Record<string, unknown>;
  if (claim.fingerprint !== undefined && typeof claim.fingerprint !== "string") return false;
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

function isRecall(value: unknown): value is Recall {
  if (typeof value !== "object" || value === null) return false;
  const recall = value as Record<string, unknown>;
  return typeof recall.seen === "boolean" && (recall.fingerprint === undefined || typeof recall.fingerprint === "string");
}

/** Settles every call of a per-id fallback into values or errors (a synchronous throw included). */
export async function settleEach<T>(calls: readonly (() => T | Promise<T>)[]): Promise<Answer<T>[]> {
  return Promise.all(
    calls.map(async (call): Promise<Answer<T>> => {
      try {
        return { ok: true, value: await call() };
      } catch (error) {
        return { ok: false, error };
      }
    }),
  );
}

/**
 * One store step over `count` ids: the batch form when the store has one (a wrong-length answer
 * is a store failure), else per-id calls in parallel. Emits the step's latency and its errors.
 */
export async function storeStep<T>(
  deps: { readonly emit: (event: EngineEvent) => void },
  step: StoreStep,
  count: number,
  many: (() => Promise<readonly T[]>) | undefined,
  one: (i: number) => T | Promise<T>,
): Promise<Answer<T>[]> {
  const started = Date.now();
  let answers: Answer<T>[];
  if (many !== undefined) {
    try {
      const values = await many();
      if (!Array.isArray(values) || values.length !== count) throw malformed(`${step}Many`);
      answers = values.map((value) => ({ ok: true as const, value }));
    } catch (error) {
      answers = Array.from({ length: count }, () => ({ ok: false as const, error }));
    }
  } else {
    answers = await settleEach(Array.from({ length: count }, (_, i) => () => one(i)));
  }
  const failed = answers.filter((answer): answer is { ok: false; error: unknown } => !answer.ok);
  deps.emit({ type: "store-step", step, ids: count, durationMs: Date.now() - started, ok: failed.length === 0 });
  if (failed.length > 0) deps.emit({ type: "store-error", step, ids: failed.length, error: (failed[0] as { error: unknown }).error });
  return answers;
}

/** Asks the store about every gated item in one step, and records its answer on the item. */
export async function gate<Message, RC>(deps: PhaseDeps<Message>, items: Item<Message, RC>[], leaseMs: number | undefined): Promise<void> {
  if (items.length === 0) return;
  const keys = items.map((item) => item.key as string);
  const store = deps.store;
  if (isClaimingStore(store)) {
    const fingerprints = items.map((item) => item.fingerprint);
    const redelivered = items.map((item) => item.attempts > 0);
    const claiming: ClaimingStore = store;
    const many = claiming.claimMany === undefined ? undefined : () => (claiming.claimMany as NonNullable<ClaimingStore["claimMany"]>).call(claiming, keys, leaseMs, fingerprints, { redelivered });
    const answers = await storeStep<unknown>(deps, "claim", keys.length, many, (i) => claiming.claim(keys[i] as string, leaseMs, fingerprints[i]));
    items.forEach((item, i) => {
      const answer = answers[i] as Answer<unknown>;
      if (answer.ok && isClaim(answer.value)) {
        item.gate = { kind: "claim", claim: answer.value };
        // Held from here on: whatever happens next, this claim is committed or released.
        if (answer.value.status === "claimed") item.token = answer.value.token;
      } else {
        item.gate = { kind: "store-error", mode: "claim", error: answer.ok ? malformed("claim") : answer.error };
      }
    });
    return;
  }
  const recall = store.recallMany;
  const seenMany = store.seenMany;
  const many =
    recall !== undefined
      ? () => recall.call(store, keys)
      : seenMany !== undefined
        ? async () => (await seenMany.call(store, keys)).map((seen) => (typeof seen === "boolean" ? { seen } : seen))
        : undefined;
  const answers = await storeStep<unknown>(deps, "seen", keys.length, many, async (i) => ({ seen: await store.seen(keys[i] as string) }));
  items.forEach((item, i) => {
    const answer = answers[i] as Answer<unknown>;
    if (answer.ok && isRecall(answer.value)) {
      item.gate = { kind: "seen", seen: answer.value.seen, ...(answer.value.fingerprint === undefined ? {} : { fingerprint: answer.value.fingerprint }) };
    } else {
      item.gate = { kind: "store-error", mode: "seen-set", error: answer.ok ? malformed("seen") : answer.error };
    }
  });
}
