/**
 * BENCH — the benchmark tables the docs show, each rendered from one run's results
 * (bench/results/results.json) by name: `<!-- bench:NAME -->` … `<!-- /bench:NAME -->` in a markdown
 * file is replaced by `BENCH_SECTIONS[NAME](results)` (scripts/bench-docs.ts), and a test fails when
 * a file's section differs from what the results say — so a figure in the docs cannot drift from the
 * benchmark, nor be typed by hand.
 *
 * Every section is a table (plus, at most, one line saying what it compares) or a list generated
 * line by line from the results, never prose around it: the prose lives in the document, the
 * numbers come from here. Ratios are Powertools ÷ ours, as
 * in the report: above 1.00× ours costs less.
 *
 * What this is *not*: a measurement, or the report (bench/report.ts renders report.md in full).
 */
import type { BundleFigure } from "./bundle.js";
import { type BenchResults, aheadOrLevelLines, fmt, keyRows, overheadCell, ratio } from "./report.js";
import { COST_WORKLOADS, costFigure, perMillion } from "./report-cost.js";
import { SCENARIOS, type ScenarioName } from "./store-runs.js";
import { SWEEP_MODEL_RATES, sweepSteadyState } from "./sweep-model.js";
import { DEFAULT_RETENTION_MS } from "../src/contract.js";

type Section = (results: BenchResults) => string;

const table = (head: readonly string[], align: readonly ("l" | "r")[], rows: readonly (readonly string[])[]): string =>
  [`| ${head.join(" | ")} |`, `|${align.map((a) => (a === "r" ? "---:" : "---")).join("|")}|`, ...rows.map((row) => `| ${row.join(" | ")} |`)].join("\n");

const usd = (value: number) => fmt(value, "$");
const kib = (bytes: number) => fmt(bytes, "B");

function requests(results: BenchResults, backend: "dynamodb" | "redis", kit: string, scenario: ScenarioName): number {
  return results[backend]?.figures.find((one) => one.kit === kit && one.scenario === scenario)?.requests ?? Number.NaN;
}

function bundle(results: BenchResults, id: string): BundleFigure | undefined {
  return results.bundles.find((one) => one.id === id);
}

/** The key figures the README's headline table shows (labels of `keyRows`). */
const HEADLINE_LABELS: readonly string[] = [
  "DynamoDB requests / batch of 10 new",
  "DynamoDB requests / batch of 10 redelivered",
  "Redis requests / batch of 10 new",
  "DynamoDB wall time / batch of 100 new",
  "Per-message overhead vs bare handler (in memory)",
  "Lambda bundle, SDK external (min+gzip)",
];

