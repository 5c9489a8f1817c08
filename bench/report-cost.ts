/**
 * BENCH — the cost section of report.md: billed units and dollars per million messages, ours vs
 * Powertools, on the workloads of cost-workloads.ts, with the price table and its date, the
 * before/after of the redelivery precheck, and a plain list of where ours is not cheaper and why.
 *
 * Ratio convention as everywhere in the report: Powertools ÷ ours (above 1.00× ours costs less).
 *
 * What this is *not*: a place that measures anything.
 */
import type { CostBackend, CostFigure } from "./cost-runs.js";
import type { CostWorkloadName } from "./cost-workloads.js";
import { PRICES, } from "./prices.js";

export interface CostResults {
  readonly figures: readonly CostFigure[];
  readonly pricesChecked: string;
}

export const COST_WORKLOADS: readonly { name: CostWorkloadName; label: string }[] = [
  { name: "new-10", label: "batch of 10 new" },
  { name: "dup-10", label: "batch of 10 redelivered" },
  { name: "storm", label: "redelivery storm (100 messages, 1–5 deliveries each, some handler failures)" },
];

export function costFigure(cost: CostResults | undefined, backend: CostBackend, kit: string, workload: CostWorkloadName): CostFigure | undefined {
  return cost?.figures.find((one) => one.backend === backend && one.kit === kit && one.workload === workload);
}

/** Dollars per million messages, or NaN when not measured. */
export function perMillion(cost: CostResults | undefined, backend: CostBackend, kit: string, workload: CostWorkloadName): number {
  return costFigure(cost, backend, kit, workload)?.usdPerMillionMessages ?? Number.NaN;
}

const usd = (value: number) => (Number.isFinite(value) ? `$${value < 1 ? value.toFixed(3) : value.toFixed(2)}` : "n/a");
const ratio = (powertools: number, ours: number) => (Number.isFinite(powertools) && Number.isFinite(ours) && ours > 0 ? `${(powertools / ours).toFixed(2)}×` : "n/a");
const units = (figure: CostFigure | undefined, ...names: string[]) => names.map((name) => String(Math.round((figure?.units[name] ?? Number.NaN) * 10) / 10)).join(" / ");

/** The side-by-side table: dollars per million messages per workload and store (README and report). */
export function costTable(cost: CostResults): string {
  const head =
    "| workload | DynamoDB: ours | Powertools | ratio | Upstash: ours | Powertools | ratio | Durable Objects: ours |\n|---|---:|---:|---:|---:|---:|---:|---:|";
  const lines = COST_WORKLOADS.map(({ name, label }) => {
    const d = [perMillion(cost, "DynamoDB", "ours", name), perMillion(cost, "DynamoDB", "Powertools", name)] as const;
    const u = [perMillion(cost, "Upstash Redis", "ours", name), perMillion(cost, "Upstash Redis", "Powertools", name)] as const;
    const o = perMillion(cost, "Durable Objects", "ours", name);
    return `| ${label} | ${usd(d[0])} | ${usd(d[1])} | ${ratio(d[1], d[0])} | ${usd(u[0])} | ${usd(u[1])} | ${ratio(u[1], u[0])} | ${usd(o)} |`;
  });
  return [head, ...lines].join("\n");
}

function unitTable(cost: CostResults, backend: CostBackend, columns: { head: string; cell: (f: CostFigure | undefined) => string }[]): string {
  const kits = [...new Set(cost.figures.filter((one) => one.backend === backend).map((one) => one.kit))];
  const head = `| workload | kit | requests | ${columns.map((c) => c.head).join(" | ")} | $ / million messages |\n|---|---|---:|${columns.map(() => "---:").join("|")}|---:|`;
  const lines = COST_WORKLOADS.flatMap(({ name, label }) =>
    kits.map((kit) => {
      const figure = costFigure(cost, backend, kit, name);
      return `| ${label} | ${kit} | ${figure?.requests ?? "n/a"} | ${columns.map((c) => c.cell(figure)).join(" | ")} | ${usd(figure?.usdPerMillionMessages ?? Number.NaN)} |`;
    }),
  );
  return [head, ...lines].join("\n");
}

