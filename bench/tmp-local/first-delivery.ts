// Ad-hoc: DynamoDB part of the store bench (new-1, new-10, new-100, dup-10), ours vs Powertools.
import { startBackends } from "../backends.js";
import { dynamodbKits, measureBackend } from "../store-runs.js";
const rounds = Number(process.env.ROUNDS ?? 15);
const backends = await startBackends(5);
try {
  const result = await measureBackend("DynamoDB", dynamodbKits(backends), rounds);
  for (const f of result.figures) console.log(`${f.kit.padEnd(12)} ${f.scenario.padEnd(8)} requests ${f.requests}  ms ${f.ms.toFixed(2)}`);
} finally {
  await backends.stop();
}
process.exit(0);
