/**
 * One batch step of `RedisStore` as script calls: the step's keys grouped by bucket (one hash tag,
 * so one slot), each group cut into chunks of at most `MAX_KEYS_PER_SCRIPT` entries (ids), one call per
 * chunk, all sent at once through dispatch.ts, the replies put back in the order of the keys.
 *
 * Contract:
 *   - keys without a bucket (the classic layouts: plain, or `hashTag: true` — one bucket) form ONE
 *     group, so a step of up to `MAX_KEYS_PER_SCRIPT` ids is exactly one script, as it always was;
 *   - every failure becomes a `StoreUnavailableError` carrying neither a token nor a key (the
 *     store's `describe`); a step whose calls partly failed still hands back what the others
 *     answered (a claim step releases what it won, see store.ts), with the first error;
 *   - the whole step — retries of redirected calls included — is raced against the deadline; a step
 *     that takes ids (a claim) sends nothing more once its deadline passed (the store sends nothing
 *     more: a client that resends on its own — ioredis after a reconnect, @upstash/redis with its
 *     retries on — may, which is why a failed claim step releases its tokens behind it);
 *   - with a replica wait, a step whose writes reached fewer replicas than asked fails.
 *
 * What this is *not*: the scripts' argument layout (the store builds each chunk's arguments from the
 * positions it carries) or a retry of failed writes (the engine's commit queue retries).
 */
import { StoreUnavailableError } from "../../src/errors.js";
import { type ReplicaWait, type ScriptCall, dispatchScripts } from "./dispatch.js";
import type { RedisScript, RedisScriptClient } from "./scripts.js";

/**
 * Most keys one script call carries. A script blocks its Redis server (or cluster node) while it
 * runs: measured on redis-server 7.0 (test/stores/redis/large-batch.test.ts), about 10-20 µs per key
 * for a claim, so 1,000 keys hold a node for tens of milliseconds at most; a larger step is cut
 * into chunks of this size, sent together (one pipelined round trip per node with ioredis).
 */
export const MAX_KEYS_PER_SCRIPT = 1_000;

/**
 * One entry of a step: its Redis key, the keys that travel with it in the same script (a BabelQueue
 * layout's side key), and the bucket group it belongs to ('' for the classic layouts).
 */
export interface StepKey {
  readonly key: string;
  readonly group: string;
  /** Keys the script takes right after `key`, for the same id (layouts.ts: `keysPerId` 2). */
  readonly with?: readonly string[];
}

/** What a step answered per key (undefined where its call failed), and the first failure. */
export interface StepResult<T> {
  readonly values: (T | undefined)[];
  readonly error?: StoreUnavailableError;
}

export interface StepOptions<T> {
  readonly operation: string;
  readonly script: RedisScript;
  readonly keys: readonly StepKey[];
  /** The script's arguments for the keys at these positions of `keys`, in that order. */
  readonly args: (at: readonly number[]) => string[];
  /** The reply of one call, one answer per position. Throws on a shape the script never returns. */
  readonly read: (reply: unknown, at: readonly number[]) => T[];
  /** Epoch ms the whole step must end by. */
  readonly deadline: number;
  /** Wait for replicas after the writes. */
  readonly wait?: ReplicaWait;
  /**
   * The step takes ids (a claim): once its deadline passed, nothing of it is sent again (a
   * redirected call, a NOSCRIPT resend), so it cannot land after the release sent behind it.
   */
  readonly acquires?: boolean;
}

/** How the store words a failure (scrubbing its secrets and the step's tokens). */
export type DescribeFailure = (operation: string, error: unknown) => StoreUnavailableError;

/** The timer of the step's deadline ran out first. */
export class StepTimedOut {
  constructor(readonly ms: number) {}
}

/** The positions of `keys`, grouped by bucket and cut into chunks. */
export function chunksOf(keys: readonly StepKey[]): number[][] {
  const groups = new Map<string, number[]>();
  keys.forEach(({ group }, position) => {
    const members = groups.get(group);
    if (members === undefined) groups.set(group, [position]);
    else members.push(position);
  });
  const chunks: number[][] = [];
  for (const members of groups.values()) {
    for (let start = 0; start < members.length; start += MAX_KEYS_PER_SCRIPT) chunks.push(members.slice(start, start + MAX_KEYS_PER_SCRIPT));
  }
  return chunks;
}

/** The values of `values` at these positions. */
export function pick<T>(values: readonly T[], at: readonly number[]): T[] {
  return at.map((position) => values[position] as T);
}

/** Runs one step (see the header). */
export async function runStep<T>(
  client: RedisScriptClient,
  storeName: string,
  describe: DescribeFailure,
  step: StepOptions<T>,
): Promise<StepResult<T>> {
  const values = new Array<T | undefined>(step.keys.length);
  if (step.keys.length === 0) return { values };
  const chunks = chunksOf(step.keys);
  const calls: ScriptCall[] = chunks.map((at) => ({
    script: step.script,
    keys: pick(step.keys, at).flatMap((k) => (k.with === undefined ? [k.key] : [k.key, ...k.with])),
    args: step.args(at),
  }));
  const ms = Math.max(1, step.deadline - Date.now());
  let timer: ReturnType<typeof setTimeout> | undefined;
  let timedOut = false;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      timedOut = true;
      reject(new StepTimedOut(ms));
    }, ms);
  });
  const abandoned = step.acquires === true ? () => timedOut : undefined;
  let result: Awaited<ReturnType<typeof dispatchScripts>>;
  try {
    result = await Promise.race([dispatchScripts(client, calls, { deadline: step.deadline, wait: step.wait, abandoned }), timeout]);
  } catch (error) {
    return { values, error: describe(step.operation, error) };
  } finally {
    clearTimeout(timer);
  }
  let failure: StoreUnavailableError | undefined;
  let wrote = false;
  chunks.forEach((at, i) => {
    const outcome = result.outcomes[i];
    if (outcome === undefined || !outcome.ok) {
      failure ??= describe(step.operation, outcome?.error);
      return;
    }
    let answers: T[];
    try {
      answers = step.read(outcome.reply, at);
    } catch {
      failure ??= new StoreUnavailableError(storeName, step.operation, `unexpected reply from Redis (${describeShape(outcome.reply)})`);
      return;
    }
    wrote = true;
    at.forEach((position, j) => {
      values[position] = answers[j];
    });
  });
  if (step.wait !== undefined && wrote) {
    const reached = result.replicasReached ?? 0;
    if (reached < step.wait.replicas) {
      failure ??= new StoreUnavailableError(
        storeName,
        step.operation,
        `the write reached ${reached} of ${step.wait.replicas} replicas within ${step.wait.timeoutMs} ms (waitReplicas)`,
      );
    }
  }
  return failure === undefined ? { values } : { values, error: failure };
}

/** Every value of a step, or its error thrown. */
export function allOf<T>(result: StepResult<T>): T[] {
  if (result.error !== undefined) throw result.error;
  return result.values as T[];
}

function describeShape(reply: unknown): string {
  if (Array.isArray(reply)) return `an array of ${reply.length}`;
  return reply === null ? "null" : typeof reply;
}
