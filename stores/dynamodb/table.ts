/**
 * The idempotency table of `DynamoDBStore`: its definition (one string partition key, on-demand
 * billing, TTL on an epoch-seconds attribute) and a helper that creates it for local development,
 * tests and demos. Re-exported by `babelqueue-serverless/dynamodb`.
 *
 * What this is *not*: a migration tool. Production tables come from `serverless.yml` /
 * CloudFormation (test/package/serverless.test.ts checks that both agree with `idempotencyTableDefinition`).
 */
import { CreateTableCommand, DescribeTableCommand, type DynamoDBClient, UpdateTimeToLiveCommand } from "@aws-sdk/client-dynamodb";
import { InvalidOptionError } from "../../src/errors.js";

/** The exact IAM actions `DynamoDBStore` uses, on the table's ARN. */
export const DYNAMODB_STORE_ACTIONS = [
  "dynamodb:PutItem",
  "dynamodb:GetItem",
  "dynamodb:DeleteItem",
  "dynamodb:BatchWriteItem",
  "dynamodb:BatchGetItem",
] as const;

const ATTRIBUTE_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,255}$/;

/** The two attribute names a table can choose (the store and the table must agree). */
export interface TableAttributeOptions {
  /** Name of the table's partition key attribute (type S). Default "pk". */
  keyAttribute?: string;
  /** Name of the attribute the table's TTL is enabled on (epoch seconds). Default "ttl". */
  ttlAttribute?: string;
}

/** What `idempotencyTableDefinition` returns: a CreateTable input and the TTL setting, as CloudFormation and the SDK spell them. */
export interface IdempotencyTableDefinition {
  /** Input of `CreateTableCommand` (and the `Properties` of an `AWS::DynamoDB::Table`, minus TTL). */
  readonly createTable: {
    readonly TableName: string;
    readonly AttributeDefinitions: readonly { readonly AttributeName: string; readonly AttributeType: "S" }[];
    readonly KeySchema: readonly { readonly AttributeName: string; readonly KeyType: "HASH" }[];
    readonly BillingMode: "PAY_PER_REQUEST";
  };
  /** `TimeToLiveSpecification` of the table (UpdateTimeToLive / CloudFormation). */
  readonly timeToLive: { readonly AttributeName: string; readonly Enabled: true };
}

/** Checks an attribute-name option: 1-255 characters of `A-Z a-z 0-9 _ . -`. Throws `InvalidOptionError`. */
export function checkAttributeName(option: string, value: string): string {
  if (typeof value !== "string" || !ATTRIBUTE_NAME_PATTERN.test(value)) {
    throw new InvalidOptionError(option, "must be 1-255 characters of A-Z a-z 0-9 _ . -");
  }
  return value;
}

/**
 * The idempotency table: one string partition key, on-demand billing, TTL on the `ttl` attribute.
 * `serverless.yml` declares the same table (test/package/serverless.test.ts checks that they agree).
 */
export function idempotencyTableDefinition(tableName: string, options: TableAttributeOptions = {}): IdempotencyTableDefinition {
  const keyAttribute = checkAttributeName("keyAttribute", options.keyAttribute ?? "pk");
  const ttlAttribute = checkAttributeName("ttlAttribute", options.ttlAttribute ?? "ttl");
  return {
    createTable: {
      TableName: tableName,
      AttributeDefinitions: [{ AttributeName: keyAttribute, AttributeType: "S" }],
      KeySchema: [{ AttributeName: keyAttribute, KeyType: "HASH" }],
      BillingMode: "PAY_PER_REQUEST",
    },
    timeToLive: { AttributeName: ttlAttribute, Enabled: true },
  };
}

/** Options of `createIdempotencyTable`: the table and the attribute names the store will use. */
export interface CreateIdempotencyTableOptions extends TableAttributeOptions {
  /** The table's name. */
  table: string;
  /** Enable TTL on the ttl attribute. Default true; false for emulators without `UpdateTimeToLive`. */
  timeToLive?: boolean;
}

/**
 * Creates the idempotency table (`idempotencyTableDefinition`), for local development, tests and
 * demos (production tables come from `serverless.yml` / CloudFormation). Waits until it is ACTIVE.
 *
 * @example
 * ```ts
 * import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
 * import { createIdempotencyTable } from "babelqueue-serverless/dynamodb";
 *
 * await createIdempotencyTable(new DynamoDBClient({ endpoint: "http://127.0.0.1:8000" }), { table: "idempotency" });
 * ```
 */
export async function createIdempotencyTable(client: DynamoDBClient, options: CreateIdempotencyTableOptions): Promise<void>;
/** @deprecated Pass `{ table, keyAttribute?, ttlAttribute?, timeToLive? }` instead of a definition. Removed in 0.3.0. */
export async function createIdempotencyTable(
  client: DynamoDBClient,
  definition: IdempotencyTableDefinition,
  options?: { timeToLive?: boolean },
): Promise<void>;
export async function createIdempotencyTable(
  client: DynamoDBClient,
  what: CreateIdempotencyTableOptions | IdempotencyTableDefinition,
  legacy: { timeToLive?: boolean } = {},
): Promise<void> {
  const definition = "createTable" in what ? what : idempotencyTableDefinition(checkTableName(what.table), what);
  const timeToLiveOn = "createTable" in what ? legacy.timeToLive !== false : what.timeToLive !== false;
  const { createTable, timeToLive } = definition;
  await client.send(
    new CreateTableCommand({
      TableName: createTable.TableName,
      AttributeDefinitions: createTable.AttributeDefinitions.map((attribute) => ({ ...attribute })),
      KeySchema: createTable.KeySchema.map((key) => ({ ...key })),
      BillingMode: createTable.BillingMode,
    }),
  );
  for (let i = 0; i < 100; i++) {
    const { Table } = await client.send(new DescribeTableCommand({ TableName: createTable.TableName }));
    if (Table?.TableStatus === "ACTIVE") break;
    await new Promise<void>((resolve) => setTimeout(resolve, 100));
  }
  if (timeToLiveOn) {
    await client.send(
      new UpdateTimeToLiveCommand({ TableName: createTable.TableName, TimeToLiveSpecification: { ...timeToLive } }),
    );
  }
}

function checkTableName(table: unknown): string {
  if (typeof table !== "string" || table === "") throw new InvalidOptionError("table", "must be the DynamoDB table's name");
  return table;
}
