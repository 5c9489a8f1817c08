/**
 * DynamoDB's clock, as `DynamoDBStore` knows it: an estimate of `service time − local time` kept as
 * an interval that surely holds the true offset, learned from the `Date` header of every DynamoDB
 * response the store receives.
 *
 * Why: DynamoDB has no clock in condition expressions, so a lease condition (`leaseUntil <= :now`)
 * compares against a time the caller sends. Sent from each caller's own clock, a consumer whose
 * clock runs ahead takes live leases, and one whose clock runs behind writes leases that end early
 * for everyone else. Every caller that sends DynamoDB's time instead agrees with every other one.
 *
 * One sample: a request sent at local `sentAt`, answered at local `receivedAt`, carrying
 * `Date: D` (whole seconds, truncated, as HTTP servers write it). The server wrote D at some
 * service time s with D <= s < D + 1000, and sentAt + offset <= s <= receivedAt + offset, so
 *
 *     D - receivedAt  <=  offset  <  D + 1000 - sentAt.
 *
 * Samples are intersected: the interval narrows to about one round trip once responses straddle a
 * second boundary. Between samples it widens by `driftPpm` of the time elapsed (two clocks' rates
 * differ slightly). An empty intersection means a clock stepped: the newest sample wins. A step of
 * the local clock between samples is caught by watching `now() − monotonic()`, which only a step
 * changes (NTP slews both clocks alike): the estimate is dropped and the next request starts over.
 *
 * `offset()` is undefined before the first sample (a cold start): the store then claims only absent
 * items and checks the lease it wrote against the first answer (store.ts, claim.ts). A response
 * without a usable `Date` (an emulator that sends none, a cached answer with `Age`) teaches nothing;
 * a store whose first answers carry no `Date` falls back to its local clock (offset 0, no error bound).
 *
 * What this is *not*: the SDK's `systemClockOffset` (a signing correction, only kept when the skew
 * is ≥ 5 minutes on older SDK versions, and without an error bound), or a change to the user's
 * client: the sampling middleware is added to each command the store sends, never to the client.
 */

/** The resolution of an HTTP `Date` header (ms). */
export const DATE_RESOLUTION_MS = 1000;
/** Default rate difference allowed between the local clock and DynamoDB's (parts per million). */
export const DEFAULT_DRIFT_PPM = 200;
/** A change of `now() − monotonic()` larger than this is a step of the local clock (ms). */
export const CLOCK_STEP_TOLERANCE_MS = 100;

/**
 * At a cold start (no sample yet), a window written now starts this far past the local clock: the
 * first answer then shows the lease long enough (and not too long) unless the local clock is off by
 * more than about half a second, so a synchronised host never pays a correction (claim.ts).
 */
export const COLD_START_PAD_MS = 1500;

/** Bounds of `service time − local time` (ms): the true offset is within [min, max]. */
export interface OffsetBounds {
  readonly min: number;
  readonly max: number;
}

export interface ServiceClockOptions {
  /** The local clock, epoch ms (the store's `now` option). */
  readonly now: () => number;
  /** A clock that never steps (ms, any origin). Default `performance.now`. */
  readonly monotonic?: () => number;
  /** Rate difference allowed between the two clocks (ppm). Default 200. */
  readonly driftPpm?: number;
}

/** An IMF-fixdate (RFC 9110), the only form a server may send: `Thu, 03 Dec 2026 14:06:18 GMT`. */
const IMF_FIXDATE = /^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/;

/** Epoch ms of an HTTP `Date` header, or undefined when absent or not one IMF-fixdate (e.g. two joined). */
export function parseHttpDate(value: string | undefined): number | undefined {
  if (value === undefined || !IMF_FIXDATE.test(value.trim())) return undefined;
  const ms = Date.parse(value);
  return Number.isFinite(ms) ? ms : undefined;
}

export class ServiceClock {
  readonly now: () => number;
  readonly #monotonic: () => number;
  readonly #driftPerMs: number;
  #known = false;
  #min = 0;
  #max = 0;
  /** Local time the bounds were valid at. */
  #at = 0;
  /** `now() − monotonic()` when the bounds were set: a step of the local clock changes it. */
  #anchor = 0;
  /** True once a response came back without a usable Date while no estimate existed. */
  #dateless = false;
  #samples = 0;
  #generation = 0;

  constructor(options: ServiceClockOptions) {
    this.now = options.now;
    this.#monotonic = options.monotonic ?? (() => performance.now());
    this.#driftPerMs = (options.driftPpm ?? DEFAULT_DRIFT_PPM) / 1_000_000;
  }

  /** How many samples the estimate has taken (diagnostics and tests). */
  get samples(): number {
    return this.#samples;
  }

  /**
   * Changes whenever the estimate starts over: its first sample, an answer that contradicts it, a
   * step of the local clock, `reset`, a first answer without a Date. While it stays the same, every
   * bound the estimate gave held the true offset, so what was written from them stands (claim.ts).
   */
  get generation(): number {
    this.#dropIfStepped();
    return this.#generation;
  }

