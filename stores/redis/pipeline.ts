/**
 * The ioredis pipeline behind `ioredisScriptClient`: many script calls in ONE pipelined round trip
 * per node, for a single `Redis` and for a `Cluster`.
 *
 * Contract:
 *   - Cluster: each call goes to the master that owns its slot in the client's slot map (a call's
 *     keys share one hash tag, so one slot); the calls of one node go out as one pipeline on that
 *     node's connection, all nodes at once;
 *   - a slot being moved (`redis-cli --cluster reshard`) answers some calls with MOVED, ASK or
 *     TRYAGAIN: those calls — and only those — are sent again, to the new owner (MOVED, and the slot
 *     map is refreshed), with ASKING to the importing node (ASK), or after a short pause (TRYAGAIN,
 *     CLUSTERDOWN, LOADING, MASTERDOWN: 25 ms doubling up to 400 ms), until the step's deadline.
 *     Each of these errors means the script did NOT run, so sending it again cannot apply it twice;
 *   - NOSCRIPT (a node's script cache is its own: a fresh node, or the importing node after ASK)
 *     resends that call as EVAL, which loads the script there;
 *   - with a replica wait, `WAIT replicas timeoutMs` follows the calls in the same pipeline, so it
 *     runs on the connection that wrote, after the writes, in the same round trip; the step reports
 *     the fewest replicas any written node confirmed after its last write;
 *   - any other error (a closed connection, CROSSSLOT, WRONGTYPE, OOM) is that call's outcome: it is
 *     never retried here, since the script may have run;
 *   - a step the caller gave up on (`abandoned`: a claim past its timeout) sends no further round.
 *
 * What this is *not*: a connection manager. It uses the client's own node connections (the same ones
 * ioredis sends single commands on) and never opens or closes one.
 */
import type { DispatchOptions, DispatchResult, ScriptCall, ScriptOutcome, ScriptPipeline } from "./dispatch.js";
import { isNoScript, scriptSha } from "./scripts.js";

/** The error of a call not sent because its step was given up (`abandoned`). */
const GIVEN_UP = "the step was given up before this call was sent";

/** The pipeline of an ioredis `Redis` node (the part used here). */
interface NodePipeline {
  evalsha(sha1: string, numkeys: number, ...keysAndArgs: string[]): NodePipeline;
  eval(script: string, numkeys: number, ...keysAndArgs: string[]): NodePipeline;
  asking(): NodePipeline;
  wait(numreplicas: number, timeout: number): NodePipeline;
  exec(): Promise<[Error | null, unknown][] | null>;
}

/** An ioredis `Redis` (a server, or one node of a cluster). */
export interface IoredisNode {
  pipeline(): NodePipeline;
  readonly options?: { readonly host?: string; readonly port?: number };
}

type NatMap = Record<string, { host: string; port: number }> | ((key: string) => { host: string; port: number } | null | undefined);

/** An ioredis `Cluster` (the part used here). */
export interface IoredisCluster {
  readonly isCluster: true;
  readonly slots: (readonly string[] | undefined)[];
  readonly status: string;
  readonly options?: { readonly natMap?: NatMap };
  nodes(role?: "all" | "master" | "slave"): IoredisNode[];
  refreshSlotsCache(callback?: (error?: Error | null) => void): void;
  delayUntilReady(callback: (error?: Error | null) => void): void;
  connect(): Promise<void>;
  once(event: "ready", listener: () => void): unknown;
  off(event: "ready", listener: () => void): unknown;
}

/** True for something that looks like an ioredis client with pipelines. */
export function canPipeline(redis: unknown): redis is IoredisNode | IoredisCluster {
  return typeof (redis as { pipeline?: unknown } | null)?.pipeline === "function";
}

export function isCluster(redis: IoredisNode | IoredisCluster): redis is IoredisCluster {
  return (redis as { isCluster?: unknown }).isCluster === true;
}

// ---------------------------------------------------------------------------------------------
// Slots

/** CRC16/XMODEM, the checksum Redis Cluster maps keys to slots with. */
function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit += 1) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

const encoder = new TextEncoder();

/** The cluster slot of a key: CRC16 of its hash tag (the first non-empty `{…}`), or of the whole key, mod 16384. */
export function slotOf(key: string): number {
  const open = key.indexOf("{");
  if (open >= 0) {
    const close = key.indexOf("}", open + 1);
    if (close > open + 1) return crc16(encoder.encode(key.slice(open + 1, close))) % 16384;
  }
  return crc16(encoder.encode(key)) % 16384;
}

// ---------------------------------------------------------------------------------------------
// Errors

type Redirect =
  | { readonly kind: "noscript" }
  | { readonly kind: "moved" | "ask"; readonly address: string }
  | { readonly kind: "later" }
  | { readonly kind: "final" };

