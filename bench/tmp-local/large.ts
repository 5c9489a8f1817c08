import { startBackends } from "../backends.js";
import { measureLargeBatchDynamoDB, renderLargeBatch } from "../large-batch.js";
const size = Number(process.env.SIZE ?? 2000);
const backends = await startBackends(5);
try {
  const figures = await measureLargeBatchDynamoDB(backends, size, (t) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${t}`));
  console.log(renderLargeBatch(figures, 5));
} finally {
  await backends.stop();
}
process.exit(0);
