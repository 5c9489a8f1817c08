/**
 * The claiming stores the reliability suite runs against, each on its real local backend as the
 * test run's global setups started it (DynamoDB Local, redis-server behind the Upstash REST
 * bridge). Each call gives a fresh namespace, so runs never see each other's ids. The network
 * backends can also be reached through a partition proxy, for a real outage.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { inject } from "vitest";
import type { ClaimingStore } from "../../src/contract.js";
import { InMemoryStore } from "../../src/memory-store.js";
import { localClientConfig } from "../../scripts/dynamodb-local.mjs";
import { DynamoDBStore, createIdempotencyTable, idempotencyTableDefinition } from "../../entry/dynamodb.js";
import { UpstashRedisStore } from "../../entry/upstash.js";
import { Redis } from "@upstash/redis";
import { startTcpProxy } from "../../scripts/tcp-proxy.js";

/** A store whose network to the backend can be cut for real (see scripts/tcp-proxy.ts). */
export interface Partitioned {
  store: ClaimingStore;
  cut(): void;
  heal(): void;
  close(): Promise<void>;
}

export interface Backend {
  name: string;
  make(namespace: string): Promise<ClaimingStore>;
  /** The same store, reached through a proxy the test can cut: a real network outage. */
  partitioned?(namespace: string): Promise<Partitioned>;
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
    partitioned: async (namespace) => {
      await (created ??= createIdempotencyTable(client, idempotencyTableDefinition(table)));
      const proxy = await startTcpProxy({ targetPort: Number(new URL(endpoint).port) });
      const cutClient = new DynamoDBClient(localClientConfig(`http://127.0.0.1:${proxy.port}`));
      return {
        store: new DynamoDBStore({ table, client: cutClient, namespace }),
        cut: proxy.cut,
        heal: proxy.heal,
        close: async () => {
          cutClient.destroy();
          await proxy.close();
        },
      };
    },
    close: async () => client.destroy(),
  };
}

export function upstashBackend(): Backend {
  const url = inject("upstashUrl");
  const token = inject("upstashToken");
  return {
    name: "UpstashRedisStore (REST → redis-server)",
    make: async (namespace) => new UpstashRedisStore({ url, token, namespace }),
    partitioned: async (namespace) => {
      const proxy = await startTcpProxy({ targetPort: Number(new URL(url).port) });
      const client = new Redis({ url: `http://127.0.0.1:${proxy.port}`, token, enableTelemetry: false, retry: { retries: 1, backoff: () => 50 } });
      return { store: new UpstashRedisStore({ client, namespace, timeoutMs: 1_000 }), cut: proxy.cut, heal: proxy.heal, close: proxy.close };
    },
  };
}
