/**
 * The demo's verdict table: one row per scenario (a runtime + a store), the same columns for all.
 * A scenario passes when nothing was lost and no effect ran twice.
 */
export interface DemoReport {
  /** e.g. "batch engine + InMemoryStore", "Lambda SQS + DynamoDB Local". */
  scenario: string;
  /** Every delivery handed to a consumer, redeliveries included. */
  deliveries: number;
  /** Distinct meta.ids produced. */
  uniqueIds: number;
  /** Successful handler runs (the side effects), counted by the handler itself. */
  effects: number;
  /** Deliveries acknowledged as duplicates without running. */
  duplicatesSuppressed: number;
  /** Deliveries parked because another delivery held the lease. */
  inFlightParks: number;
  /** Deliveries not acknowledged and redelivered (handler failures, parks, store errors). */
  retries: number;
  /** Ids whose effect never ran. */
  lost: number;
  /** Extra effects beyond one per id. */
  duplicateEffects: number;
  /** Wall time of the scenario (ms). */
  elapsedMs: number;
}

export function passed(report: DemoReport): boolean {
  return report.lost === 0 && report.duplicateEffects === 0;
}

export function formatReports(reports: readonly DemoReport[]): string {
  const columns: [string, (r: DemoReport) => string][] = [
    ["scenario", (r) => r.scenario],
    ["deliveries", (r) => String(r.deliveries)],
    ["unique ids", (r) => String(r.uniqueIds)],
    ["effects", (r) => String(r.effects)],
    ["dupes suppressed", (r) => String(r.duplicatesSuppressed)],
    ["in-flight parks", (r) => String(r.inFlightParks)],
    ["retries", (r) => String(r.retries)],
    ["lost", (r) => String(r.lost)],
    ["duplicate effects", (r) => String(r.duplicateEffects)],
    ["seconds", (r) => (r.elapsedMs / 1000).toFixed(1)],
    ["verdict", (r) => (passed(r) ? "ok" : "FAIL")],
  ];
  const rows = [columns.map(([title]) => title), ...reports.map((r) => columns.map(([, cell]) => cell(r)))];
  const widths = columns.map((_, c) => Math.max(...rows.map((row) => (row[c] as string).length)));
  const line = (row: string[]) => `| ${row.map((cell, c) => (c === 0 ? cell.padEnd(widths[c] as number) : cell.padStart(widths[c] as number))).join(" | ")} |`;
  const rule = `|${widths.map((w, c) => (c === 0 ? `:${"-".repeat(w + 1)}` : `${"-".repeat(w + 1)}:`)).join("|")}|`;
  return [line(rows[0] as string[]), rule, ...rows.slice(1).map(line)].join("\n");
}
