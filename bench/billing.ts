/**
 * BENCH — billed units, counted the way each service bills them.
 *
 * DynamoDB (on-demand): read and write request units. `DynamoMeter` asks every data-plane request
 * for `ReturnConsumedCapacity: TOTAL` and keeps two figures per request:
 *   - `reported`: what DynamoDB Local answers in `ConsumedCapacity`;
 *   - `billed`: DynamoDB's documented rules (Developer Guide, "DynamoDB read and write operations"):
 *     a write costs 1 WRU per started KB of the larger of the old and new item, a failed conditional
 *     write included; a strongly consistent read 1 RRU per started 4 KB (eventually consistent: half),
 *     a read that finds no item included; `BatchGetItem` / `BatchWriteItem` bill each item as its own
 *     `GetItem` / `PutItem`. The bench prices `billed`.
 *   DynamoDB Local reports nothing with a `ConditionalCheckFailedException` and 0 for keys a
 *   `BatchGetItem` does not find, where DynamoDB bills 1 unit each; everywhere else both figures agree
 *   (the report shows both). Sizes follow DynamoDB's item-size rules; where an old item is not returned
 *   (a successful put or update) the new item's size is used — every item in the bench is far under 1 KB.
 *
 * Upstash (pay as you go): commands. Upstash bills every command a script runs, plus the EVAL /
 * EVALSHA itself (upstash/docs, redis/sdks/ratelimit-ts/costs.mdx: "EVAL, INCR, PEXPIRE" = 3), and
 * every command of a pipeline or transaction (redis/overall/billing.mdx); AUTH, INFO, PING, QUIT,
 * COMMAND are free. Redis's own `INFO commandstats` counts exactly that — inner script commands
 * included — so the bench reads it from the server before and after (`commandDelta`).
 *
 * What this is *not*: a bill. Storage, data transfer and free tiers are left out (see the report).
 */
import type { AttributeValue, DynamoDBClient } from "@aws-sdk/client-dynamodb";

/** Units one kit consumed since the last reset. */
export interface DynamoUnits {
  /** Read request units by DynamoDB's rules. */
  rru: number;
  /** Write request units by DynamoDB's rules. */
  wru: number;
  /** What DynamoDB Local reported in `ConsumedCapacity` (reads, writes). */
  reportedRru: number;
  reportedWru: number;
}

type Item = Record<string, AttributeValue>;
const encoder = new TextEncoder();
const utf8 = (text: string) => encoder.encode(text).length;

/** DynamoDB's size of a number: about one byte per two significant digits, plus one. */
function numberBytes(text: string): number {
  const digits = text.replace(/^[-+]/, "").replace(/[eE].*$/, "").replace(".", "").replace(/^0+/, "").replace(/0+$/, "");
  return Math.ceil(Math.max(1, digits.length) / 2) + 1;
}

function valueBytes(value: AttributeValue): number {
  if (value.S !== undefined) return utf8(value.S);
  if (value.N !== undefined) return numberBytes(value.N);
  if (value.B !== undefined) return value.B.length;
  if (value.BOOL !== undefined || value.NULL !== undefined) return 1;
  if (value.SS !== undefined) return value.SS.reduce((sum, s) => sum + utf8(s), 0);
  if (value.NS !== undefined) return value.NS.reduce((sum, n) => sum + numberBytes(n), 0);
  if (value.L !== undefined) return 3 + value.L.reduce((sum, v) => sum + 1 + valueBytes(v), 0);
  if (value.M !== undefined) return 3 + Object.entries(value.M).reduce((sum, [k, v]) => sum + 1 + utf8(k) + valueBytes(v), 0);
  return 0;
}

/** An item's size by DynamoDB's rules: attribute names plus values, UTF-8. */
export function itemBytes(item: Item | undefined): number {
  if (item === undefined) return 0;
  return Object.entries(item).reduce((sum, [name, value]) => sum + utf8(name) + valueBytes(value), 0);
}

const writeUnits = (bytes: number) => Math.max(1, Math.ceil(bytes / 1024));
const readUnits = (bytes: number, consistent: boolean) => Math.max(1, Math.ceil(bytes / 4096)) * (consistent ? 1 : 0.5);

const READS = new Set(["GetItemCommand", "BatchGetItemCommand", "QueryCommand", "ScanCommand"]);
const WRITES = new Set(["PutItemCommand", "UpdateItemCommand", "DeleteItemCommand", "BatchWriteItemCommand"]);

