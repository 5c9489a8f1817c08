/**
 * The two operator commands over any `Store`:
 *
 * - `inspect`: per id, what the store holds — `done` (with the retention left), `in-flight` (with
 *   the lease left), or `absent` — and the payload fingerprint, from `store.inspect(id)`. A store
 *   without `inspect` is asked `seen(id)` instead: `done` or `not-done` (absent or in flight; it
 *   cannot tell), without times.
 * - `forget`: drops ids so their next delivery runs the effect again (a deliberate replay).
 *   Several ids are a dry run unless `yes`; so is one id that is in flight right now (forgetting
 *   it lets a second delivery run while the first may still be running).
 *
 * Output is a table for people or one JSON document for scripts; every message passes through
 * `redact`, so no token or URL password is ever printed.
 *
 * What this is *not*: a bulk tool. Ids are handled 10 at a time; for millions of ids, use the
 * backend's own tools (a DynamoDB scan, `redis-cli --scan`, SQL).
 */
import type { IdRecord, Store } from "../src/contract.js";
import { errorFacts } from "../src/observability/error-facts.js";

export interface CliOutput {
  out(line: string): void;
  err(line: string): void;
}

/** What the CLI reports about one id. */
export interface IdReport {
  readonly id: string;
  /** `not-done`: a seen-set answer (absent, or in flight: the store cannot tell). */
  readonly status: "done" | "in-flight" | "absent" | "not-done" | "error";
  readonly leaseLeftMs?: number;
  readonly retentionLeftMs?: number;
  readonly fingerprint?: string;
  /** Where the answer came from: `inspect`, or `seen` for a store without it. */
  readonly source: "inspect" | "seen";
  readonly error?: string;
}

const CONCURRENCY = 10;

/** Replaces every secret, and any `user:password@` in a URL, with `***`. */
export function redact(text: string, secrets: readonly string[]): string {
  let result = text;
  for (const secret of secrets) if (secret.length >= 3) result = result.split(secret).join("***");
  return result.replace(/([a-z][a-z0-9+.-]*:\/\/)[^\s/@:]*:[^\s/@]*@/gi, "$1***@");
}

/** 850ms, 42s, 3m 5s, 2h 10m, 3d 23h; "forever" for a record that never expires (JSON output: null). */
export function formatDuration(ms: number): string {
  if (ms === Number.POSITIVE_INFINITY) return "forever";
  if (!Number.isFinite(ms) || ms < 0) return "-";
  if (ms < 1000) return `${Math.round(ms)}ms`;
  let seconds = Math.floor(ms / 1000);
  const days = Math.floor(seconds / 86_400);
  seconds -= days * 86_400;
  const hours = Math.floor(seconds / 3600);
  seconds -= hours * 3600;
  const minutes = Math.floor(seconds / 60);
  seconds -= minutes * 60;
  if (days > 0) return `${days}d ${hours}h`;
  if (hours > 0) return `${hours}h ${minutes}m`;
  if (minutes > 0) return `${minutes}m ${seconds}s`;
  return `${seconds}s`;
}

async function inParallel<T, R>(items: readonly T[], work: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(CONCURRENCY, items.length) }, async () => {
      while (next < items.length) {
        const index = next++;
        results[index] = await work(items[index] as T);
      }
    }),
  );
  return results;
}

function describeError(error: unknown, secrets: readonly string[]): string {
  const facts = errorFacts(error);
  // The operator typed these ids and owns this terminal: the store's own message helps here, redacted.
  const message = error instanceof Error && error.message !== "" ? `: ${error.message}` : "";
  const cause = facts.cause === undefined ? "" : ` (cause: ${facts.cause.name}${facts.cause.code === undefined ? "" : ` ${facts.cause.code}`})`;
  return redact(`${facts.name}${message}${cause}`, secrets);
}

function fromRecord(id: string, record: IdRecord | null): IdReport {
  if (record === null) return { id, status: "absent", source: "inspect" };
  return {
    id,
    status: record.status,
    ...(record.leaseLeftMs === undefined ? {} : { leaseLeftMs: record.leaseLeftMs }),
    ...(record.retentionLeftMs === undefined ? {} : { retentionLeftMs: record.retentionLeftMs }),
    ...(record.fingerprint === undefined ? {} : { fingerprint: record.fingerprint }),
    source: "inspect",
  };
}

/** What the store holds for each id (in order). A failure is that id's report, not a throw. */
export async function lookUp(store: Store, ids: readonly string[], secrets: readonly string[]): Promise<IdReport[]> {
  const inspect = store.inspect?.bind(store);
  return inParallel(ids, async (id): Promise<IdReport> => {
    try {
      if (inspect !== undefined) return fromRecord(id, await inspect(id));
      return { id, status: (await store.seen(id)) ? "done" : "not-done", source: "seen" };
    } catch (error) {
      return { id, status: "error", source: inspect === undefined ? "seen" : "inspect", error: describeError(error, secrets) };
    }
  });
}

function table(rows: readonly (readonly string[])[]): string[] {
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? "").length))) ?? [];
  return rows.map((row) => row.map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column] ?? 0))).join("  ").trimEnd());
}

