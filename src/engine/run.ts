/**
 * Phase 2, the run: lanes (one per FIFO group, in order; one per ungrouped message), a pool
 * of at most `concurrency` lanes at a time, and the handler invocation itself.
 *
 * A lane goes on to its next message once the previous one *finished* (its commit may still
 * be in flight: it counts as acknowledged for FIFO order), and stops at the first message that
 * is not acknowledged. When the runtime's deadline comes, no lane starts another handler.
 *
 * What this is *not*: the verdict (decision.ts) or the store steps (gate.ts, commit.ts).
 */
import { messageTraceId } from "../envelope.js";
import type { RunInterceptor } from "../events.js";
import type { Handler, HandlerContext, Item } from "./types.js";

/** Groups items into lanes: one per FIFO group (in order), one per ungrouped runnable message. Copies never run. */
export function lanesOf<Message, RC>(items: readonly Item<Message, RC>[]): Item<Message, RC>[][] {
  const lanes: Item<Message, RC>[][] = [];
  const byGroup = new Map<string, Item<Message, RC>[]>();
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

/**
 * Runs the lanes with at most `limit` at once. `step` handles one item and says whether the lane
 * may go on (false: the item was not acknowledged, so the rest of a FIFO group is blocked).
 * `stopped` is checked before every item: once true, no lane starts anything more.
 */
export async function runLanes<T>(
  lanes: readonly T[][],
  limit: number,
  stopped: () => boolean,
  step: (item: T) => boolean | Promise<boolean>,
  blockRest: (rest: readonly T[]) => void,
): Promise<void> {
  /** Runs one lane to its end, or to its first item that is not acknowledged (the rest are blocked). */
  const runLane = async (lane: readonly T[]): Promise<void> => {
    for (let i = 0; i < lane.length; i += 1) {
      if (stopped()) return;
      // A step the gate already decided answers at once: no await (no event-loop turn) for it.
      const goOn = step(lane[i] as T);
      if (!(typeof goOn === "boolean" ? goOn : await goOn)) {
        blockRest(lane.slice(i + 1));
        return;
      }
    }
  };
  if (lanes.length <= limit) {
    // Room for every lane at once (the usual batch): each starts now, and a lane of one message is
    // just its step, with no loop wrapped around it.
    const running: (boolean | Promise<unknown>)[] = [];
    for (const lane of lanes) {
      if (stopped()) break;
      running.push(lane.length === 1 ? step(lane[0] as T) : runLane(lane));
    }
    await Promise.all(running);
    return;
  }
  let next = 0;
  const workers = Array.from({ length: limit }, async () => {
    while (next < lanes.length && !stopped()) await runLane(lanes[next++] as T[]);
  });
  await Promise.all(workers);
}

export type RunOutcome = { readonly ok: true } | { readonly ok: false; readonly error: unknown };

/** The outcome of every handler run that returned: one object, shared. */
const RAN: RunOutcome = Object.freeze({ ok: true as const });

/**
 * Invokes the user's handler once (through the interceptor when there is one), timing it. Never
 * rejects: a throw (synchronous or not) is an outcome. Not an `async` function: the handler's own
 * promise is continued directly, without a frame of ours suspended around it.
 */
export function invoke<Message, RC>(
  handle: Handler<Message, RC>,
  intercept: RunInterceptor | undefined,
  item: Item<Message, RC>,
  extra?: { readonly tx?: unknown },
): Promise<RunOutcome> {
  const delivery = item.delivery;
  const context = (
    extra === undefined
      ? { ...delivery.context, key: item.key, attempts: item.attempts, dedupe: item.dedupe }
      : { ...delivery.context, key: item.key, attempts: item.attempts, dedupe: item.dedupe, ...extra }
  ) as HandlerContext<RC>;
  const started = Date.now();
  let running: unknown;
  try {
    if (intercept === undefined) running = handle(item.message as Message, context);
    else {
      const info = {
        index: item.index,
        key: item.key,
        attempts: item.attempts,
        ...(delivery.messageId === undefined ? {} : { messageId: delivery.messageId }),
        ...(delivery.headers === undefined ? {} : { headers: delivery.headers }),
        ...messageTraceId(item.message),
      };
      running = intercept(async () => {
        await handle(item.message as Message, context);
      }, info);
    }
  } catch (error) {
    item.handlerMs = Date.now() - started;
    return Promise.resolve({ ok: false, error });
  }
  // Inline callbacks (no named closure per call: a bundler keeping names would wrap each one).
  return Promise.resolve(running).then(
    () => {
      item.handlerMs = Date.now() - started;
      return RAN;
    },
    (error: unknown) => {
      item.handlerMs = Date.now() - started;
      return { ok: false, error };
    },
  );
}