const LATER = /^(?:TRYAGAIN|CLUSTERDOWN|LOADING|MASTERDOWN)\b/;

/** What a call's error asks for. Every kind but "final" means the script did not run. */
function redirectOf(error: unknown): Redirect {
  if (isNoScript(error)) return { kind: "noscript" };
  const message = error instanceof Error ? error.message : "";
  const redirect = /^(MOVED|ASK) \d+ (\S+)$/.exec(message);
  if (redirect) return { kind: redirect[1] === "MOVED" ? "moved" : "ask", address: redirect[2] as string };
  if (LATER.test(message)) return { kind: "later" };
  return { kind: "final" };
}

const FIRST_PAUSE_MS = 25;
const LONGEST_PAUSE_MS = 400;
/** Rounds of one step before its redirected calls fail (each MOVED/ASK/NOSCRIPT costs one). */
const MOST_ROUNDS = 64;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function nodeKey(node: IoredisNode): string {
  return `${node.options?.host ?? "127.0.0.1"}:${node.options?.port ?? 6379}`;
}

/** Where the calls go: one server, or the cluster's slot map. */
interface Router {
  readonly cluster: boolean;
  ready(): Promise<void>;
  /** The node key a call goes to by the slot map (or the one node). */
  route(call: ScriptCall): string | undefined;
  node(key: string): IoredisNode | undefined;
  /** A MOVED/ASK address as a node key (NAT-mapped like the client maps it). */
  address(raw: string): string;
  refresh(): void;
}

function serverRouter(redis: IoredisNode): Router {
  return {
    cluster: false,
    ready: async () => {},
    route: () => "server",
    node: (key) => (key === "server" ? redis : undefined),
    address: () => "server",
    refresh: () => {},
  };
}

function clusterRouter(cluster: IoredisCluster): Router {
  /** One wait for the slot map shared by every step that needs it (no listener per step). */
  let waiting: Promise<void> | undefined;
  const slotMapKnown = () => cluster.slots.some((owners) => owners !== undefined && owners.length > 0);
  return {
    cluster: true,
    ready: () => {
      // "connect": the slot map is in, the ready check still running; the nodes queue commands meanwhile.
      if (cluster.status === "ready" || (cluster.status === "connect" && slotMapKnown())) return Promise.resolve();
      if (cluster.status === "end") return Promise.reject(new Error("the cluster client is closed"));
      if (cluster.status === "wait") cluster.connect().catch(() => {});
      // ioredis calls the delayed callbacks when a connection attempt has the slot map (or fails),
      // not when a later ready check passes: wait for whichever comes first, "ready" included.
      waiting ??= new Promise<void>((resolve, reject) => {
        let settled = false;
        const settle = (error?: Error | null) => {
          if (settled) return;
          settled = true;
          cluster.off("ready", onReady);
          waiting = undefined;
          if (error) reject(error);
          else resolve();
        };
        const onReady = () => settle();
        cluster.once("ready", onReady);
        cluster.delayUntilReady((error) => settle(error));
      });
      return waiting;
    },
    route: (call) => {
      const key = call.keys[0];
      return key === undefined ? undefined : cluster.slots[slotOf(key)]?.[0];
    },
    node: (key) => cluster.nodes("all").find((node) => nodeKey(node) === key),
    address: (raw) => {
      const natMap = cluster.options?.natMap;
      const mapped = typeof natMap === "function" ? natMap(raw) : natMap?.[raw];
      return mapped ? `${mapped.host}:${mapped.port}` : raw;
    },
    refresh: () => cluster.refreshSlotsCache(() => {}),
  };
}

/** Per call: how it is sent next. */
interface CallState {
  useEval: boolean;
  /** Node to send it to with ASKING first (after ASK). */
  asking?: string;
  /** Node to send it to (after MOVED), before the slot map catches up. */
  movedTo?: string;
  lastError?: unknown;
}

/** Sends the calls of one node as one pipeline; answers [error, reply] per call, and WAIT's reply. */
async function sendToNode(
  node: IoredisNode,
  calls: readonly ScriptCall[],
  indexes: readonly number[],
  states: readonly CallState[],
  shas: ReadonlyMap<string, string>,
  wait: DispatchOptions["wait"],
): Promise<{ results: [unknown, unknown][]; acked?: number }> {
  const pipeline = node.pipeline();
  const positions: number[] = [];
  let position = 0;
  for (const index of indexes) {
    const call = calls[index] as ScriptCall;
    const state = states[index] as CallState;
    if (state.asking !== undefined) {
      pipeline.asking();
      position += 1;
    }
    const rest = [...call.keys, ...call.args];
    if (state.useEval) pipeline.eval(call.script.source, call.keys.length, ...rest);
    else pipeline.evalsha(shas.get(call.script.source) as string, call.keys.length, ...rest);
    positions.push(position);
    position += 1;
  }
  if (wait !== undefined) pipeline.wait(wait.replicas, wait.timeoutMs);
  let raw: [Error | null, unknown][] | null;
  try {
    raw = await pipeline.exec();
  } catch (error) {
    return { results: indexes.map(() => [error, undefined]) };
  }
  if (!Array.isArray(raw)) {
    const error = new Error("the pipeline answered nothing");
    return { results: indexes.map(() => [error, undefined]) };
  }
  const results = positions.map((at): [unknown, unknown] => {
    const entry = raw[at];
    return entry === undefined ? [new Error("the pipeline answered too few replies"), undefined] : [entry[0], entry[1]];
  });
  if (wait === undefined) return { results };
  const waited = raw[position];
  return { results, acked: waited !== undefined && waited[0] === null ? Number(waited[1]) : 0 };
}