/** The sections by name. */
export const BENCH_SECTIONS: Readonly<Record<string, Section>> = {
  /** The run the figures come from. */
  run: ({ facts }) =>
    `Measured by \`npm run bench\` on ${facts.date.slice(0, 10)} (${facts.cores} × ${facts.cpu}, Node ${facts.node}, ${facts.delayMs} ms injected each way on the store round trips)` +
    (facts.measured === undefined
      ? "."
      : `, in parts: ${Object.entries(facts.measured).map(([part, date]) => `${part} on ${date.slice(0, 10)}`).join(", ")}.`),

  /** The key figures, ours vs Powertools. */
  key: (results) =>
    table(
      ["figure", "ours", "Powertools", "Powertools ÷ ours"],
      ["l", "r", "r", "r"],
      keyRows(results).map((row) => [row.label, fmt(row.ours, row.unit), fmt(row.powertools, row.unit), ratio(row.powertools, row.ours)]),
    ),

  /** A few of the key figures, for the README: requests, wall time, overhead, and one where Powertools is ahead. */
  headline: (results) =>
    table(
      ["figure", "ours", "Powertools", "Powertools ÷ ours"],
      ["l", "r", "r", "r"],
      keyRows(results)
        .filter((row) => HEADLINE_LABELS.includes(row.label))
        .map((row) => [row.label, fmt(row.ours, row.unit), fmt(row.powertools, row.unit), ratio(row.powertools, row.ours)]),
    ),

  /** Per-message overhead against a bare handler, in memory. */
  overhead: ({ overhead }) => {
    const over = (kit: string) => overhead.figures.find((one) => one.kit === kit)?.overheadUs ?? Number.NaN;
    return table(
      ["kit", "what runs", "µs / message", "overhead vs bare", "Powertools ÷ this"],
      ["l", "l", "r", "r", "r"],
      overhead.figures.map((one) => [
        one.kit,
        one.description,
        fmt(one.usPerMessage, "µs"),
        one.kit === "bare" ? "—" : overheadCell(one),
        one.kit.startsWith("ours") ? ratio(over("Powertools"), one.overheadUs) : "—",
      ]),
    );
  },

  /** Bundle sizes (esbuild, minified, gzip -9). */
  bundles: (results) => {
    const pairs: Record<string, string> = { "lambda-ours": "lambda-powertools", "lambda-ours-sdk": "lambda-powertools-sdk", "lambda-ours-upstash": "lambda-powertools-redis" };
    return table(
      ["bundle", "minified", "min + gzip", "Powertools ÷ ours (gzip)"],
      ["l", "r", "r", "r"],
      results.bundles.map((one) => {
        const theirs = pairs[one.id] === undefined ? undefined : bundle(results, pairs[one.id] as string);
        return [one.label, kib(one.bytes), kib(one.gzipBytes), theirs === undefined ? "—" : ratio(theirs.gzipBytes, one.gzipBytes)];
      }),
    ) +
      `\n\nThe engine alone (the first row: the decision table, envelope checks, fingerprint, FIFO groups, deadline guard and group commit, with no store, runtime adapter or logs) is ${kib(bundle(results, "engine-alone")?.gzipBytes ?? Number.NaN)} gzipped: every handler bundle of ours carries at least that much, whatever its store.` +
      "\n\nThe Redis pair compares the two Redis clients more than the two kits: each bundle is mostly its client (ours `@upstash/redis`, fetch-based REST; Powertools `@redis/client`, RESP over TCP). The kits' own code is compared by the DynamoDB pair with the SDK external.";
  },

  /** Where our bundles' bytes go: minified bytes per area of the package (esbuild's metafile). */
  "bundle-areas": (results) => {
    const ours = ["lambda-ours", "worker-ours"].map((id) => bundle(results, id));
    const areas = [...new Set(ours.flatMap((one) => (one?.areas ?? []).map((area) => area.area)))];
    const cell = (one: BundleFigure | undefined, area: string) => {
      const bytes = one?.areas?.find((entry) => entry.area === area)?.bytes;
      const total = (one?.areas ?? []).reduce((sum, entry) => sum + entry.bytes, 0);
      return bytes === undefined ? "—" : `${kib(bytes)} (${((100 * bytes) / total).toFixed(0)}%)`;
    };
    return `${table(
      ["area of the package", ...ours.map((one) => one?.label ?? "n/a")],
      ["l", "r", "r"],
      areas.map((area) => [`\`${area}\``, ...ours.map((one) => cell(one, area))]),
    )}\n\nMinified bytes, before gzip (which cannot be split by module), from esbuild's metafile of the same builds.`;
  },

  /** Every figure where Powertools is ahead or level, with its reason (the same list as the run's report). */
  behind: (results) => aheadOrLevelLines(results).join("\n"),

  /** Cold import time of the Lambda handler module. */
  imports: ({ imports }) =>
    table(
      ["module", "SDK already loaded (median)", "SDK included (median)", "SDK included (best)"],
      ["l", "r", "r", "r"],
      imports.map((one) => [one.label, fmt(one.ownMs, "ms"), fmt(one.ms, "ms"), fmt(one.minMs, "ms")]),
    ),

  /** Store requests per batch, DynamoDB and Redis. */
  requests: (results) =>
    table(
      ["batch", "DynamoDB: ours", "Powertools", "ratio", "Redis: ours (REST)", "Powertools", "ratio"],
      ["l", "r", "r", "r", "r", "r", "r"],
      SCENARIOS.map((scenario) => {
        const d = [requests(results, "dynamodb", "ours", scenario.name), requests(results, "dynamodb", "Powertools", scenario.name)] as const;
        const r = [requests(results, "redis", "ours (REST)", scenario.name), requests(results, "redis", "Powertools", scenario.name)] as const;
        return [scenario.label, fmt(d[0], ""), fmt(d[1], ""), ratio(d[1], d[0]), fmt(r[0], ""), fmt(r[1], ""), ratio(r[1], r[0])];
      }),
    ),

  /** Upstash's bill: commands and dollars per million messages. */
  upstash: ({ cost }) =>
    table(
      ["workload", "ours: commands", "Powertools: commands", "ours $ / million", "Powertools $ / million", "Powertools ÷ ours"],
      ["l", "r", "r", "r", "r", "r"],
      COST_WORKLOADS.map(({ name, label }) => {
        const commands = (kit: string) => fmt(costFigure(cost, "Upstash Redis", kit, name)?.units.commands ?? Number.NaN, "");
        const ours = perMillion(cost, "Upstash Redis", "ours", name);
        const theirs = perMillion(cost, "Upstash Redis", "Powertools", name);
        return [label, commands("ours"), commands("Powertools"), usd(ours), usd(theirs), ratio(theirs, ours)];
      }),
    ),

  /** Durable Object requests and SQLite rows (no Powertools counterpart). */
  "durable-objects": ({ cost }) =>
    `${table(
      ["workload", "requests", "rows read", "rows written", "rows written per message", "sweep after retention: rows read / written", "$ / million messages"],
      ["l", "r", "r", "r", "r", "r", "r"],
      COST_WORKLOADS.map(({ name, label }) => {
        const figure = costFigure(cost, "Durable Objects", "ours", name);
        const written = figure?.units.rowsWritten ?? Number.NaN;
        return [
          label,
          fmt(figure?.requests ?? Number.NaN, ""),
          fmt(figure?.units.rowsRead ?? Number.NaN, ""),
          fmt(written, ""),
          fmt(figure === undefined ? Number.NaN : written / figure.messages, ""),
          `${fmt(figure?.units.sweepRowsRead ?? Number.NaN, "")} / ${fmt(figure?.units.sweepRowsWritten ?? Number.NaN, "")}`,
          usd(figure?.usdPerMillionMessages ?? Number.NaN),
        ];
      }),
    )}\n\nThe dollars include the sweep's deletion of the workload's rows once their retention is over; the walks in between are modelled below.`,

  /** The periodic sweep's steady-state share, modelled from sweep.ts's schedule and the prices (not measured). */
  "durable-objects-sweep": () =>
    `${table(
      ["new messages per object", "live rows (4-day retention)", "a walk every", "alarm runs per message", "rows read per message", "added $ / million messages", "added $ / object / 30 days"],
      ["l", "r", "r", "r", "r", "r", "r"],
      SWEEP_MODEL_RATES.map(({ ratePerSecond, label }) => {
        const model = sweepSteadyState(ratePerSecond, DEFAULT_RETENTION_MS);
        return [
          label,
          model.liveRows.toLocaleString("en-US"),
          model.intervalSeconds < 120 ? `${model.intervalSeconds.toFixed(0)} s` : `${(model.intervalSeconds / 60).toFixed(0)} min`,
          model.alarmRunsPerMessage.toFixed(4),
          fmt(model.rowsReadPerMessage, ""),
          usd(model.usdPerMillionMessages),
          usd(model.usdPer30Days),
        ];
      }),
    )}\n\nComputed from sweep.ts's schedule (bench/sweep-model.ts), not measured: a walk reads every live row, in one alarm run (a request and a \`setAlarm\` row) per 20,000 rows.`,

  /** The window: commit lag and requests per batch, handlers together, close and staggered. */
  window: ({ window }) =>
    window === undefined
      ? "Not measured in this run."
      : table(
          ["backend", "kit", "handlers", "requests per batch", "commit lag median", "commit lag max", "store step (median)"],
          ["l", "l", "l", "r", "r", "r", "r"],
          window.lag.map((l) => [
            l.backend,
            l.kit,
            l.shape,
            fmt(l.requests, ""),
            fmt(l.lagMedianMs, "ms"),
            fmt(l.lagMaxMs, "ms"),
            l.roundTripMs === undefined ? "—" : fmt(l.roundTripMs, "ms"),
          ]),
        ),
};