/** Billed units of one request by the documented rules (`error`: the condition failure, when there was one). */
function ruleUnits(command: string, input: Record<string, unknown>, output: Record<string, unknown> | undefined, error: unknown): { rru: number; wru: number } {
  const old = (error as { Item?: Item } | undefined)?.Item ?? (output?.Attributes as Item | undefined);
  switch (command) {
    case "PutItemCommand":
      return { rru: 0, wru: writeUnits(Math.max(itemBytes(input.Item as Item), itemBytes(old))) };
    case "UpdateItemCommand":
    case "DeleteItemCommand":
      return { rru: 0, wru: writeUnits(Math.max(itemBytes(input.Key as Item), itemBytes(old))) };
    case "GetItemCommand":
      return { rru: readUnits(itemBytes(output?.Item as Item | undefined), input.ConsistentRead === true), wru: 0 };
    case "BatchGetItemCommand": {
      let rru = 0;
      const requested = input.RequestItems as Record<string, { Keys: Item[]; ConsistentRead?: boolean }>;
      const responses = (output?.Responses ?? {}) as Record<string, Item[]>;
      const unprocessed = (output?.UnprocessedKeys ?? {}) as Record<string, { Keys?: Item[] }>;
      for (const [table, request] of Object.entries(requested)) {
        const found = responses[table] ?? [];
        const missing = request.Keys.length - (unprocessed[table]?.Keys?.length ?? 0) - found.length;
        rru += found.reduce((sum, item) => sum + readUnits(itemBytes(item), request.ConsistentRead === true), 0);
        rru += Math.max(0, missing) * readUnits(0, request.ConsistentRead === true);
      }
      return { rru, wru: 0 };
    }
    case "BatchWriteItemCommand": {
      let wru = 0;
      const requested = input.RequestItems as Record<string, { PutRequest?: { Item: Item }; DeleteRequest?: { Key: Item } }[]>;
      const unprocessed = (output?.UnprocessedItems ?? {}) as Record<string, unknown[]>;
      for (const [table, requests] of Object.entries(requested)) {
        const done = requests.slice(0, requests.length - (unprocessed[table]?.length ?? 0));
        wru += done.reduce((sum, r) => sum + writeUnits(itemBytes(r.PutRequest?.Item ?? r.DeleteRequest?.Key)), 0);
      }
      return { rru: 0, wru };
    }
    default:
      return { rru: 0, wru: 0 };
  }
}

function reportedUnits(output: Record<string, unknown> | undefined): number {
  const consumed = output?.ConsumedCapacity as { CapacityUnits?: number } | { CapacityUnits?: number }[] | undefined;
  if (consumed === undefined) return 0;
  return (Array.isArray(consumed) ? consumed : [consumed]).reduce((sum, one) => sum + (one.CapacityUnits ?? 0), 0);
}

/** Counts one client's DynamoDB billed units (see the header). */
export class DynamoMeter {
  units: DynamoUnits = { rru: 0, wru: 0, reportedRru: 0, reportedWru: 0 };

  reset(): void {
    this.units = { rru: 0, wru: 0, reportedRru: 0, reportedWru: 0 };
  }

  /** Adds the meter to `client`: one figure per HTTP request sent (retries included), as DynamoDB bills. */
  attach(client: DynamoDBClient): DynamoDBClient {
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const command = context.commandName ?? "";
        if (READS.has(command) || WRITES.has(command)) {
          (args.input as Record<string, unknown>).ReturnConsumedCapacity = "TOTAL";
        }
        return next(args);
      },
      { step: "initialize", name: "billedUnitsRequest" },
    );
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const command = context.commandName ?? "";
        const input = args.input as Record<string, unknown>;
        try {
          const result = await next(args);
          this.#add(command, input, result.output as unknown as Record<string, unknown>, undefined);
          return result;
        } catch (error) {
          // A failed condition is billed; throttling and other errors are not.
          if (error instanceof Error && error.name === "ConditionalCheckFailedException") this.#add(command, input, undefined, error);
          throw error;
        }
      },
      // High priority: outside the deserializer (parsed output), inside the retry loop (once per attempt).
      { step: "deserialize", name: "billedUnits", priority: "high" },
    );
    return client;
  }

  #add(command: string, input: Record<string, unknown>, output: Record<string, unknown> | undefined, error: unknown): void {
    const rule = ruleUnits(command, input, output, error);
    this.units.rru += rule.rru;
    this.units.wru += rule.wru;
    const reported = reportedUnits(output);
    if (READS.has(command)) this.units.reportedRru += reported;
    else this.units.reportedWru += reported;
  }
}

/** Commands Upstash does not charge (operational). Matched on the command name before any `|subcommand`. */
const FREE_COMMANDS = new Set(["auth", "info", "ping", "quit", "command", "hello", "client", "select"]);

/** Parses `INFO commandstats` into calls per command. */
export function parseCommandStats(info: string): Map<string, number> {
  const calls = new Map<string, number>();
  for (const line of info.split(/\r?\n/)) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line);
    if (match) calls.set(match[1] as string, Number(match[2]));
  }
  return calls;
}

/** Billed Upstash commands between two `INFO commandstats` snapshots, with the breakdown by command. */
export function commandDelta(before: Map<string, number>, after: Map<string, number>): { billed: number; byCommand: Record<string, number> } {
  const byCommand: Record<string, number> = {};
  let billed = 0;
  for (const [name, count] of after) {
    const delta = count - (before.get(name) ?? 0);
    if (delta <= 0 || FREE_COMMANDS.has(name.split("|")[0] as string)) continue;
    byCommand[name] = delta;
    billed += delta;
  }
  return { billed, byCommand };
}
