/**
 * A DynamoDB client whose stores already know DynamoDB's clock closely, for tests that time leases
 * of a few hundred milliseconds.
 *
 * Why: `DynamoDBStore` anchors its time to the `Date` header of DynamoDB's answers (whole seconds).
 * A store that has had one answer knows the offset to within a second, and writes leases up to about
 * 1.5 s longer than asked (stores/dynamodb/claim.ts); once its answers have straddled a second
 * boundary it knows it to within a round trip. Production consumers get there by themselves within
 * their first second of traffic; a test of a 300 ms lease must start there.
 *
 * What this is *not*: a fake clock. DynamoDB Local's Date is this machine's real clock.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBStore } from "../../entry/dynamodb.js";
import { localClientConfig } from "../../scripts/dynamodb-local.mjs";

/** Width of the offset estimate (ms) a warmed client reaches. */
export const WARM_WIDTH_MS = 50;

/**
 * Sends cheap consistent reads through a store on `client` (local clock `now`, default `Date.now`)
 * until the estimate is narrower than `WARM_WIDTH_MS` (about 1 to 2 s). Returns the width reached.
 */
export async function warmClock(client: DynamoDBClient, table: string, now?: () => number): Promise<number> {
  const store = new DynamoDBStore({ table, client, namespace: "clock-warmup", ...(now === undefined ? {} : { now }) });
  const deadline = Date.now() + 5_000;
  for (;;) {
    await store.seen("warm-up");
    const offset = store.clockOffset();
    const width = offset === undefined ? Number.POSITIVE_INFINITY : offset.max - offset.min;
    if (width < WARM_WIDTH_MS) return width;
    if (Date.now() > deadline) throw new Error(`the DynamoDB clock estimate did not narrow (width ${width} ms)`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** A new client on `endpoint`, its clock estimate already narrow (see `warmClock`). */
export async function warmedClient(endpoint: string, table: string): Promise<DynamoDBClient> {
  const client = new DynamoDBClient(localClientConfig(endpoint));
  await warmClock(client, table);
  return client;
}
