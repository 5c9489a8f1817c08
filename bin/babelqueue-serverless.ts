#!/usr/bin/env node
/**
 * The `babelqueue-serverless` executable (package.json `bin`): `inspect` and `forget` idempotency
 * records in DynamoDB, Upstash, Redis or Postgres. All logic is in cli/main.ts; this file only
 * binds it to the process (argv, stdout/stderr, stdin, the environment, the exit code).
 */
import { main } from "../cli/main.js";

async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) return "";
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

process.exitCode = await main(
  process.argv.slice(2),
  {
    out: (line) => process.stdout.write(`${line}\n`),
    err: (line) => process.stderr.write(`${line}\n`),
    readStdin,
  },
  process.env,
);
