/**
 * One store step as Redis commands: a list of script calls (one per bucket and chunk the step
 * touches) sent through the client in as few round trips as it allows, each call's reply or error
 * settled on its own.
 *
 * Contract:
 *   - a client made by `ioredisScriptClient` (a `Redis` or a `Cluster`) carries a pipeline
 *     (pipeline.ts): the calls go out as ONE pipelined round trip per node — per Redis server, or
 *     per cluster master owning one of the calls' slots — with the cluster's redirections (MOVED,
 *     ASK, TRYAGAIN, CLUSTERDOWN) and NOSCRIPT handled per call, and `WAIT` after the writes when
 *     the step asks for replicas;
 *   - any other client (node-redis, `@upstash/redis`, your own) gets each call as its own EVALSHA
 *     (EVAL on NOSCRIPT), all in flight at once;
 *   - ONE call on a single Redis server without a replica wait is exactly the store's classic path:
 *     one `runScript`, nothing added.
 *
 * What this is *not*: a timer (the store races the step against `timeoutMs`) or a place that knows
 * what a script means (the store builds the calls and reads the replies).
 */
import { type RedisScript, type RedisScriptClient, runScript } from "./scripts.js";

/** One script with the keys and arguments of one bucket (or one chunk of one). */
export interface ScriptCall {
  readonly script: RedisScript;
  readonly keys: readonly string[];
  readonly args: readonly string[];
}

/** What one call came back with. */
export type ScriptOutcome = { readonly ok: true; readonly reply: unknown } | { readonly ok: false; readonly error: unknown };

/** A replica wait after a step's writes: `WAIT replicas timeoutMs` on the connection that wrote. */
export interface ReplicaWait {
  readonly replicas: number;
  readonly timeoutMs: number;
}

export interface DispatchOptions {
  /** Epoch ms after which no retry of a redirected call starts. */
  readonly deadline: number;
  /**
   * True once the caller stopped waiting for a step that takes ids (a claim): from then on no call
   * of it is sent, or sent again, so a claim cannot land after the release the store sends behind it.
   */
  readonly abandoned?: () => boolean;
  /** Wait for replicas after the writes (only with a pipelining client). */
  readonly wait?: ReplicaWait;
}

export interface DispatchResult {
  readonly outcomes: ScriptOutcome[];
  /**
   * With `wait`: the fewest replicas any written node confirmed (WAIT's reply) after its last write
   * of this step. Undefined without `wait`, or when no call succeeded.
   */
  readonly replicasReached?: number;
}

/** A client's own way to send many calls: one pipelined round trip per node. */
export interface ScriptPipeline {
  /** True for a Redis Cluster client (every step goes through the pipeline, for its redirection handling). */
  readonly cluster: boolean;
  run(calls: readonly ScriptCall[], options: DispatchOptions): Promise<DispatchResult>;
}

const pipelines = new WeakMap<RedisScriptClient, ScriptPipeline>();

/** Gives a client (made by an adapter of this package) its pipeline. */
export function attachPipeline(client: RedisScriptClient, pipeline: ScriptPipeline): RedisScriptClient {
  pipelines.set(client, pipeline);
  return client;
}

/** The pipeline of a client, when it has one. */
export function pipelineOf(client: RedisScriptClient): ScriptPipeline | undefined {
  return pipelines.get(client);
}

/** Sends the calls (see the header) and settles each one. */
export async function dispatchScripts(client: RedisScriptClient, calls: readonly ScriptCall[], options: DispatchOptions): Promise<DispatchResult> {
  const pipeline = pipelineOf(client);
  if (pipeline !== undefined && (pipeline.cluster || calls.length > 1 || options.wait !== undefined)) {
    return pipeline.run(calls, options);
  }
  if (options.wait !== undefined) throw new Error("a replica wait needs a client from ioredisScriptClient");
  const outcomes = await Promise.all(
    calls.map(async (call): Promise<ScriptOutcome> => {
      try {
        return { ok: true, reply: await runScript(client, call.script, [...call.keys], [...call.args], options.abandoned) };
      } catch (error) {
        return { ok: false, error };
      }
    }),
  );
  return { outcomes };
}