  /**
   * Records one response: sent at local `sentAt`, answered at local `receivedAt`, with the response's
   * `Date` header (`age`: its `Age` header, present on a cached answer, which makes Date stale).
   */
  observe(sentAt: number, receivedAt: number, date: string | undefined, age?: string): void {
    if (age !== undefined) return;
    const server = parseHttpDate(date);
    if (server === undefined) {
      if (!this.#known && !this.#dateless) {
        this.#dateless = true;
        this.#generation += 1;
      }
      return;
    }
    // The local clock went back during the request: no bound can be drawn from it.
    if (!(receivedAt >= sentAt)) return;
    this.#dropIfStepped();
    let min = server - receivedAt;
    let max = server + DATE_RESOLUTION_MS - sentAt;
    if (this.#known) {
      const widen = this.#driftPerMs * Math.abs(receivedAt - this.#at);
      const narrowedMin = Math.max(this.#min - widen, min);
      const narrowedMax = Math.min(this.#max + widen, max);
      // Empty: one of the clocks stepped since the last sample; the new sample alone is true now.
      if (narrowedMin <= narrowedMax) [min, max] = [narrowedMin, narrowedMax];
      else this.#generation += 1;
    } else {
      this.#generation += 1;
    }
    this.#min = min;
    this.#max = max;
    this.#at = receivedAt;
    this.#anchor = this.#localMinusMonotonic() ?? this.now() - this.#monotonic();
    this.#known = true;
    this.#dateless = false;
    this.#samples += 1;
  }

  /**
   * Bounds of `service − local` at local time `at` (default now), widened for the drift since the
   * last sample; undefined before the first sample. `{ min: 0, max: 0 }` when the service sends no Date.
   */
  offset(at: number = this.now()): OffsetBounds | undefined {
    this.#dropIfStepped();
    if (!this.#known) return this.#dateless ? { min: 0, max: 0 } : undefined;
    const widen = this.#driftPerMs * Math.abs(at - this.#at);
    return { min: this.#min - widen, max: this.#max + widen };
  }

  /** The earliest the service's clock can read at local time `at`; the local time itself when unknown. */
  earliest(at: number = this.now()): number {
    const bounds = this.offset(at);
    return bounds === undefined ? at : at + bounds.min;
  }

  /**
   * The `:now` of a condition: the earliest DynamoDB's clock can read now, so no lease is ever seen
   * as ended before it has. 0 at a cold start: no existing lease or retention counts as ended at all.
   */
  conditionNow(): number {
    const at = this.now();
    const bounds = this.offset(at);
    return bounds === undefined ? 0 : Math.floor(at + bounds.min);
  }

  /**
   * Where a window written now starts: the latest DynamoDB's clock can read now, so a lease written
   * is never shorter than asked. The local clock + `COLD_START_PAD_MS` at a cold start.
   */
  deadlineBase(): number {
    const at = this.now();
    const bounds = this.offset(at);
    return bounds === undefined ? at + COLD_START_PAD_MS : Math.ceil(at + bounds.max);
  }

  /** Forgets the estimate: the next request starts over, as at a cold start. */
  reset(): void {
    this.#known = false;
    this.#dateless = false;
    this.#generation += 1;
  }

  #dropIfStepped(): void {
    if (!this.#known) return;
    const difference = this.#localMinusMonotonic();
    if (difference !== undefined && Math.abs(difference - this.#anchor) > CLOCK_STEP_TOLERANCE_MS) {
      this.#known = false;
      this.#generation += 1;
    }
  }

  /**
   * `now() − monotonic()`, read between two monotonic readings; undefined when those are more than
   * 5 ms apart (the thread was descheduled between the reads, as on a loaded host: no conclusion).
   */
  #localMinusMonotonic(): number | undefined {
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const before = this.#monotonic();
      const local = this.now();
      const after = this.#monotonic();
      if (after - before <= 5) return local - (before + after) / 2;
    }
    return undefined;
  }
}

/** The slice of an SDK command the sampling middleware needs (every `@aws-sdk/client-dynamodb` command has it). */
export interface CommandWithStack {
  readonly middlewareStack: {
    add(
      middleware: (next: (args: unknown) => Promise<{ response: unknown }>) => (args: unknown) => Promise<{ response: unknown }>,
      options: { step: "deserialize"; priority: "low"; name: string },
    ): void;
  };
}

const sampled = new WeakSet<object>();

function headerOf(response: unknown, name: string): string | undefined {
  const headers = (response as { headers?: Record<string, unknown> } | undefined)?.headers;
  if (headers === undefined || headers === null || typeof headers !== "object") return undefined;
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === name) return typeof value === "string" ? value : undefined;
  }
  return undefined;
}

/**
 * Adds to `command` (not to any client) a middleware that samples `clock` on every HTTP attempt: it
 * sits in the deserialize step below the deserializer, so it sees the raw response of a success and
 * of an error answer (a failed condition included) alike, once per attempt of the SDK's retries.
 */
export function sampledBy<C extends CommandWithStack>(command: C, clock: ServiceClock): C {
  // A command sent twice (a resend of the same object) keeps its one middleware.
  if (sampled.has(command)) return command;
  sampled.add(command);
  command.middlewareStack.add(
    (next) => async (args) => {
      const sentAt = clock.now();
      const result = await next(args);
      clock.observe(sentAt, clock.now(), headerOf(result?.response, "date"), headerOf(result?.response, "age"));
      return result;
    },
    { step: "deserialize", priority: "low", name: "babelqueueServiceClock" },
  );
  return command;
}
