import { startBackends } from "../backends.js";
import { DynamoDBStore } from "../../entry/dynamodb.js";
import { OUR_TABLE } from "../backends.js";
import { Tally } from "../kit.js";
const size = Number(process.env.SIZE ?? 1000);
const bound = Number(process.env.BOUND ?? 32);
const backends = await startBackends(5);
try {
  const client = backends.dynamodbClient(new Tally());
  const kinds = new Map<string, number>();
  client.middlewareStack.add((next, context) => async (args) => {
    const input = args.input as { ConditionExpression?: string };
    const kind = `${context.commandName} ${input.ConditionExpression?.startsWith("#s = :inflight AND #t") ? "correction" : ""}`;
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
    return next(args);
  }, { step: "initialize", name: "diag" });
  const store = new DynamoDBStore({ table: OUR_TABLE, client, maxConcurrentRequests: bound });
  const ids = Array.from({ length: size }, (_, i) => `diag-${Date.now()}-${i}`);
  const t = performance.now();
  const claims = await store.claimMany(ids);
  console.log("claim step ms", (performance.now() - t).toFixed(0), "offset", store.clockOffset(), claims.filter(c => c.status !== "claimed").length, "not claimed");
  console.log([...kinds]);
} finally { await backends.stop(); }
process.exit(0);
