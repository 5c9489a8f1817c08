/**
 * `TransactionalDynamoDBStore`: `DynamoDBStore` plus transactional mode (export
 * `babelqueue-serverless/dynamodb`). With `transactional: true`, the handler's DynamoDB writes —
 * added to `ctx.tx` (`txOf<DynamoDBTransaction>(ctx)`) — and the fenced commit of the message's id
 * go out as ONE `TransactWriteItems` (transaction.ts): both or neither.
 *
 * A subclass rather than a method of `DynamoDBStore`, so that the transaction code (limits checks,
 * cancellation reasons, retries) lands only in the bundles of applications that use it.
 *
 * What this is *not*: a different store. Every plain operation, item and option is `DynamoDBStore`'s;
 * the two share one table and one layout.
 */
import type { FencedClaim, TransactionalStore } from "../../src/contract.js";
import { DynamoDBStore } from "./store.js";
import { type DynamoDBTransaction, transactDynamoDB } from "./transaction.js";

/**
 * `DynamoDBStore` with transactional mode: the handler's writes, added to `ctx.tx`, and the fenced
 * commit of the id go out as ONE `TransactWriteItems`.
 *
 * @example
 * ```ts
 * import { txOf } from "babelqueue-serverless";
 * import { type DynamoDBTransaction, TransactionalDynamoDBStore } from "babelqueue-serverless/dynamodb";
 * import { sqsHandler } from "babelqueue-serverless/lambda";
 *
 * export const handler = sqsHandler({
 *   store: new TransactionalDynamoDBStore({ table: process.env.IDEMPOTENCY_TABLE! }),
 *   transactional: true,
 *   handle: async (envelope, ctx) => {
 *     txOf<DynamoDBTransaction>(ctx).put({ TableName: "orders", Item: { id: { S: envelope.data.id as string } } });
 *   },
 * });
 * ```
 */
export class TransactionalDynamoDBStore extends DynamoDBStore implements TransactionalStore<DynamoDBTransaction> {
  /**
   * Transactional mode: the handler's actions (through `tx`) and the fenced commit of the id as ONE
   * `TransactWriteItems` (transaction.ts).
   */
  transact(claim: FencedClaim, work: (tx: DynamoDBTransaction) => Promise<void>): Promise<void> {
    return transactDynamoDB(this.transactionDeps(), claim, work);
  }
}
