/**
 * BENCH — what one contender in a side-by-side run is: an SQS Lambda handler, the side effect it
 * guards (counted, so the bench can check every kit really ran each new message once and no
 * duplicate), and a counter of the store requests it issued.
 *
 * What this is *not*: part of the package.
 */
import type { Context, SQSBatchResponse, SQSEvent } from "aws-lambda";

/** Requests a kit sent to its store since the last reset. */
export interface RequestCounter {
  /** Store requests (round trips) since the last `reset`. */
  readonly count: number;
  reset(): void;
}

/** A simple mutable counter. */
export class Tally implements RequestCounter {
  count = 0;
  add(n = 1): void {
    this.count += n;
  }
  reset(): void {
    this.count = 0;
  }
}

/**
 * The effect both kits guard: counts its runs (in all, and per id). Cheap on purpose, so the kits'
 * own cost shows. `failNext` scripts handler failures: an id in it throws once (and is not counted).
 */
export class Effect {
  runs = 0;
  readonly perId = new Map<string, number>();
  readonly failNext = new Set<string>();
  run = async (id: string): Promise<void> => {
    if (this.failNext.delete(id)) throw new Error("scripted handler failure");
    this.runs += 1;
    this.perId.set(id, (this.perId.get(id) ?? 0) + 1);
  };
}

export interface Kit {
  /** Short column name, e.g. "ours" / "Powertools". */
  readonly name: string;
  /** What exactly runs, for the report. */
  readonly description: string;
  readonly handler: (event: SQSEvent, context: Context) => Promise<SQSBatchResponse>;
  readonly effect: Effect;
  readonly requests: RequestCounter;
}
