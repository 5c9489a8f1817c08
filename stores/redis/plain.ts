/**
 * Plain pipelined SETs for the billed path: Upstash bills every command, those a script runs
 * included, plus the EVALSHA itself. A batch of first deliveries claimed with one `SET … NX PX` per
 * id, and a commit given every fingerprint written with one `SET … PX` per id, are exactly the
 * writes the scripts make — sent instead as ONE pipelined request (`/pipeline` over REST) without the
 * script around them, so N new messages cost 2N commands, not 2N + 2. Used by `UpstashRedisStore`
 * for its own record layout; the scripts still decide everything that needs a read (a SET NX held
 * back by a record, redeliveries, commits without a fingerprint, releases).
 *
 * The values are the scripts' own (scripts.ts): `i:<token>[:<fingerprint>]` in flight,
 * `d:<fingerprint>` committed — a record written here reads the same to every script.
 *
 * What this is *not*: a transaction. The SETs of a pipeline are independent; each is atomic on its
 * own, which is all a claim (NX) or a commit needs.
 */

/** One SET: key, value, expiry (ms), and whether it may only create the key (NX). */
export interface PlainSet {
  readonly key: string;
  readonly value: string;
  readonly px: number;
  readonly nx: boolean;
}

/** Sends SETs as ONE pipelined request: one reply per SET (`"OK"`, or null where NX held it back). */
export type PlainSetter = (sets: readonly PlainSet[]) => Promise<unknown[]>;

/** The part of an `@upstash/redis` client the plain path uses: its pipeline. */
export interface UpstashPipelineLike {
  pipeline(): {
    set(key: string, value: string, options: { px: number; nx?: true }): unknown;
    exec(): Promise<unknown[]>;
  };
}

/** True for a client with an `@upstash/redis`-shaped `pipeline()`. */
export function hasPipeline(client: unknown): client is UpstashPipelineLike {
  return typeof (client as Partial<UpstashPipelineLike> | null)?.pipeline === "function";
}

/** The setter over an `@upstash/redis` client (made on first use when `client` is a promise). */
export function upstashSetter(client: () => UpstashPipelineLike | Promise<UpstashPipelineLike>): PlainSetter {
  return async (sets) => {
    const pipeline = (await client()).pipeline();
    for (const set of sets) pipeline.set(set.key, set.value, set.nx ? { px: set.px, nx: true } : { px: set.px });
    return pipeline.exec();
  };
}
