/**
 * `txOf(ctx)`: the transaction handle of transactional mode, typed by the caller — the store's own
 * handle type (`DynamoDBTransaction`, Postgres's `pg.PoolClient`, `D1Transaction`).
 *
 * In transactional mode (`transactional: true` on a `TransactionalStore`), a claimed message's
 * handler gets the store's handle as `ctx.tx`, and everything written through it commits
 * atomically with the id. A message the engine runs without a claim (no usable `meta.id`, or the
 * store unreachable with `onStoreError: "run"`) has no transaction: `txOf` throws for it, so such a
 * message fails and is retried rather than writing outside the fence.
 *
 * What this is *not*: a cast that can be wrong silently — it throws when there is no handle.
 */
import { BabelQueueServerlessError } from "./errors.js";

/** There is no transaction handle for this run (not transactional mode, or no claim to fence by). */
export class NoTransactionError extends BabelQueueServerlessError {
  constructor() {
    super("NO_TRANSACTION", "ctx.tx is set only in transactional mode, for a message the engine claimed (a usable meta.id and the store reachable)");
  }
}

/**
 * The transaction handle of transactional mode, typed as the store's handle (`DynamoDBTransaction`,
 * Postgres's `pg.PoolClient`, `D1Transaction`). Throws `NoTransactionError` when the run has none
 * (not transactional mode, or a message run without a claim), so nothing is written outside the fence.
 *
 * @example
 * ```ts
 * import pg from "pg";
 * import { txOf } from "babelqueue-serverless";
 * import { sqsHandler } from "babelqueue-serverless/lambda";
 * import { PostgresStore } from "babelqueue-serverless/postgres";
 *
 * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
 * export const handler = sqsHandler({
 *   store: new PostgresStore({ pool, namespace: "orders" }),
 *   transactional: true,
 *   handle: async (envelope, ctx) => {
 *     const order = envelope.data as unknown as Order;
 *     // Committed in one transaction with the message's id, or not at all.
 *     await txOf<pg.PoolClient>(ctx).query("INSERT INTO orders (id, total) VALUES ($1, $2)", [order.id, order.total]);
 *   },
 * });
 * ```
 */
export function txOf<Tx>(context: { readonly tx?: unknown }): Tx {
  if (context.tx === undefined || context.tx === null) throw new NoTransactionError();
  return context.tx as Tx;
}
