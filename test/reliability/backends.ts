/**
 * The claiming stores the reliability suite runs against, each on its real local backend as the
 * test run's global setups started it (DynamoDB Local, redis-server behind the Upstash REST
 * bridge). Each call gives a fresh namespace, so runs never see each other's ids.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { inject } from "vitest";
import type { ClaimingStore } from "../../src/contract.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { localClientConfig } from "../../scripts/dynamodb-local.mjs";
import { DynamoDBStore, createIdempotencyTable, idempotencyTableDefinition } from "../../stores/dynamodb.js";
import { UpstashRedisStore } from "../../stores/upstash.js";

export interface Backend {
  name: string;
  make(namespace: string): Promise<ClaimingStore>;
  close?(): Promise<void>;
}

export function memoryBackend(): Backend {
  return { name: "InMemoryStore", make: async (namespace) => new InMemoryStore({ namespace }) };
}

export function dynamodbBackend(): Backend {
  const endpoint = inject("dynamodbEndpoint");
  const client = new DynamoDBClient(localClientConfig(endpoint));
  const table = `reliability-${Date.now().toString(36)}`;
  let created: Promise<void> | undefined;
  return {
    name: "DynamoDBStore (DynamoDB Local)",
    make: async (namespace) => {
      await (created ??= createIdempotencyTable(client, idempotencyTableDefinition(table)));
      return new DynamoDBStore({ table, client, namespace });
    },
    close: async () => client.destroy(),
  };
}

export function upstashBackend(): Backend {
  const url = inject("upstashUrl");
  const token = inject("upstashToken");
  return { name: "UpstashRedisStore (REST → redis-server)", make: async (namespace) => new UpstashRedisStore({ url, token, namespace }) };
}