const shown = (id: string) => (id.length > 80 ? `${id.slice(0, 79)}…` : id);

function reportRows(reports: readonly IdReport[]): string[] {
  return table([
    ["ID", "STATUS", "LEASE LEFT", "RETENTION LEFT", "FINGERPRINT"],
    ...reports.map((report) => [
      shown(report.id),
      report.status,
      report.leaseLeftMs === undefined ? "-" : formatDuration(report.leaseLeftMs),
      retentionCell(report),
      report.status === "error" ? (report.error ?? "") : (report.fingerprint ?? "-"),
    ]),
  ]);
}

/** A done record inspect found without an expiry is kept for good (a BabelQueue layout's default). */
function retentionCell(report: IdReport): string {
  if (report.retentionLeftMs !== undefined) return formatDuration(report.retentionLeftMs);
  return report.status === "done" && report.source === "inspect" ? "no expiry" : "-";
}

const SEEN_NOTE = "(this store has no inspect: status from seen(); not-done means absent or in flight, times unknown)";

/** `inspect`: exit 0 when every id was answered, 1 when the store failed for any. */
export async function inspectCommand(
  store: Store,
  ids: readonly string[],
  options: { json: boolean; label: string; secrets: readonly string[] },
  output: CliOutput,
): Promise<number> {
  const reports = await lookUp(store, ids, options.secrets);
  if (options.json) output.out(JSON.stringify({ store: options.label, records: reports }));
  else {
    output.out(options.label);
    for (const line of reportRows(reports)) output.out(line);
    if (reports.some((report) => report.source === "seen")) output.out(SEEN_NOTE);
  }
  return reports.some((report) => report.status === "error") ? 1 : 0;
}

/** One id's fate in `forget`. */
export interface ForgetReport {
  readonly id: string;
  readonly forgotten: boolean;
  /** The status before (when it was looked up). */
  readonly before?: IdReport["status"];
  readonly error?: string;
}

/** One id of a dry run: nothing forgotten; its status before, and the store's error when it could not be read. */
function dryRunReport(id: string, before: IdReport | undefined): ForgetReport {
  if (before === undefined) return { id, forgotten: false };
  return { id, forgotten: false, before: before.status, ...(before.error === undefined ? {} : { error: before.error }) };
}

/**
 * `forget`: exit 0 when done (or a dry run by design), 1 when the store failed (a dry run's look-up
 * included) or an in-flight id was refused without `yes`.
 */
export async function forgetCommand(
  store: Store,
  ids: readonly string[],
  options: { json: boolean; yes: boolean; dryRun: boolean; label: string; secrets: readonly string[] },
  output: CliOutput,
): Promise<number> {
  const canInspect = typeof store.inspect === "function";
  const before = canInspect || ids.length > 1 || options.dryRun ? await lookUp(store, ids, options.secrets) : undefined;
  const inFlight = before?.filter((report) => report.status === "in-flight").map((report) => report.id) ?? [];
  // An id that could not be looked up may be in flight: without `yes` it is not forgotten blind.
  const unknown = before?.some((report) => report.status === "error") ?? false;
  const dryRun = options.dryRun || (!options.yes && (ids.length > 1 || inFlight.length > 0 || unknown));

  if (dryRun) {
    const reports: ForgetReport[] = ids.map((id, i) => dryRunReport(id, before?.[i]));
    const refused = !options.dryRun && ids.length === 1 && inFlight.length > 0;
    // A dry run that could not look an id up has not shown what forgetting would do: a store failure.
    const failed = before?.some((report) => report.status === "error") ?? false;
    if (options.json) output.out(JSON.stringify({ store: options.label, dryRun: true, results: reports }));
    else {
      output.out(options.label);
      output.out(`dry run: would forget ${ids.length} id(s); nothing was changed`);
      if (before !== undefined) for (const line of reportRows(before)) output.out(line);
      if (inFlight.length > 0) {
        output.out(`${inFlight.length} id(s) are in flight: forgetting them lets another delivery run while this one may still be running`);
      }
      output.out("pass --yes to forget them");
    }
    return refused || failed ? 1 : 0;
  }

  const results = await inParallel(ids, async (id): Promise<ForgetReport> => {
    const status = before?.[ids.indexOf(id)]?.status;
    try {
      await store.forget(id);
      return { id, forgotten: true, ...(status === undefined ? {} : { before: status }) };
    } catch (error) {
      return { id, forgotten: false, ...(status === undefined ? {} : { before: status }), error: describeError(error, options.secrets) };
    }
  });
  if (options.json) output.out(JSON.stringify({ store: options.label, dryRun: false, results }));
  else {
    output.out(options.label);
    for (const result of results) {
      if (result.forgotten) output.out(`forgot ${shown(result.id)}${result.before === undefined ? "" : ` (was ${result.before})`}`);
      else output.err(`could not forget ${shown(result.id)}: ${result.error ?? "unknown error"}`);
    }
  }
  return results.every((result) => result.forgotten) ? 0 : 1;
}
