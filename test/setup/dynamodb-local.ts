/**
 * vitest globalSetup: DynamoDB Local for the node project's DynamoDB and Lambda tests.
 *
 * Starts AWS's own emulator in memory on a free loopback port (fetched once into .cache/ by
 * scripts/dynamodb-local.mjs), provides its endpoint as `dynamodbEndpoint`, and stops it after
 * the run. Tests create their own tables (one per file) with `idempotencyTableDefinition`.
 *
 * What this is *not*: optional. Without Java the run fails loudly here rather than skipping the
 * DynamoDB tests (`.ci/run` runs on a machine with Java).
 */
import type { TestProject } from "vitest/node";
import { startDynamoDBLocal } from "../../scripts/dynamodb-local.mjs";

declare module "vitest" {
  export interface ProvidedContext {
    /** DynamoDB Local's endpoint, e.g. http://127.0.0.1:41234. */
    dynamodbEndpoint: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const local = await startDynamoDBLocal();
  project.provide("dynamodbEndpoint", local.endpoint);
  return () => local.stop();
}