function makePipeline(router: Router): ScriptPipeline {
  return {
    cluster: router.cluster,
    async run(calls: readonly ScriptCall[], options: DispatchOptions): Promise<DispatchResult> {
      const outcomes = new Array<ScriptOutcome>(calls.length);
      const states: CallState[] = calls.map(() => ({ useEval: false }));
      const shas = new Map<string, string>();
      for (const call of calls) shas.set(call.script.source, await scriptSha(call.script));
      /** Per node: replicas confirmed after its last write in this step. */
      const acked = new Map<string, number>();
      await router.ready();
      let pending = calls.map((_, i) => i);
      let pause = 0;
      for (let round = 0; pending.length > 0; round += 1) {
        // A pause (TRYAGAIN and the like) must fit before the deadline; MOVED, ASK and NOSCRIPT are
        // sent again at once (bounded by MOST_ROUNDS), so a late quiet release still reaches Redis.
        // A claim the caller gave up on is not sent again: it would land after its release.
        const outOfTime = round >= MOST_ROUNDS || (pause > 0 && Date.now() + pause > options.deadline);
        if (!outOfTime && pause > 0) await sleep(pause);
        if (outOfTime || options.abandoned?.() === true) {
          for (const index of pending) outcomes[index] = { ok: false, error: states[index]?.lastError ?? new Error(GIVEN_UP) };
          break;
        }
        const byNode = new Map<string, number[]>();
        const unrouted: number[] = [];
        for (const index of pending) {
          const state = states[index] as CallState;
          const target = state.asking ?? state.movedTo ?? router.route(calls[index] as ScriptCall);
          if (target === undefined || router.node(target) === undefined) {
            // A node the client has no connection to yet: back to the slot map, once it is refreshed.
            state.asking = undefined;
            state.movedTo = undefined;
            unrouted.push(index);
            continue;
          }
          const group = byNode.get(target);
          if (group === undefined) byNode.set(target, [index]);
          else group.push(index);
        }
        const next: number[] = [];
        let later = unrouted.length > 0;
        for (const index of unrouted) (states[index] as CallState).lastError ??= new Error("no connection to the node that owns the slot");
        if (later) router.refresh();
        const sent = await Promise.all(
          [...byNode].map(async ([key, indexes]) => ({
            key,
            indexes,
            ...(await sendToNode(router.node(key) as IoredisNode, calls, indexes, states, shas, options.wait)),
          })),
        );
        for (const { key, indexes, results, acked: reached } of sent) {
          let wrote = false;
          indexes.forEach((index, i) => {
            const [error, reply] = results[i] as [unknown, unknown];
            const state = states[index] as CallState;
            if (error === null || error === undefined) {
              outcomes[index] = { ok: true, reply };
              wrote = true;
              return;
            }
            state.lastError = error;
            const redirect = redirectOf(error);
            switch (redirect.kind) {
              case "noscript":
                state.useEval = true;
                next.push(index);
                return;
              case "moved":
                state.asking = undefined;
                state.movedTo = router.address(redirect.address);
                router.refresh();
                next.push(index);
                return;
              case "ask":
                state.asking = router.address(redirect.address);
                next.push(index);
                return;
              case "later":
                state.asking = undefined;
                state.movedTo = undefined;
                later = true;
                next.push(index);
                return;
              default:
                outcomes[index] = { ok: false, error };
            }
          });
          if (wrote && reached !== undefined) acked.set(key, reached);
        }
        next.push(...unrouted);
        pending = next;
        pause = later ? Math.min(LONGEST_PAUSE_MS, pause === 0 ? FIRST_PAUSE_MS : pause * 2) : 0;
      }
      if (options.wait === undefined || acked.size === 0) return { outcomes };
      return { outcomes, replicasReached: Math.min(...acked.values()) };
    },
  };
}

/** The pipeline of an ioredis `Redis` or `Cluster`. */
export function ioredisPipeline(redis: IoredisNode | IoredisCluster): ScriptPipeline {
  return makePipeline(isCluster(redis) ? clusterRouter(redis) : serverRouter(redis));
}
