/**
 * A parent for the child-guard tests: `node --import tsx start-backend.ts <kind>` starts one local
 * backend the way the tests, the demo and the bench do — postgres (test/setup/postgres.ts),
 * redis (test/setup/redis.ts), dynamodb (scripts/dynamodb-local.mjs), workerd (Miniflare, guarded by
 * `guardSpawnedChildren`) — prints one JSON line `{ pids, dirs }` (the backend processes, and the
 * directories that must go with them), then idles until it is killed.
 *
 * What this is *not*: a test. child-guard.test.ts kills this process and checks what is left.
 */
import { childrenOf, guardNow, guardSpawnedChildren } from "../../scripts/child-guard.mjs";
import { startDynamoDBLocal } from "../../scripts/dynamodb-local.mjs";
import { startPostgres } from "../setup/postgres.js";
import { startRedisServer } from "../setup/redis.js";

const kind = process.argv[2];
const ours = (names: string[]) => childrenOf(process.pid).filter((child) => names.includes(child.name));
let report: { pids: number[]; dirs: string[] };
if (kind === "postgres") {
  const server = await startPostgres();
  // The postmaster and its workers (each makes itself a process-group leader; they exit when the postmaster is gone).
  const postmaster = ours(["postgres"]).map((c) => c.pid);
  report = { pids: [...postmaster, ...postmaster.flatMap((pid) => childrenOf(pid).map((c) => c.pid))], dirs: [server.dataDir] };
} else if (kind === "redis") {
  await startRedisServer();
  report = { pids: ours(["redis-server"]).map((c) => c.pid), dirs: [] };
} else if (kind === "dynamodb") {
  await startDynamoDBLocal();
  report = { pids: ours(["java"]).map((c) => c.pid), dirs: [] };
} else if (kind === "workerd") {
  guardSpawnedChildren({ names: ["workerd"] });
  const { Miniflare } = await import("miniflare");
  const mf = new Miniflare({ modules: true, script: "export default { fetch() { return new Response('ok'); } };" });
  await mf.ready;
  guardNow();
  report = { pids: ours(["workerd"]).map((c) => c.pid), dirs: [] };
} else {
  throw new Error(`unknown backend ${kind}`);
}
console.log(JSON.stringify(report));
// "exit": end normally without stopping anything (a script that forgot its teardown).
if (process.argv[3] === "exit") process.exit(0);
setInterval(() => {}, 60_000);
