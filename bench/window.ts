/**
 * BENCH — the window (issue 9), ours vs Powertools in one run, on the same backends behind the
 * same delay proxy:
 *
 *  1. The hung record: a batch of 10 where one record's handler hangs until the Lambda deadline.
 *     Whatever the kit has not answered by the deadline, Lambda kills: no partial batch response,
 *     all 10 records return. Then the returned records are redelivered (the downstream has
 *     recovered) after the in-progress expiry, and we count the effects that ran a second time
 *     and the records that went back to the queue.
 *  2. Commit lag and requests: 10 handlers that finish together, 10 close together (0–90 ms, 10 ms
 *     apart) and 10 staggered over 0–450 ms; for every record, the time from its effect's end to its
 *     commit landing (median, max), the store requests of the batch, and (ours) the median duration
 *     of its store steps — the adaptive linger keeps the lag within about two round trips. A
 *     second "ours" on DynamoDB with a fixed `commitLingerMs: 100` shows the other trade: fewer
 *     requests for a wider window.
 *
 * What this is *not*: a timing assertion. It reports; the report says where we are behind.
 */
import { countingScriptClient, countingCacheClient } from "./store-runs.js";
import { BatchProcessor, EventType, processPartialResponse } from "@aws-lambda-powertools/batch";
import { IdempotencyConfig, makeIdempotent } from "@aws-lambda-powertools/idempotency";
import { CachePersistenceLayer } from "@aws-lambda-powertools/idempotency/cache";
import { DynamoDBPersistenceLayer } from "@aws-lambda-powertools/idempotency/dynamodb";
import type { BasePersistenceLayer } from "@aws-lambda-powertools/idempotency/persistence";
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from "aws-lambda";
import type { Store } from "../src/contract.js";
import { sqsHandler } from "../handlers/lambda-sqs.js";
import { lambdaContext as sharedLambdaContext } from "../scripts/lambda-events.js";
import { DynamoDBStore } from "../entry/dynamodb.js";
import { RedisStore, ioredisScriptClient } from "../entry/upstash.js";
import { type Backends, OUR_TABLE, POWERTOOLS_TABLE } from "./backends.js";
import { newIds, sqsEvent } from "./fixtures/sqs.js";
import { Tally } from "./kit.js";
import { median } from "./stats.js";
import { ENVELOPE_ID_PATH } from "./powertools.js";

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const never = new Promise<never>(() => {});

/** The Lambda invocation's time limit in the hang scenario, and how long a redelivery waits. */
const HANG_INVOCATION_MS = 1_500;
const REDELIVERY_AFTER_MS = 1_800;

type Durations = (id: string, index: number) => number;

/** A handler body the bench controls: how long each record takes, and whether one hangs. */
interface Behaviour {
  readonly durationOf: Durations;
  readonly hangs: (id: string) => boolean;
}

/** One contender for this section: a handler factory over fresh behaviour, plus what it counts. */
interface WindowKit {
  readonly name: string;
  readonly requests: Tally;
  /** Only the lag runs (a variant of another kit, not a contender of the hung record). */
  readonly lagOnly?: boolean;
  /** A new Lambda container (a cold start after a kill) with this behaviour. */
  handler(behaviour: Behaviour, effects: Map<string, number>, timing: CommitTiming): (event: SQSEvent, context: Context) => Promise<SQSBatchResponse>;
}

/** Effect ends and commit landings by id; ours also reports its store steps' durations. */
class CommitTiming {
  readonly effectEnd = new Map<string, number>();
  readonly committed = new Map<string, number>();
  readonly stepMs: number[] = [];
  lags(): number[] {
    return [...this.effectEnd].flatMap(([id, end]) => {
      const landed = this.committed.get(id);
      return landed === undefined ? [] : [landed - end];
    });
  }
}

function envelopeId(record: SQSRecord): string {
  return (JSON.parse(record.body) as { meta?: { id?: string } }).meta?.id ?? "";
}

async function body(id: string, index: number, behaviour: Behaviour, effects: Map<string, number>, timing: CommitTiming): Promise<void> {
  if (behaviour.hangs(id)) return never;
  const ms = behaviour.durationOf(id, index);
  if (ms > 0) await sleep(ms);
  effects.set(id, (effects.get(id) ?? 0) + 1);
  timing.effectEnd.set(id, performance.now());
}

function oursWindowKit(name: string, store: () => Store, requests: Tally, variant: { commitLingerMs?: number } = {}): WindowKit {
  return {
    name,
    requests,
    ...(variant.commitLingerMs === undefined ? {} : { lagOnly: true }),
    handler: (behaviour, effects, timing) =>
      sqsHandler({
        ...variant,
        store: store(),
        // The lease outlasts the invocation by less than the redelivery wait, as with SQS's visibility timeout.
        leaseMarginMs: 200,
        logger: false,
        handle: async (_envelope, ctx) => body(ctx.key as string, Number(ctx.record.messageId.split("#")[1] ?? 0), behaviour, effects, timing),
        observe: (event) => {
          if (event.type === "result" && event.result.status === "ran" && event.result.key !== undefined) timing.committed.set(event.result.key, performance.now());
          if (event.type === "store-step" && (event.step === "claim" || event.step === "commit")) timing.stepMs.push(event.durationMs);
        },
      }),
  };
}