const DYNAMODB_LEVEL =
  "both kits write two items per new message — a claim and a commit, 1 WRU each — and DynamoDB on-demand bills units, not requests: batching the commits into one BatchWriteItem halves the requests but not the write units.";

/** "set 20" / "evalsha 2, set 20": the billed commands of one figure, by name. */
const commandList = (figure: CostFigure | undefined) =>
  Object.entries(figure?.breakdown ?? {})
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([command, count]) => `${command} ${count}`)
    .join(", ");

/** Why Upstash comes out level: the commands each kit was billed for, read from the run. */
function upstashLevel(ours: CostFigure | undefined, theirs: CostFigure | undefined): string {
  const scripted = Object.keys(ours?.breakdown ?? {}).some((command) => command === "eval" || command === "evalsha");
  return (
    `Upstash bills every command, each one a script runs included; here ours was billed ${commandList(ours) || "n/a"} in ${ours?.requests ?? "n/a"} requests and Powertools ${commandList(theirs) || "n/a"} in ${theirs?.requests ?? "n/a"}. ` +
    (scripted
      ? "Ours ran a script here (for ids already held or done), which Upstash bills per command it runs as well as for the EVALSHA."
      : "A new message costs the same two commands in both kits — a SET NX claim and a SET commit — which is the floor for a claim and a commit: ours sends first deliveries as plain pipelined SETs (a script only for ids already held or done), one HTTP request per batch step, so it saves requests, not commands.") +
    " Duplicates and redeliveries are where ours saves: one MGET reads the whole batch."
  );
}

/** Where ours is not cheaper, with the reason — built from the figures, so it cannot go stale. */
export function notCheaper(cost: CostResults): string[] {
  const out: string[] = [];
  for (const { name, label } of COST_WORKLOADS) {
    for (const backend of ["DynamoDB", "Upstash Redis"] as const) {
      const ours = perMillion(cost, backend, "ours", name);
      const theirs = perMillion(cost, backend, "Powertools", name);
      if (!Number.isFinite(ours) || !Number.isFinite(theirs) || theirs / ours > 1.05) continue;
      const level = theirs / ours >= 0.95;
      const why = backend === "DynamoDB" ? DYNAMODB_LEVEL : upstashLevel(costFigure(cost, backend, "ours", name), costFigure(cost, backend, "Powertools", name));
      out.push(`- **${level ? "Level" : "Not cheaper"} — ${backend}, ${label}:** ours ${usd(ours)} vs Powertools ${usd(theirs)} per million messages (${ratio(theirs, ours)}). Why: ${why}`);
    }
  }
  return out;
}

