/**
 * serverless.yml, validated offline: `osls package` (configValidationMode: error) builds the
 * CloudFormation template and the bundles into a temp dir, and these tests hold the template to
 * the file's promises — partial batch responses, batch size and window, TTL, DLQ + redrive,
 * visibility timeout >= 6x the function timeout, the table as idempotencyTableDefinition says,
 * IAM no broader than DynamoDBStore's exact actions on the table's ARN (plus, for the Kafka
 * mapping, the MSK actions on the cluster's ARN, the ENI actions MSK needs and sqs:SendMessage on
 * its on-failure queue), one minified, self-contained bundle per function (the AWS SDK inside, on
 * purpose); the Kafka event source mapping with FunctionResponseTypes (set through
 * resources.extensions: osls cannot set it on an `msk` event), provisioned pollers, bounded retries
 * and an on-failure destination, created only when a cluster is given — then run the deployed
 * bundles themselves, in a directory with nothing else, on batches against DynamoDB Local, and
 * against a closed port (the store error keeps its class name through minification).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { builtinModules } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { SQSBatchResponse } from "aws-lambda";
import { build } from "esbuild";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { DYNAMODB_STORE_ACTIONS, DynamoDBStore, createIdempotencyTable, idempotencyTableDefinition } from "../../entry/dynamodb.js";
import { freePort } from "../../scripts/dynamodb-local.mjs";
import { kafkaRecord, mskEvent } from "../../scripts/lambda-events.js";
import { zipEntries as unzip } from "../../scripts/zip-entries.js";
import { sampleEnvelope } from "../support/conformance-data.js";

type Json = Record<string, unknown>;
interface Resource {
  Type: string;
  Properties: Json;
  DeletionPolicy?: string;
  UpdateReplacePolicy?: string;
}

const work = mkdtempSync(join(tmpdir(), "bq-sls-"));
const out = join(work, "package");
let template: { Resources: Record<string, Resource> };

function resourcesOf(type: string): [string, Resource][] {
  return Object.entries(template.Resources).filter(([, resource]) => resource.Type === type);
}

/** The SQS event source mapping (its source is a queue of the template). */
function sqsMapping(): Resource {
  const found = resourcesOf("AWS::Lambda::EventSourceMapping").find(([, mapping]) => template.Resources[getAttTarget(mapping.Properties.EventSourceArn) ?? ""]?.Type === "AWS::SQS::Queue");
  if (found === undefined) throw new Error("no SQS event source mapping");
  return found[1];
}

/** The Kafka (MSK) event source mapping: the one with `Topics`. */
function kafkaMapping(): [string, Resource & { Condition?: string }] {
  const found = resourcesOf("AWS::Lambda::EventSourceMapping").find(([, mapping]) => mapping.Properties.Topics !== undefined);
  if (found === undefined) throw new Error("no Kafka event source mapping");
  return found as [string, Resource & { Condition?: string }];
}

/** The logical id a `{ "Fn::GetAtt": [id, "Arn"] }` points at. */
function getAttTarget(value: unknown): string | undefined {
  const getAtt = (value as { "Fn::GetAtt"?: unknown } | undefined)?.["Fn::GetAtt"];
  return Array.isArray(getAtt) && getAtt[1] === "Arn" ? String(getAtt[0]) : undefined;
}

