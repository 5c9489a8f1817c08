/**
 * BENCH — what the Durable Object's periodic sweep adds to the bill in a steady state: a model,
 * computed from the sweep's own schedule (stores/durable-object/sweep.ts) and the prices, not a
 * measurement. The measured cost figures count each row's one deletion (the walk that finds it
 * expired); the walks in between, which read every live row and re-arm the alarm, depend on how
 * busy the object is, so they are modelled here per message arrival rate.
 *
 * Steady state of one object receiving `ratePerSecond` new messages, each kept `retentionMs`:
 *   - live rows L = rate × retention;
 *   - a complete walk is followed by the next one after the later of its gap (10 ms per live row,
 *     1 s to 1 h) and the next row's expiry (about one arrival apart): interval = max(gap, 1 / rate);
 *   - a walk reads L rows, in ⌈L / chunk⌉ alarm invocations, each one request and one `setAlarm`
 *     (a row written).
 *
 * What this is *not*: a bound for bursts (a burst's rows expire together, in one walk), or for
 * objects that sit idle (an object with nothing that can expire sets no alarm and reads nothing).
 */
import { SWEEP_CHUNK_ROWS, sweepGapMs } from "../stores/durable-object/sweep.js";
import { PRICES, dollars } from "./prices.js";

/** The sweep's share of one object's bill at a steady arrival rate. */
export interface SweepSteadyState {
  readonly ratePerSecond: number;
  /** Rows the object holds: arrivals over the retention. */
  readonly liveRows: number;
  /** Seconds from one walk's end to the next. */
  readonly intervalSeconds: number;
  /** Alarm invocations per message (each a request and a row written by its `setAlarm`). */
  readonly alarmRunsPerMessage: number;
  readonly rowsReadPerMessage: number;
  readonly usdPerMillionMessages: number;
  /** What the walks cost the object in 30 days. */
  readonly usdPer30Days: number;
}

export function sweepSteadyState(ratePerSecond: number, retentionMs: number): SweepSteadyState {
  const liveRows = ratePerSecond * (retentionMs / 1000);
  const intervalSeconds = Math.max(sweepGapMs(liveRows) / 1000, 1 / ratePerSecond);
  const runsPerWalk = Math.max(1, Math.ceil(liveRows / SWEEP_CHUNK_ROWS));
  const messagesPerWalk = ratePerSecond * intervalSeconds;
  const alarmRunsPerMessage = runsPerWalk / messagesPerWalk;
  const rowsReadPerMessage = liveRows / messagesPerWalk;
  const usdPerMessage =
    dollars(PRICES.doRequest, alarmRunsPerMessage) + dollars(PRICES.doRowWritten, alarmRunsPerMessage) + dollars(PRICES.doRowRead, rowsReadPerMessage);
  return {
    ratePerSecond,
    liveRows,
    intervalSeconds,
    alarmRunsPerMessage,
    rowsReadPerMessage,
    usdPerMillionMessages: usdPerMessage * 1_000_000,
    usdPer30Days: usdPerMessage * ratePerSecond * 30 * 24 * 60 * 60,
  };
}

/** The arrival rates per object the docs show the model at: one a minute, one a second, a hundred a second. */
export const SWEEP_MODEL_RATES: readonly { readonly ratePerSecond: number; readonly label: string }[] = [
  { ratePerSecond: 1 / 60, label: "1 a minute" },
  { ratePerSecond: 1, label: "1 a second" },
  { ratePerSecond: 100, label: "100 a second" },
];
