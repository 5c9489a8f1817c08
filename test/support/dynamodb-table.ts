/**
 * A DynamoDB Local idempotency table of one test file's own (test/setup/dynamodb-local.ts starts
 * DynamoDB Local), for the files that build many stores on it: created before the file's tests, with
 * the client configuration that reaches it and a fresh namespace per store.
 *
 * What this is *not*: a store factory — each file makes the store class it tests, on `table`, under
 * `namespace()`.
 */
import { DynamoDBClient, type DynamoDBClientConfig } from "@aws-sdk/client-dynamodb";
import { beforeAll, inject } from "vitest";
import { createIdempotencyTable, idempotencyTableDefinition } from "../../entry/dynamodb.js";
import { localClientConfig } from "../../scripts/dynamodb-local.mjs";

/** Table `idempotency-<name>-<time>`, created in a `beforeAll` of the calling file; namespaces `<name>-1`, `<name>-2`, … */
export function localIdempotencyTable(name: string) {
  const endpoint = inject("dynamodbEndpoint");
  const table = `idempotency-${name}-${Date.now().toString(36)}`;
  const clientConfig = (overrides: DynamoDBClientConfig = {}): DynamoDBClientConfig => localClientConfig(endpoint, overrides);
  beforeAll(async () => {
    await createIdempotencyTable(new DynamoDBClient(clientConfig()), idempotencyTableDefinition(table));
  });
  let namespaces = 0;
  return { table, clientConfig, namespace: () => `${name}-${(namespaces += 1)}` };
}