beforeAll(() => {
  const run = spawnSync("osls", ["package", "--package", out, "--stage", "test", "--region", "us-east-1"], {
    cwd: process.cwd(),
    encoding: "utf8",
    env: {
      ...process.env,
      HOME: join(work, "home"),
      // serverless-esbuild leaves its build folders in the temp dir: keep them in ours, removed after.
      TMPDIR: work,
      SLS_TELEMETRY_DISABLED: "1",
      SLS_NOTIFICATIONS_MODE: "off",
      AWS_ACCESS_KEY_ID: "",
      AWS_SECRET_ACCESS_KEY: "",
    },
  });
  if (run.status !== 0) throw new Error(`osls package failed (${run.status}):\n${run.stdout}\n${run.stderr}`);
  template = JSON.parse(readFileSync(join(out, "cloudformation-template-update-stack.json"), "utf8"));
}, 120_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

/** A function's zip unpacked into a directory holding nothing else (no node_modules): what Lambda runs. */
function unzipped(zip = "consumer.zip"): string {
  const dir = join(work, `unzipped-${zip}`);
  mkdirSync(join(dir, "examples/lambda"), { recursive: true });
  for (const [name, data] of unzip(readFileSync(join(out, zip)))) writeFileSync(join(dir, name), data);
  return dir;
}

/** A fresh idempotency table named `table` on DynamoDB Local; the endpoint and credentials to reach it. */
async function localTable(table: string) {
  const endpoint = inject("dynamodbEndpoint");
  const credentials = { accessKeyId: "local", secretAccessKey: "local" };
  await createIdempotencyTable(new DynamoDBClient({ endpoint, region: "us-east-1", credentials }), idempotencyTableDefinition(table));
  return { endpoint, credentials };
}

/**
 * A Lambda-like host: a fresh Node process in `dir`, configured through the environment (table
 * `table` at `endpoint`), invoking the handler of `module` with each of `events` in turn. Its run
 * (which must exit 0) and the handler's responses.
 */
function invokeInFreshNode(dir: string, runnerName: string, module: string, events: readonly unknown[], table: string, endpoint: string) {
  const runner = join(dir, runnerName);
  writeFileSync(
    runner,
    `import { handler } from "${module}";
const context = { getRemainingTimeInMillis: () => 30000 };
const responses = [];
for (const event of ${JSON.stringify(events)}) responses.push(await handler(event, context));
process.stdout.write("RESPONSES " + JSON.stringify(responses) + "\\n");`,
  );
  const run = spawnSync("node", [runner], {
    cwd: dir,
    encoding: "utf8",
    env: {
      PATH: process.env.PATH,
      IDEMPOTENCY_TABLE: table,
      AWS_ENDPOINT_URL_DYNAMODB: endpoint,
      AWS_REGION: "us-east-1",
      AWS_ACCESS_KEY_ID: "local",
      AWS_SECRET_ACCESS_KEY: "local",
    },
  });
  expect(run.status, run.stderr).toBe(0);
  return { run, responses: JSON.parse(run.stdout.split("RESPONSES ")[1] as string) as unknown[] };
}

const body = () => JSON.stringify(sampleEnvelope());
const record = (messageId: string, receiveCount: string, recordBody = body()) => ({
  messageId,
  receiptHandle: "AQEB",
  body: recordBody,
  attributes: { ApproximateReceiveCount: receiveCount, SentTimestamp: "1", SenderId: "A", ApproximateFirstReceiveTimestamp: "1" },
  messageAttributes: {},
  md5OfBody: "",
  eventSource: "aws:sqs",
  eventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders",
  awsRegion: "us-east-1",
});

describe("serverless.yml (osls package, offline)", () => {
  it("subscribes the function to the queue with partial batch responses, a batch size and a batching window", () => {
    expect(resourcesOf("AWS::Lambda::EventSourceMapping")).toHaveLength(2);
    const mapping = sqsMapping();
    expect(mapping.Properties.FunctionResponseTypes).toEqual(["ReportBatchItemFailures"]);
    expect(mapping.Properties.BatchSize).toBe(10);
    expect(mapping.Properties.MaximumBatchingWindowInSeconds).toBeGreaterThan(0);
    expect(resourcesOf("AWS::SQS::Queue").map(([id]) => id)).toContain(getAttTarget(mapping.Properties.EventSourceArn));
  });

  it("runs both consumers on nodejs22.x or newer", () => {
    const functions = resourcesOf("AWS::Lambda::Function");
    expect(functions.map(([id]) => id).sort()).toEqual(["ConsumerLambdaFunction", "KafkaConsumerLambdaFunction"]);
    for (const [, fn] of functions) {
      const runtime = String(fn.Properties.Runtime);
      expect(runtime).toMatch(/^nodejs\d+\.x$/);
      expect(Number(runtime.replace(/\D/g, ""))).toBeGreaterThanOrEqual(22);
    }
  });

  it("gives the queue a visibility timeout of at least 6x the function timeout", () => {
    const fn = template.Resources.ConsumerLambdaFunction as Resource;
    const mapping = sqsMapping();
    const queue = template.Resources[getAttTarget(mapping.Properties.EventSourceArn) as string] as Resource;
    expect(Number(fn.Properties.Timeout)).toBeGreaterThan(0);
    expect(Number(queue.Properties.VisibilityTimeout)).toBeGreaterThanOrEqual(6 * Number(fn.Properties.Timeout));
  });

  it("redrives the queue to a dead-letter queue", () => {
    const mapping = sqsMapping();
    const queue = template.Resources[getAttTarget(mapping.Properties.EventSourceArn) as string] as Resource;
    const redrive = queue.Properties.RedrivePolicy as Json;
    const dlq = getAttTarget(redrive.deadLetterTargetArn);
    expect(template.Resources[dlq as string]?.Type).toBe("AWS::SQS::Queue");
    expect(dlq).not.toBe(getAttTarget(mapping.Properties.EventSourceArn));
    expect(Number(redrive.maxReceiveCount)).toBeGreaterThanOrEqual(1);
  });

  it("declares the idempotency table as idempotencyTableDefinition does: on demand, TTL enabled", () => {
    const tables = resourcesOf("AWS::DynamoDB::Table");
    expect(tables).toHaveLength(1);
    const [, table] = tables[0] as [string, Resource];
    const definition = idempotencyTableDefinition("ignored");
    expect(table.Properties.BillingMode).toBe("PAY_PER_REQUEST");
    expect(table.Properties.AttributeDefinitions).toEqual(definition.createTable.AttributeDefinitions);
    expect(table.Properties.KeySchema).toEqual(definition.createTable.KeySchema);
    expect(table.Properties.TimeToLiveSpecification).toEqual(definition.timeToLive);
    // The committed ids outlive the stack and a replacement of the table.
    expect(table.DeletionPolicy).toBe("Retain");
    expect(table.UpdateReplacePolicy).toBe("Retain");
  });

  it("grants no IAM statement more than DynamoDBStore's exact actions on the table's ARN, and the Kafka mapping's on its cluster and queue", () => {
    const [tableId] = resourcesOf("AWS::DynamoDB::Table")[0] as [string, Resource];
    const statements = resourcesOf("AWS::IAM::Role").flatMap(([, role]) =>
      ((role.Properties.Policies as Json[] | undefined) ?? []).flatMap(
        (policy) => ((policy.PolicyDocument as Json).Statement as Json[]),
      ),
    );
    expect(resourcesOf("AWS::IAM::Policy")).toEqual([]);
    expect(resourcesOf("AWS::IAM::ManagedPolicy")).toEqual([]);
    const asList = (value: unknown) => (Array.isArray(value) ? value : [value]);
    const withPrefix = (prefix: string) => statements.filter((s) => asList(s.Action).some((a) => String(a).startsWith(prefix)));
    const dynamo = withPrefix("dynamodb:");
    expect(dynamo).toHaveLength(1);
    const grant = dynamo[0] as Json;
    expect(grant.Effect).toBe("Allow");
    expect([...asList(grant.Action)].sort()).toEqual([...DYNAMODB_STORE_ACTIONS].sort());
    expect(asList(grant.Resource)).toHaveLength(1);
    expect(getAttTarget(asList(grant.Resource)[0])).toBe(tableId);
    // MSK: exactly the cluster actions of AWSLambdaMSKExecutionRole, on the cluster's ARN only.
    const kafka = withPrefix("kafka:");
    expect(kafka.flatMap((s) => asList(s.Action)).sort()).toEqual(["kafka:DescribeCluster", "kafka:DescribeClusterV2", "kafka:GetBootstrapBrokers"]);
    for (const statement of kafka) expect(asList(statement.Resource)).toEqual([{ Ref: "MskClusterArn" }]);
    // IAM access control (MSK Serverless has no other): the data-plane actions on the cluster, the topic and the group only.
    const dataPlane = withPrefix("kafka-cluster:");
    const resourceOf = (action: string) => dataPlane.filter((s) => asList(s.Action).includes(action)).map((s) => asList(s.Resource));
    expect(dataPlane.flatMap((s) => asList(s.Action)).sort()).toEqual([
      "kafka-cluster:AlterGroup",
      "kafka-cluster:Connect",
      "kafka-cluster:DescribeClusterDynamicConfiguration",
      "kafka-cluster:DescribeGroup",
      "kafka-cluster:DescribeTopic",
      "kafka-cluster:ReadData",
    ]);
    expect(resourceOf("kafka-cluster:Connect")).toEqual([[{ Ref: "MskClusterArn" }]]);
    const derived = (kind: string, name: string) => {
      const part = (index: number) => ({ "Fn::Select": [index, { "Fn::Split": [":cluster/", { Ref: "MskClusterArn" }] }] });
      return [[{ "Fn::Join": ["", [part(0), `:${kind}/`, part(1), `/${name}`]] }]];
    };
    const mapping = kafkaMapping()[1].Properties as { Topics: string[]; AmazonManagedKafkaEventSourceConfig: { ConsumerGroupId: string } };
    expect(resourceOf("kafka-cluster:ReadData")).toEqual(derived("topic", mapping.Topics[0] as string));
    expect(resourceOf("kafka-cluster:AlterGroup")).toEqual(derived("group", mapping.AmazonManagedKafkaEventSourceConfig.ConsumerGroupId));
    // The on-failure destination: sqs:SendMessage on that queue only.
    const send = statements.filter((s) => asList(s.Action).includes("sqs:SendMessage"));
    expect(send.map((s) => asList(s.Resource).map(getAttTarget))).toEqual([["KafkaFailuresQueue"]]);
    expect(getAttTarget((kafkaMapping()[1].Properties.DestinationConfig as { OnFailure: { Destination: unknown } }).OnFailure.Destination)).toBe("KafkaFailuresQueue");
    // "*" only for the ENI actions the MSK mapping needs (the ec2 Describe actions take no resource).
    const everywhere = statements.filter((s) => asList(s.Resource).includes("*"));
    expect(everywhere).toHaveLength(1);
    expect([...asList((everywhere[0] as Json).Action)].sort()).toEqual([
      "ec2:CreateNetworkInterface",
      "ec2:DeleteNetworkInterface",
      "ec2:DescribeNetworkInterfaces",
      "ec2:DescribeSecurityGroups",
      "ec2:DescribeSubnets",
      "ec2:DescribeVpcs",
    ]);
    for (const statement of statements) {
      expect(statement.Effect).toBe("Allow");
      expect(statement.NotAction).toBeUndefined();
      expect(statement.NotResource).toBeUndefined();
      for (const action of asList(statement.Action)) expect(String(action)).not.toMatch(/\*/);
    }
  });

  it("maps the MSK topic to the Kafka consumer with partial batch responses, provisioned pollers, bounded retries, only when a cluster is given", () => {
    const [id, mapping] = kafkaMapping();
    expect(id).toBe("KafkaConsumerEventSourceMappingMSKMskClusterArnOrders");
    expect(mapping.Properties.FunctionResponseTypes).toEqual(["ReportBatchItemFailures"]);
    expect(mapping.Properties.ProvisionedPollerConfig).toEqual({ MinimumPollers: 1, MaximumPollers: 2 });
    expect(mapping.Properties.EventSourceArn).toEqual({ Ref: "MskClusterArn" });
    expect(mapping.Properties.Topics).toEqual(["orders"]);
    expect(getAttTarget(mapping.Properties.FunctionName)).toBe("KafkaConsumerLambdaFunction");
    expect(mapping.Properties.MaximumRetryAttempts).toBe(5);
    expect(mapping.Properties.StartingPosition).toBe("TRIM_HORIZON");
    // Created only when the stack parameter names a cluster: the default is the placeholder the condition excludes.
    const full = template as unknown as { Parameters: Record<string, Json>; Conditions: Record<string, unknown> };
    expect(mapping.Condition).toBe("HasMskCluster");
    expect(full.Parameters.MskClusterArn?.Type).toBe("String");
    const state = JSON.parse(readFileSync(join(out, "serverless-state.json"), "utf8")) as { service: { provider: { stackParameters: { ParameterKey: string; ParameterValue: string }[] } } };
    const parameter = state.service.provider.stackParameters.find((p) => p.ParameterKey === "MskClusterArn");
    expect(full.Conditions.HasMskCluster).toEqual({ "Fn::Not": [{ "Fn::Equals": [{ Ref: "MskClusterArn" }, parameter?.ParameterValue] }] });
    expect(parameter?.ParameterValue).toMatch(new RegExp(String(full.Parameters.MskClusterArn?.AllowedPattern)));
    // Its own idempotency namespace: the SQS consumer and this one each run a message once.
    const environment = (fn: string) => ((template.Resources[fn] as Resource).Properties.Environment as { Variables: Json }).Variables;
    expect(environment("KafkaConsumerLambdaFunction").IDEMPOTENCY_NAMESPACE).toBe("orders-kafka-consumer");
    expect(environment("ConsumerLambdaFunction").IDEMPOTENCY_NAMESPACE).toBe("orders-consumer");
  });

  it("packages one bundled file (and its source map) per function, nothing from HOME or node_modules", () => {
    const entries = unzip(readFileSync(join(out, "consumer.zip")));
    expect([...entries.keys()].sort()).toEqual(["examples/lambda/consumer.mjs", "examples/lambda/consumer.mjs.map"]);
    const kafka = unzip(readFileSync(join(out, "kafkaConsumer.zip")));
    expect([...kafka.keys()].sort()).toEqual(["examples/lambda/kafka-consumer.mjs", "examples/lambda/kafka-consumer.mjs.map"]);
  });

  it("bundles one minified, self-contained file: it loads nothing but Node built-ins, and its map carries no sources", async () => {
    const dir = unzipped();
    const bundle = join(dir, "examples/lambda/consumer.mjs");
    const code = readFileSync(bundle, "utf8");
    // esbuild parses the deployed bundle and lists every module it would load at run time (imports,
    // dynamic imports, require calls), all bare specifiers left external.
    const { metafile } = await build({ entryPoints: [bundle], bundle: true, write: false, metafile: true, platform: "node", format: "esm", packages: "external", logLevel: "silent" });
    const loaded = Object.values(metafile.inputs).flatMap((input) => input.imports.filter((i) => i.external).map((i) => i.path));
    const builtin = (specifier: string) => specifier.startsWith("node:") || builtinModules.includes(specifier.split("/")[0] as string);
    // The SDK's own optional SigV4a signers, required inside a try/catch only when a request needs
    // SigV4a (multi-region endpoints, never DynamoDB): absent at runtime, and the SDK copes.
    const sdkOptional = new Set(["@aws-sdk/signature-v4-crt", "@aws-sdk/signature-v4a"]);
    expect(loaded.length).toBeGreaterThan(0);
    expect(loaded.filter((specifier) => !builtin(specifier) && !sdkOptional.has(specifier))).toEqual([]);
    // The SDK is inside, on purpose (serverless.yml says why).
    expect(code).toMatch(/DynamoDB/);
    // Minified: long lines, not one statement per line (0.1.0 shipped an unminified 1.3 MB bundle).
    expect(code.length / code.split("\n").length).toBeGreaterThan(1000);
    expect(code.length).toBeLessThan(800 * 1024);
    const map = JSON.parse(readFileSync(`${bundle}.map`, "utf8")) as { sourcesContent?: unknown };
    expect(map.sourcesContent ?? []).toEqual([]);
  });

  it("the deployed bundle consumes a batch on DynamoDB Local in a fresh Node process: runs once, suppresses the redelivery", async () => {
    const dir = unzipped();
    const table = `sls-bundle-${Date.now().toString(36)}`;
    const { endpoint, credentials } = await localTable(table);
    const events = [{ Records: [record("m1", "1"), record("m2", "1", "garbage")] }, { Records: [record("m3", "2")] }];
    const { run, responses } = invokeInFreshNode(dir, "invoke.mjs", "./examples/lambda/consumer.mjs", events, table, endpoint);
    expect(responses as SQSBatchResponse[]).toEqual([{ batchItemFailures: [{ itemIdentifier: "m2" }] }, { batchItemFailures: [] }]);
    expect(run.stdout.split("\n").filter((line) => line.includes("urn:babel:orders:created"))).toHaveLength(1);
    const check = new DynamoDBStore({ table, namespace: "orders-consumer", clientConfig: { endpoint, region: "us-east-1", credentials } });
    expect(await check.seen(String((sampleEnvelope().meta as Json).id))).toBe(true);
  });

  it("the deployed Kafka bundle consumes an MSK event on DynamoDB Local in a fresh Node process: partition order, the Kafka partial response, a replay suppressed", async () => {
    const dir = unzipped("kafkaConsumer.zip");
    const table = `sls-kafka-${Date.now().toString(36)}`;
    const { endpoint, credentials } = await localTable(table);
    const order = (id: string) => JSON.stringify({ ...sampleEnvelope(), meta: { ...(sampleEnvelope().meta as Json), id } });
    const event = mskEvent([
      kafkaRecord(order("k-0-0"), { partition: 0, offset: 0 }),
      kafkaRecord("garbage", { partition: 0, offset: 1 }),
      kafkaRecord(order("k-0-2"), { partition: 0, offset: 2 }),
      kafkaRecord(order("k-1-0"), { partition: 1, offset: 0, headers: { "bq-attempts": "2" } }),
    ]);
    // The first delivery, then a rebalance replaying the whole batch.
    const { run, responses } = invokeInFreshNode(dir, "invoke-kafka.mjs", "./examples/lambda/kafka-consumer.mjs", [event, event], table, endpoint);
    const failures = [{ itemIdentifier: { partition: "orders-0", offset: 1 } }, { itemIdentifier: { partition: "orders-0", offset: 2 } }];
    expect(responses).toEqual([{ batchItemFailures: failures }, { batchItemFailures: failures }]);
    const effects = run.stdout.split("\n").filter((line) => line.startsWith("{") && line.includes('"job"')).map((line) => JSON.parse(line) as Json);
    // Each effect once (the replay ran nothing), the garbage record's partition stopped there, bq-attempts as the attempts.
    expect(effects.map((e) => [e.id, e.partition, e.offset, e.attempts]).sort()).toEqual([["k-0-0", 0, 0, 0], ["k-1-0", 1, 0, 2]]);
    const check = new DynamoDBStore({ table, namespace: "orders-kafka-consumer", clientConfig: { endpoint, region: "us-east-1", credentials } });
    expect(await check.seen("k-0-0")).toBe(true);
    expect(await check.seen("k-0-2")).toBe(false);
  });

  it("keeps class names through minification: with DynamoDB unreachable the batch is retried and the log names StoreUnavailableError", async () => {
    const dir = unzipped();
    const port = await freePort();
    const runner = join(dir, "invoke-down.mjs");
    writeFileSync(
      runner,
      `import { handler } from "./examples/lambda/consumer.mjs";
const response = await handler(${JSON.stringify({ Records: [record("d1", "1")] })}, { getRemainingTimeInMillis: () => 30000 });
process.stdout.write("RESPONSE " + JSON.stringify(response) + "\\n");`,
    );
    const run = spawnSync("node", [runner], {
      cwd: dir,
      encoding: "utf8",
      timeout: 60_000,
      env: {
        PATH: process.env.PATH,
        IDEMPOTENCY_TABLE: "unreachable",
        AWS_ENDPOINT_URL_DYNAMODB: `http://127.0.0.1:${port}`,
        AWS_MAX_ATTEMPTS: "1",
        AWS_REGION: "us-east-1",
        AWS_ACCESS_KEY_ID: "local",
        AWS_SECRET_ACCESS_KEY: "local",
      },
    });
    expect(run.status, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout.split("RESPONSE ")[1] as string)).toEqual({ batchItemFailures: [{ itemIdentifier: "d1" }] });
    expect(`${run.stdout}${run.stderr}`).toMatch(/StoreUnavailableError/);
    expect(run.stdout).not.toMatch(/urn:babel:orders:created/);
  });
});
