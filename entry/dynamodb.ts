/**
 * `babelqueue-serverless/dynamodb`: `DynamoDBStore` (a claiming store on one DynamoDB table),
 * `TransactionalDynamoDBStore` (the same, plus transactional mode), the table's definition and IAM
 * actions, and transactional mode's handle.
 * Needs `@aws-sdk/client-dynamodb` (a peer dependency; the Lambda runtime has it).
 *
 * The list is deliberate and pinned by test/package/exports.test.ts.
 *
 * @module babelqueue-serverless/dynamodb
 */
import * as transaction from "../stores/dynamodb/transaction.js";

export { DynamoDBStore, type DynamoDBStoreOptions } from "../stores/dynamodb/store.js";
export { TransactionalDynamoDBStore } from "../stores/dynamodb/transactional-store.js";
export {
  type CreateIdempotencyTableOptions,
  DYNAMODB_STORE_ACTIONS,
  type IdempotencyTableDefinition,
  type TableAttributeOptions,
  createIdempotencyTable,
  idempotencyTableDefinition,
} from "../stores/dynamodb/table.js";
export { AUTO_PRECHECK_MIN_REDELIVERED, type PrecheckPolicy } from "../stores/dynamodb/precheck.js";
export { DYNAMODB_TRANSACTION_ACTIONS, DYNAMODB_TRANSACTION_LIMITS, DynamoDBTransaction } from "../stores/dynamodb/transaction.js";
export { DYNAMODB_MAX_KEY_BYTES } from "../stores/dynamodb/items.js";

/** @deprecated Use `TransactionalDynamoDBStore` (its `transact`; transactional mode calls it for you). Removed in 0.3.0. */
export const transactDynamoDB: typeof transaction.transactDynamoDB = transaction.transactDynamoDB;
