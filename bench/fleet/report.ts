/**
 * BENCH — the fleet section of the report: one table per backend, ours and Powertools at each fleet
 * size side by side, the ratio of their message rates, and where a backend stops scaling.
 *
 * What this is *not*: a measurement (fleet.ts measures).
 */
import type { FleetFigure, FleetResults } from "./fleet.js";

const f0 = (n: number) => n.toFixed(0);
const f1 = (n: number) => n.toFixed(1);
const f2 = (n: number) => n.toFixed(2);

/** The first fleet size whose rate is less than 1.25× the previous size's: where the backend (or this machine) saturates. */
export function saturation(figures: readonly FleetFigure[]): number | undefined {
  const sorted = [...figures].sort((a, b) => a.consumers - b.consumers);
  for (let i = 1; i < sorted.length; i += 1) {
    const before = sorted[i - 1] as FleetFigure;
    const now = sorted[i] as FleetFigure;
    if (now.messagesPerSecond < before.messagesPerSecond * 1.25) return now.consumers;
  }
  return undefined;
}

export function renderFleet(fleet: FleetResults | undefined, delayMs: number): string {
  if (fleet === undefined) return "";
  const out: string[] = [];
  out.push("## A fleet of consumers on one store");
  out.push("");
  out.push(
    `P consumers (worker threads, one store client and its sockets each — a stand-in for P Lambda instances) drain one shared simulated SQS queue in batches of 10: ${fleet.messages} messages, ${f0(fleet.duplicateShare * 100)}% of them delivered twice (often to two consumers at once), unacknowledged deliveries visible again after 50 ms. Every request crosses the ${delayMs} ms delay proxy each way. Ours and Powertools drain the same queue (same seed), one after the other. Checked on every run: each message's effect ran exactly once across the fleet (0 duplicate effects, 0 lost) and nothing threw out of a kit but Powertools' own answer to a batch whose every record failed (\`FullBatchFailureError\`, counted below each table). **Ratio = ours ÷ Powertools messages per second** (higher is better for ours). This machine has 2 cores and runs the backends too: the rates are this machine's, the ratios and the scaling are the point.`,
  );
  out.push("");
  const backends = [...new Set(fleet.figures.map((figure) => figure.backend))];
  for (const backend of backends) {
    const rows = fleet.figures.filter((figure) => figure.backend === backend);
    out.push(`### ${backend}`);
    out.push("");
    out.push("| consumers | kit | messages/s | batch p50 (ms) | batch p99 (ms) | store requests per message | deliveries not acked | ratio |");
    out.push("|---:|:--|---:|---:|---:|---:|---:|---:|");
    for (const size of fleet.sizes) {
      const ours = rows.find((row) => row.consumers === size && row.kit === "ours");
      const theirs = rows.find((row) => row.consumers === size && row.kit === "Powertools");
      for (const row of [ours, theirs]) {
        if (row === undefined) continue;
        const ratio = row.kit === "ours" && theirs !== undefined ? `${f2(row.messagesPerSecond / theirs.messagesPerSecond)}×` : row.kit === "ours" ? "— (no Powertools layer)" : "";
        out.push(`| ${size} | ${row.kit} | ${f0(row.messagesPerSecond)} | ${f1(row.batchP50Ms)} | ${f1(row.batchP99Ms)} | ${f2(row.requestsPerMessage)} | ${row.returned} | ${ratio} |`);
      }
    }
    out.push("");
    const whole = rows.filter((row) => (row.wholeBatchFailures ?? 0) > 0);
    if (whole.length > 0) {
      const list = whole.map((row) => `${row.wholeBatchFailures} at ${row.consumers} consumers`).join(", ");
      out.push(
        `Powertools threw \`FullBatchFailureError\` for batches whose every record failed (${list}): \`processPartialResponse\`'s default (\`throwOnFullBatchFailure\`), after which Lambda returns the whole batch; those deliveries are in "deliveries not acked".`,
      );
      out.push("");
    }
    const ours = saturation(rows.filter((row) => row.kit === "ours"));
    const theirs = saturation(rows.filter((row) => row.kit === "Powertools"));
    out.push(
      `Scaling: ours ${ours === undefined ? "still scales at the largest fleet measured" : `stops scaling at ${ours} consumers (less than 1.25× the rate of the size before)`}` +
        (rows.some((row) => row.kit === "Powertools") ? `; Powertools ${theirs === undefined ? "still scales at the largest fleet measured" : `stops scaling at ${theirs} consumers`}.` : "."),
    );
    out.push("");
  }
  return out.join("\n");
}