function powertoolsWindowKit(name: string, persistence: () => BasePersistenceLayer, requests: Tally): WindowKit {
  return {
    name,
    requests,
    handler: (behaviour, effects, timing) => {
      const persistenceStore = persistence();
      // Powertools commits a record by `saveSuccess` right after its handler: time that landing.
      const saveSuccess = persistenceStore.saveSuccess.bind(persistenceStore);
      persistenceStore.saveSuccess = async (data: Parameters<typeof saveSuccess>[0], result: Parameters<typeof saveSuccess>[1]) => {
        await saveSuccess(data, result);
        timing.committed.set(envelopeId(data as unknown as SQSRecord), performance.now());
      };
      const config = new IdempotencyConfig({ eventKeyJmesPath: ENVELOPE_ID_PATH });
      const processor = new BatchProcessor(EventType.SQS);
      const recordHandler = async (record: SQSRecord): Promise<void> =>
        body(envelopeId(record), Number(record.messageId.split("#")[1] ?? 0), behaviour, effects, timing);
      const idempotent = makeIdempotent(recordHandler, { persistenceStore, config });
      return async (event, context) => {
        config.registerLambdaContext(context);
        return processPartialResponse(event, idempotent, processor, { context });
      };
    },
  };
}



function withIndexes(event: SQSEvent, tag: string): SQSEvent {
  return { Records: event.Records.map((record, i) => ({ ...record, messageId: `${tag}#${i}` })) };
}

export interface HangFigure {
  readonly backend: string;
  readonly kit: string;
  /** Effects that ran a second time after the redelivery. */
  readonly repeated: number;
  /** Records of the first invocation that went back to the queue. */
  readonly returned: number;
  /** Whether the kit answered before Lambda's deadline. */
  readonly answered: boolean;
  readonly answeredMs: number;
}

export interface LagFigure {
  readonly backend: string;
  readonly kit: string;
  readonly shape: "together" | "close" | "staggered";
  readonly requests: number;
  readonly lagMedianMs: number;
  readonly lagMaxMs: number;
  readonly rounds: number;
  /** Ours: the median duration of its claim and commit steps (ms, whole ms as the events give them). */
  readonly roundTripMs?: number;
}

export interface WindowFigures {
  readonly hang: readonly HangFigure[];
  readonly lag: readonly LagFigure[];
  readonly invocationMs: number;
}

async function hangScenario(backend: string, kit: WindowKit): Promise<HangFigure> {
  const ids = newIds(10, `hang-${kit.name}`);
  const hungId = ids[9] as string;
  const effects = new Map<string, number>();
  const timing = new CommitTiming();
  const first = kit.handler({ durationOf: () => 5, hangs: (id) => id === hungId }, effects, timing);
  const context = sharedLambdaContext(HANG_INVOCATION_MS, "bench-window");
  const started = performance.now();
  // Lambda ends the invocation at its deadline: an answer that has not come by then never comes.
  const outcome = await Promise.race([first(withIndexes(sqsEvent(ids), "h1"), context), sleep(HANG_INVOCATION_MS).then(() => "killed" as const)]);
  const answeredMs = performance.now() - started;
  const returnedIds = outcome === "killed" ? ids : outcome.batchItemFailures.map((f) => ids[Number(f.itemIdentifier.split("#")[1])] as string);
  await sleep(REDELIVERY_AFTER_MS - Math.min(answeredMs, HANG_INVOCATION_MS));
  // The redelivery reaches a fresh container (the old one was killed or is frozen); the downstream recovered.
  const second = kit.handler({ durationOf: () => 5, hangs: () => false }, effects, new CommitTiming());
  await second(withIndexes(sqsEvent(returnedIds, 2), "h2"), sharedLambdaContext(HANG_INVOCATION_MS, "bench-window"));
  const repeated = [...effects.values()].reduce((sum, n) => sum + Math.max(0, n - 1), 0);
  return { backend, kit: kit.name, repeated, returned: returnedIds.length, answered: outcome !== "killed", answeredMs };
}

const SHAPES: Record<LagFigure["shape"], Durations> = {
  together: () => 20,
  close: (_id, index) => index * 10,
  staggered: (_id, index) => index * 50,
};

