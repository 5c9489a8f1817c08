/**
 * `npm run invoke:local` (scripts/invoke-local.ts): the example Lambda handlers invoked on this
 * machine against DynamoDB Local (the tests' own, through AWS_ENDPOINT_URL_DYNAMODB). A body sent
 * twice in one batch and then redelivered runs its effect once; the table remembers its id. With
 * `--kafka`, the same through the Kafka consumer on an Amazon MSK event.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, inject, it } from "vitest";
import { DynamoDBStore } from "../../entry/dynamodb.js";
import { sampleEnvelope } from "../support/conformance-data.js";

const scratch = mkdtempSync(join(tmpdir(), "bq-invoke-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function invokeLocal(args: string[], table: string) {
  const run = spawnSync(process.execPath, ["node_modules/tsx/dist/cli.mjs", "scripts/invoke-local.ts", ...args], {
    encoding: "utf8",
    timeout: 60_000,
    env: { PATH: process.env.PATH, AWS_ENDPOINT_URL_DYNAMODB: inject("dynamodbEndpoint"), IDEMPOTENCY_TABLE: table },
  });
  const effects = run.stdout.split("\n").filter((line) => line.startsWith("{") && line.includes('"job"'));
  const responses = run.stdout.split("\n").filter((line) => line.startsWith("invoke-local: "));
  return { ...run, effects, responses };
}

/** Whether the consumer of `namespace` has `id` as done in `table` on the tests' DynamoDB Local. */
function seenInTable(table: string, namespace: string, id: string): Promise<boolean> {
  const endpoint = inject("dynamodbEndpoint");
  const check = new DynamoDBStore({
    table,
    namespace,
    clientConfig: { endpoint, region: "us-east-1", credentials: { accessKeyId: "local", secretAccessKey: "local" } },
  });
  return check.seen(id);
}

describe("npm run invoke:local", () => {
  it("runs a body sent twice and then redelivered once, acknowledges every record, and remembers the id", async () => {
    const envelope = sampleEnvelope() as { meta: { id: string } };
    const file = join(scratch, "order.json");
    writeFileSync(file, JSON.stringify(envelope));
    const table = `invoke-local-${Date.now().toString(36)}`;
    const run = invokeLocal(["--copies", "2", file], table);
    expect(run.status, run.stderr).toBe(0);
    expect(run.responses).toEqual([
      'invoke-local: first delivery: 2 record(s) → {"batchItemFailures":[]}',
      'invoke-local: redelivery: 2 record(s) → {"batchItemFailures":[]}',
    ]);
    expect(run.effects).toHaveLength(1);
    expect(JSON.parse(run.effects[0] as string)).toMatchObject({ job: "urn:babel:orders:created", id: envelope.meta.id });
    expect(await seenInTable(table, "orders-consumer", envelope.meta.id)).toBe(true);
  }, 90_000);

  it("with no body sends a sample envelope, and reuses an existing table", () => {
    const table = `invoke-local-sample-${Date.now().toString(36)}`;
    for (let i = 0; i < 2; i += 1) {
      const run = invokeLocal([], table);
      expect(run.status, run.stderr).toBe(0);
      expect(run.responses).toHaveLength(2);
      expect(run.effects).toHaveLength(1);
    }
  }, 90_000);

  it("--kafka: an MSK event with BabelQueue's headers to the Kafka consumer; a body twice and replayed runs once, a bad one is reported by partition and offset", async () => {
    const envelope = sampleEnvelope() as { meta: { id: string } };
    envelope.meta.id = `kafka-local-${Date.now().toString(36)}`;
    const file = join(scratch, "kafka-order.json");
    writeFileSync(file, JSON.stringify(envelope));
    const bad = join(scratch, "not-an-envelope.json");
    writeFileSync(bad, JSON.stringify({ hello: "world" }));
    const table = `invoke-local-kafka-${Date.now().toString(36)}`;
    const run = invokeLocal(["--kafka", "--copies", "2", file, bad], table);
    expect(run.status, run.stderr).toBe(0);
    // Offsets 0 and 1: the order twice; 2 and 3: the bad body twice (the first stops the partition).
    const failures = '{"batchItemFailures":[{"itemIdentifier":{"partition":"orders-0","offset":2}},{"itemIdentifier":{"partition":"orders-0","offset":3}}]}';
    expect(run.responses).toEqual([`invoke-local: first delivery: 4 record(s) → ${failures}`, `invoke-local: redelivery: 4 record(s) → ${failures}`]);
    expect(run.effects).toHaveLength(1);
    expect(JSON.parse(run.effects[0] as string)).toMatchObject({ job: "urn:babel:orders:created", id: envelope.meta.id, topic: "orders", partition: 0, offset: 0, attempts: 0 });
    expect(await seenInTable(table, "orders-kafka-consumer", envelope.meta.id)).toBe(true);
  }, 90_000);
});
