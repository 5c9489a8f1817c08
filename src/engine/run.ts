/**
 * Phase 2, the run: lanes (one per FIFO group, in order; one per ungrouped message), a pool
 * of at most `concurrency` lanes at a time, and the handler invocation itself.
 *
 * A lane goes on to its next message once the previous one *finished* (its commit may still
 * be in flight: it counts as acknowledged for FIFO order), and stops at the first message that
 * is not acknowledged. A later copy of an id inside a group never runs, but holds its place: the
 * lane waits there for the first copy's final result (the copy's own result says whether the lane
 * goes on). When the runtime's deadline comes, no lane starts another handler.
 *
 * What this is *not*: the verdict (decision.ts) or the store steps (gate.ts, commit.ts).
 */
import { messageTraceId } from "../envelope.js";
import type { RunInterceptor } from "../events.js";
import type { Handler, HandlerContext, Item } from "./types.js";

/**
 * Groups items into lanes: one per FIFO group (in order), one per ungrouped runnable message.
 * An ungrouped copy never runs and holds nothing back: it is in no lane. A grouped copy keeps its
 * place in its group's lane, where it waits for its first copy (see `runLanes`' `park`).
 */
export function lanesOf<Message, RC>(items: readonly Item<Message, RC>[]): Item<Message, RC>[][] {
  const lanes: Item<Message, RC>[][] = [];
  const byGroup = new Map<string, Item<Message, RC>[]>();
  for (const item of items) {
    const group = item.delivery.group;
    if (group === undefined) {
      if (item.result === undefined && item.firstCopy === undefined) lanes.push([item]);
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

/** A lane stopped at `at` until `wait` settles (an item waiting on something outside its lane). */
interface Parked<T> {
  readonly lane: readonly T[];
  readonly at: number;
  readonly wait: Promise<unknown>;
}

/**
 * Runs the lanes with at most `limit` at once. `step` handles one item and says whether the lane
 * may go on (false: the item was not acknowledged, so the rest of a FIFO group is blocked).
 * `stopped` is checked before every item: once true, no lane starts anything more.
 *
 * `park` (given only when some lane must wait on another — a grouped copy on its first copy)
 * answers a promise for an item that may not be stepped yet: its lane waits for it without holding
 * one of the `limit` places, so that the lane it waits on can run even when every place is taken.
 * (Where every lane runs at once and nothing can wait, a lane of one is only stepped; with `park`
 * a lane of one runs as any lane, so that a copy alone in its lane parks too.) What a lane
 * waits on is always an earlier item of the batch, so the waits cannot form a cycle.
 */
export async function runLanes<T>(
  lanes: readonly T[][],
  limit: number,
  stopped: () => boolean,
  step: (item: T) => boolean | Promise<boolean>,
  blockRest: (rest: readonly T[]) => void,
  park?: (item: T) => Promise<unknown> | undefined,
): Promise<void> {
  /**
   * Runs one lane from `from` to its end, or to its first item that is not acknowledged (the rest
   * are blocked), or to an item that must wait (it answers where and on what).
   */
  const runFrom = async (lane: readonly T[], from: number): Promise<Parked<T> | undefined> => {
    for (let i = from; i < lane.length; i += 1) {
      if (stopped()) return undefined;
      const wait = park?.(lane[i] as T);
      if (wait !== undefined) return { lane, at: i, wait };
      // A step the gate already decided answers at once: no await (no event-loop turn) for it.
      const goOn = step(lane[i] as T);
      if (!(typeof goOn === "boolean" ? goOn : await goOn)) {
        blockRest(lane.slice(i + 1));
        return undefined;
      }
    }
    return undefined;
  };
  if (lanes.length <= limit) {
    // Room for every lane at once (the usual batch): each starts now, and a lane of one message is
    // just its step, with no loop wrapped around it. A parked lane simply waits in its place.
    const runLane = async (lane: readonly T[]): Promise<void> => {
      for (let parked = await runFrom(lane, 0); parked !== undefined; parked = await runFrom(lane, parked.at)) await parked.wait;
    };
    const running: (boolean | Promise<unknown>)[] = [];
    for (const lane of lanes) {
      if (stopped()) break;
      // A lane of one that may have to wait (a copy whose first copy is elsewhere) still parks first.
      running.push(lane.length === 1 && park === undefined ? step(lane[0] as T) : runLane(lane));
    }
    await Promise.all(running);
    return;
  }
  // A pool of `limit` workers. A parked lane leaves its worker; once its wait settles it is ready,
  // and the next free worker takes it up (before any new lane). A worker with nothing to take while
  // lanes are parked waits for one to be ready; one is always left to do so.
  let next = 0;
  let parkedLanes = 0;
  const ready: Parked<T>[] = [];
  let readied: Promise<void> | undefined;
  let wake: (() => void) | undefined;
  const worker = async (): Promise<void> => {
    while (!stopped()) {
      const resumed = ready.shift();
      let parked: Parked<T> | undefined;
      if (resumed !== undefined) parked = await runFrom(resumed.lane, resumed.at);
      else if (next < lanes.length) parked = await runFrom(lanes[next++] as T[], 0);
      else if (parkedLanes > 0) {
        readied ??= new Promise<void>((resolve) => (wake = resolve));
        await readied;
        continue;
      } else return;
      if (parked === undefined) continue;
      const lane = parked;
      parkedLanes += 1;
      void lane.wait.then(() => {
        parkedLanes -= 1;
        ready.push(lane);
        const waking = wake;
        readied = wake = undefined;
        waking?.();
      });
    }
  };
  await Promise.all(Array.from({ length: limit }, worker));
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