async function lagScenario(backend: string, kit: WindowKit, shape: LagFigure["shape"], rounds: number): Promise<LagFigure> {
  const lags: number[] = [];
  const requests: number[] = [];
  const steps: number[] = [];
  for (let round = -1; round < rounds; round += 1) {
    const ids = newIds(10, `lag-${shape}-${kit.name}`);
    const effects = new Map<string, number>();
    const timing = new CommitTiming();
    const handler = kit.handler({ durationOf: SHAPES[shape], hangs: () => false }, effects, timing);
    kit.requests.reset();
    const response = await handler(withIndexes(sqsEvent(ids), "l"), sharedLambdaContext(60_000, "bench-window"));
    if (response.batchItemFailures.length > 0 || effects.size !== 10) throw new Error(`${kit.name} ${shape}: ${effects.size} effects, ${response.batchItemFailures.length} failures`);
    if (round < 0) continue;
    requests.push(kit.requests.count);
    lags.push(...timing.lags());
    steps.push(...timing.stepMs);
  }
  return {
    backend,
    kit: kit.name,
    shape,
    requests: median(requests),
    lagMedianMs: median(lags),
    lagMaxMs: Math.max(...lags),
    rounds,
    ...(steps.length === 0 ? {} : { roundTripMs: median(steps) }),
  };
}

export async function measureWindow(backends: Backends, rounds: number, step: (text: string) => void): Promise<WindowFigures> {
  const dynamoOurs = new Tally();
  const dynamoTheirs = new Tally();
  const redisOurs = new Tally();
  const redisTheirs = new Tally();
  const ioredis = await backends.ioredis();
  const nodeRedis = await backends.nodeRedis();
  const contenders: [string, WindowKit[]][] = [
    [
      "DynamoDB",
      [
        oursWindowKit("ours", () => new DynamoDBStore({ table: OUR_TABLE, client: backends.dynamodbClient(dynamoOurs) }), dynamoOurs),
        oursWindowKit(
          "ours (commitLingerMs 100)",
          () => new DynamoDBStore({ table: OUR_TABLE, client: backends.dynamodbClient(dynamoOurs) }),
          dynamoOurs,
          { commitLingerMs: 100 },
        ),
        powertoolsWindowKit("Powertools", () => new DynamoDBPersistenceLayer({ tableName: POWERTOOLS_TABLE, awsSdkV3Client: backends.dynamodbClient(dynamoTheirs) }), dynamoTheirs),
      ],
    ],
    [
      "Redis",
      [
        oursWindowKit("ours (TCP)", () => new RedisStore({ client: countingScriptClient(ioredisScriptClient(ioredis), redisOurs) }), redisOurs),
        powertoolsWindowKit("Powertools", () => new CachePersistenceLayer({ client: countingCacheClient(nodeRedis, redisTheirs) }), redisTheirs),
      ],
    ],
  ];
  const hang: HangFigure[] = [];
  const lag: LagFigure[] = [];
  for (const [backend, kits] of contenders) {
    step(`window on ${backend}: a hung record until the deadline (${HANG_INVOCATION_MS} ms), then commit lag (${rounds} rounds × 3 shapes)`);
    for (const kit of kits) if (kit.lagOnly !== true) hang.push(await hangScenario(backend, kit));
    for (const shape of ["together", "close", "staggered"] as const) for (const kit of kits) lag.push(await lagScenario(backend, kit, shape, rounds));
  }
  return { hang, lag, invocationMs: HANG_INVOCATION_MS };
}

/** The section of report.md. */
export function renderWindow(figures: WindowFigures | undefined, delayMs: number): string {
  if (figures === undefined) return "";
  const lines = [
    "## The window: a hung record, commit lag",
    "",
    `A batch of 10 where one record's handler hangs until the Lambda deadline (${figures.invocationMs} ms): what the kit answered, the records that went back to the queue, and the effects that ran a second time when they were redelivered.`,
    "",
    "| backend | kit | answered before the deadline | records returned | effects repeated |",
    "|:--|:--|:--|--:|--:|",
    ...figures.hang.map((h) => `| ${h.backend} | ${h.kit} | ${h.answered ? `yes, at ${Math.round(h.answeredMs)} ms` : "no: killed"} | ${h.returned} | ${h.repeated} |`),
    "",
    `Commit lag (a record's effect end → its commit landed) and store requests per batch of 10, at ${delayMs} ms injected latency each way: handlers that finish together (20 ms each), close together (0, 10, … 90 ms) and staggered (0, 50, … 450 ms). Ours lingers for company only while another finish is expected within one store round trip (its default, adaptive \`commitLingerMs\`), so an effect's commit lands within about two round trips; the last column is the median of ours' claim and commit steps (a claim step of 10 ids in parallel takes longer than one round trip; the linger's budget is the fastest recent step). \`commitLingerMs 100\` is the other trade: a wider window for fewer requests.`,
    "",
    "| backend | kit | handlers | requests per batch | commit lag median (ms) | commit lag max (ms) | store step, median (ms) |",
    "|:--|:--|:--|--:|--:|--:|--:|",
    ...figures.lag.map(
      (l) =>
        `| ${l.backend} | ${l.kit} | ${l.shape} | ${l.requests} | ${l.lagMedianMs.toFixed(1)} | ${l.lagMaxMs.toFixed(1)} | ${l.roundTripMs === undefined ? "—" : l.roundTripMs.toFixed(0)} |`,
    ),
    "",
  ];
  return lines.join("\n");
}