export function renderCostSection(cost: CostResults | undefined): string[] {
  const out: string[] = [];
  out.push("## Cost per million messages");
  out.push("");
  if (cost === undefined) {
    out.push("Not measured in this run.");
    out.push("");
    return out;
  }
  out.push(
    "Billed units counted the way each service bills them, on the same batches for every kit, then priced at the providers' published on-demand rates (no free tier). " +
      "**DynamoDB**: read and write request units by DynamoDB's documented rules (1 WRU per started KB written, failed conditional writes included; 1 RRU per started 4 KB read consistently, missing items included); every request also asks for `ReturnConsumedCapacity: TOTAL`, and DynamoDB Local's reported figure is shown beside — it agrees except that Local reports nothing for a failed conditional write and 0 for a key a `BatchGetItem` does not find, both of which DynamoDB bills. " +
      "**Upstash**: commands, read from the Redis server's `INFO commandstats`, which counts the commands a script runs as well as the `EVALSHA` itself — Upstash bills exactly that (its docs: `EVAL, INCR, PEXPIRE` = 3 commands; every command of a pipeline or transaction). " +
      "**Durable Objects**: requests (every RPC call on a stub) and SQLite rows read and written, from workerd's own cursor counters (Miniflare), plus one row written per `setAlarm` and the rows the alarm's sweep reads and writes when it deletes the workload's rows after their retention (Cloudflare bills deletes as rows written); duration (GB-s) is not measured. Powertools has no Workers kit.",
  );
  out.push("");
  out.push(`Prices (checked ${cost.pricesChecked}):`);
  out.push("");
  out.push("| service | unit | $ per million | source |\n|---|---|---:|---|");
  for (const line of Object.values(PRICES)) out.push(`| ${line.service} | ${line.unit} | ${line.usdPerMillion} | ${line.source} |`);
  out.push("");
  out.push("**Dollars per million messages** (ratio = Powertools ÷ ours):");
  out.push("");
  out.push(costTable(cost));
  out.push("");
  const before = costFigure(cost, "DynamoDB", "ours, no precheck", "dup-10");
  const after = costFigure(cost, "DynamoDB", "ours", "dup-10");
  if (before !== undefined && after !== undefined) {
    out.push(
      `**The redelivery precheck** (DynamoDBStore, \`precheck: "auto"\`): a redelivered batch of 10 committed messages now costs ${after.requests} request and ${units(after, "rru")} RRU (${usd(after.usdPerMillionMessages)} per million), ` +
        `where it cost ${before.requests} conditional PutItem and ${units(before, "wru")} WRU (${usd(before.usdPerMillionMessages)}); a batch of 10 first deliveries costs exactly what it did (${costFigure(cost, "DynamoDB", "ours", "new-10")?.requests ?? "n/a"} requests, ${units(costFigure(cost, "DynamoDB", "ours", "new-10"), "wru")} WRU). ` +
        "The \"ours, no precheck\" rows below are `precheck: \"never\"`, i.e. every batch as it was before.",
    );
    out.push("");
  }
  out.push("**DynamoDB** (billed RRU / WRU by DynamoDB's rules; Local's reported RRU / WRU beside):");
  out.push("");
  out.push(
    unitTable(cost, "DynamoDB", [
      { head: "RRU / WRU", cell: (f) => units(f, "rru", "wru") },
      { head: "Local reported", cell: (f) => units(f, "reportedRru", "reportedWru") },
    ]),
  );
  out.push("");
  out.push("**Upstash Redis** (commands as billed; ours over REST — the TCP store runs the very same scripts):");
  out.push("");
  out.push(
    unitTable(cost, "Upstash Redis", [
      { head: "commands", cell: (f) => units(f, "commands") },
      { head: "by command", cell: commandList },
    ]),
  );
  out.push("");
  out.push("**Durable Objects** (ours only):");
  out.push("");
  out.push(
    unitTable(cost, "Durable Objects", [
      { head: "rows read / written", cell: (f) => units(f, "rowsRead", "rowsWritten") },
      { head: "setAlarm", cell: (f) => units(f, "alarmsSet") },
      { head: "sweep, after retention: rows read / written", cell: (f) => units(f, "sweepRowsRead", "sweepRowsWritten") },
    ]),
  );
  out.push("");
  out.push("### Where ours is not cheaper, and why");
  out.push("");
  const list = notCheaper(cost);
  out.push(...(list.length > 0 ? list : ["- Ours is cheaper on every workload and store compared."]));
  out.push(
    "- **Durable Objects:** no Powertools counterpart. Rows written dominate (DO SQLite bills $1.00 per million rows written and $0.001 per million read): a duplicate costs one row read and nothing written; a new message writes its row once at the claim and once at the commit (a `WITHOUT ROWID` table with no secondary index), and the sweep deletes it (one more row written) after its retention. Requests are one per batch step, whatever the batch size.",
  );
  out.push(
    "- **Left out:** storage (all kits keep one small item per id for the retention window — ours 4 days by default, Powertools 1 hour, whose default therefore does not catch a redelivery after an hour; Powertools' items also hold the handler's result), data transfer, free tiers, Lambda / Worker compute.",
  );
  out.push(
    "- **Durable Objects, the sweep's walks:** the figures count each row's one deletion. Between deletions the alarm walks every live row (it keeps no deadline index), one alarm run — a request and a `setAlarm` row — per 20,000 rows, at most every 10 ms per live row (1 s to 1 h apart): a share that depends on the object's arrival rate, not on a batch, modelled per rate (bench/sweep-model.ts) on the proof page.",
  );
  out.push("");
  return out;
}
