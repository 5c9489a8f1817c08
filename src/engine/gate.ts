/**
 * Phase 1, the gate: decode every body, fingerprint every message, mark in-batch copies and
 * FIFO messages already blocked, and ask the store about every usable id in ONE step
 * (`claimMany`, or `recallMany` / `seenMany` for a seen-set store; per-id calls in parallel when
 * the store has no batch form).
 *
 * A `claimMany` answer may fail one id alone (`ClaimFailure`, contract.ts): that id is recorded as a
 * store error exactly as if the whole step had failed for it (decision.ts: fail-closed, retried), and
 * the batch's other ids keep their claims.
 *
 * What this is *not*: the verdict. It records what the store said (`item.gate`); decision.ts
 * turns that into run / stop.
 */
import { type Claim, type ClaimFailure, type ClaimingStore, type Recall, isClaimingStore } from "../contract.js";
import { invalid } from "../decision.js";
import { reconcileAttempts } from "../envelope.js";
import { InvalidMessageError } from "../errors.js";
import { isToken } from "../store-kit/tokens.js";
import type { EngineEvent } from "../events.js";
import { fingerprintOf } from "../fingerprint.js";
import type { EngineSettings } from "./settings.js";
import { type Answer, malformed, storeStep } from "./store-step.js";
import type { Delivery, Item } from "./types.js";

/**
 * The body's own `attempts` value, unchecked (reconcileAttempts keeps it only when it is a count):
 * an own property only, read directly (no descriptor object per message); a getter that throws counts
 * as none, and so does a message that is not an object.
 */
function bodyAttempts(message: unknown): unknown {
  if (typeof message !== "object" || message === null || !Object.hasOwn(message, "attempts")) return undefined;
  try {
    return (message as { attempts?: unknown }).attempts;
  } catch {
    // A getter that threw: none.
  }
  return undefined;
}

/** A transport's authoritative attempts count: a safe integer >= 0 (anything else is ignored). */
function isAttempts(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}

function rejectionReason(error: unknown): string {
  if (error instanceof InvalidMessageError) return error.reason;
  // A parser's own message may quote the body; report only its kind.
  const name = error instanceof Error ? error.name : typeof error;
  return `parse rejected the body (${name})`;
}

/** Decodes one delivery into an item: its message, key and attempts, or an `invalid` result. */
export function decode<Message, RC>(settings: EngineSettings<Message, RC>, delivery: Delivery<RC>, index: number): Item<Message, RC> {
  const item: Item<Message, RC> = { index, delivery, attempts: 0, dedupe: "none", stage: "waiting" };
  if (delivery.rejected !== undefined) {
    item.result = invalid(delivery.rejected, settings.policy);
    return item;
  }
  let message: Message;
  try {
    message = settings.parse(delivery.body);
  } catch (error) {
    item.result = invalid(rejectionReason(error), settings.policy);
    return item;
  }
  let key: string | undefined;
  try {
    key = settings.key(message);
  } catch (error) {
    item.result = invalid(`the key function threw (${error instanceof Error ? error.name : typeof error})`, settings.policy);
    return item;
  }
  item.message = message;
  if (typeof key === "string" && key !== "") item.key = key;
  item.attempts = isAttempts(delivery.attempts) ? delivery.attempts : reconcileAttempts(bodyAttempts(message), delivery.redeliveries);
  return item;
}

/**
 * Fingerprints every keyed message: synchronously for the default (undefined: nothing to await),
 * a promise only when a user's fingerprint function answered asynchronously.
 */
export function fingerprintAll<Message, RC>(settings: EngineSettings<Message, RC>, items: readonly Item<Message, RC>[]): Promise<void> | undefined {
  const fingerprinter = settings.fingerprint;
  if (fingerprinter === undefined) return undefined;
  let pending: Promise<void>[] | undefined;
  for (const item of items) {
    if (item.key === undefined || item.result !== undefined) continue;
    const value = fingerprintOf(fingerprinter, item.message as Message);
    if (value instanceof Promise) {
      pending ??= [];
      pending.push(
        value.then((fingerprint) => {
          item.fingerprint = fingerprint;
        }),
      );
    } else item.fingerprint = value;
  }
  return pending === undefined ? undefined : Promise.all(pending).then(noop);
}

function noop(): void {}

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
      return isToken(claim.token);
    case "done":
      return true;
    case "in-flight":
      return typeof claim.retryAfterMs === "number" && Number.isFinite(claim.retryAfterMs);
    default:
      return false;
  }
}

/**
 * A `claimMany` entry reporting that id's own failure (`ClaimFailure`): its error. Any other entry,
 * a well-formed claim or not, is left to `isClaim`. Only the batch form may answer it: a `claim`
 * (one id) that answers `failed` is malformed, since the contract's `Claim` has no such member.
 */
function claimFailureOf(value: unknown): { error: unknown } | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const entry = value as Partial<ClaimFailure>;
  if (entry.status !== "failed") return undefined;
  return { error: entry.error ?? malformed("claimMany") };
}

/**
 * A seen-set answer as a boolean: `true` / `false`, or Redis' `1` / `0` (what `EXISTS` and
 * `SISMEMBER` reply, so a plain store that returns its client's reply works, as it does with
 * BabelQueue's `Wrap`). Anything else is malformed: an error text or `undefined` must not read as "seen".
 */
function seenAnswer(value: unknown): boolean | undefined {
  if (typeof value === "boolean") return value;
  return value === 1 ? true : value === 0 ? false : undefined;
}

function recallOf(value: unknown): Recall | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const recall = value as Record<string, unknown>;
  const seen = seenAnswer(recall.seen);
  if (seen === undefined || (recall.fingerprint !== undefined && typeof recall.fingerprint !== "string")) return undefined;
  return recall.fingerprint === undefined ? { seen } : { seen, fingerprint: recall.fingerprint as string };
}

/** Asks the store about every gated item in one step, and records its answer on the item. */
export async function gate<Message, RC>(
  settings: EngineSettings<Message, RC>,
  emit: (event: EngineEvent) => void,
  items: Item<Message, RC>[],
  leaseMs: number | undefined,
): Promise<void> {
  if (items.length === 0) return;
  const keys = items.map((item) => item.key as string);
  const store = settings.store;
  if (isClaimingStore(store)) {
    const fingerprints = items.map((item) => item.fingerprint);
    const redelivered = items.map((item) => item.attempts > 0);
    const claiming: ClaimingStore = store;
    const many = claiming.claimMany === undefined ? undefined : () => (claiming.claimMany as NonNullable<ClaimingStore["claimMany"]>).call(claiming, keys, leaseMs, fingerprints, { redelivered });
    // A `ClaimFailure` entry of `claimMany` fails that id alone, as if its own claim had thrown.
    const answers = await storeStep<unknown>(emit, "claim", keys.length, many, (i) => claiming.claim(keys[i] as string, leaseMs, fingerprints[i]), claimFailureOf);
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
        ? async () => (await seenMany.call(store, keys)).map((seen: unknown) => (typeof seen === "object" ? seen : { seen }))
        : undefined;
  const answers = await storeStep<unknown>(emit, "seen", keys.length, many, async (i) => ({ seen: await store.seen(keys[i] as string) }));
  items.forEach((item, i) => {
    const answer = answers[i] as Answer<unknown>;
    const recall = answer.ok ? recallOf(answer.value) : undefined;
    if (recall !== undefined) {
      item.gate = { kind: "seen", seen: recall.seen, ...(recall.fingerprint === undefined ? {} : { fingerprint: recall.fingerprint }) };
    } else {
      item.gate = { kind: "store-error", mode: "seen-set", error: answer.ok ? malformed("seen") : answer.error };
    }
  });
}
