/**
 * TEST TOOL — not part of the package. An HTTP server that speaks Upstash's REST protocol to a
 * real Redis, so `@upstash/redis` itself (unmodified, Node or workerd build) runs against real
 * Redis semantics: Lua, EVALSHA / NOSCRIPT, PX expiry, atomicity.
 *
 * Protocol (https://upstash.com/docs/redis/features/restapi):
 *   - auth: `Authorization: Bearer <token>` (or `?_token=`), else 401 `{"error":...}`;
 *   - POST `/` with a JSON command array → 200 `{"result":...}`, or 400 `{"error":"<Redis error>"}`;
 *   - POST `/pipeline` with an array of command arrays → 200 `[{"result"}|{"error"}, ...]`, not atomic;
 *   - POST `/multi-exec` the same, atomic (MULTI/EXEC); a discarded transaction → 400 `{"error"}`;
 *   - `Upstash-Encoding: base64`: every string in the result base64-encoded, except "OK".
 *
 * Fault switches for tests: `fault = "500"` answers HTTP 500 `{"error":...}` to every request,
 * `fault = "hang"` never answers; when Redis itself is unreachable the bridge answers 500.
 * `faultIf(commands)`, when set, is asked about every request's commands (a pipeline's all, a single
 * command's one, the name upper-cased) before they run; `true` answers that request 500, running nothing.
 * `repeatIf(commands)`, asked the same way, `true` runs the request twice and answers the second run:
 * a transport that lost the first answer and sent the same request again (a REST client's retry,
 * ioredis resending unanswered commands after a reconnect). `resetIf(commands)`, asked the same way,
 * `true` runs the request and then drops the connection without answering: the client sees a network
 * error for a request that landed (what makes `@upstash/redis` retry it, when its retries are on).
 * Counters: `requests` (HTTP requests), `commands` (commands received, each command of a pipeline
 * counted), `log` (command names per request). `commands` is NOT Upstash's bill: an `EVALSHA` counts 1
 * here, where Upstash bills it plus every command the script runs — for the bill, read the server's
 * `INFO commandstats` (bench/billing.ts, test/stores/redis/faults.test.ts).
 *
 * What this is *not*: a complete Upstash (no path-style commands, no SSE endpoints, no sync tokens).
 */
import { type IncomingMessage, type ServerResponse, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Redis, ReplyError } from "ioredis";

export type BridgeFault = "none" | "500" | "hang";

export interface UpstashBridgeOptions {
  /** Port of the real Redis on 127.0.0.1. */
  redisPort: number;
  /** The bearer token clients must send. */
  token: string;
}

export interface UpstashBridge {
  /** `http://127.0.0.1:<port>` — the REST URL to give `@upstash/redis`. */
  readonly url: string;
  readonly token: string;
  /** Per-test fault switch. */
  fault: BridgeFault;
  /** Per-request fault: `true` answers the request 500 without running its commands. */
  faultIf: ((commands: readonly (readonly string[])[]) => boolean) | undefined;
  /** Per-request fault: `true` runs the request twice (`/` and `/pipeline`) and answers the second run. */
  repeatIf: ((commands: readonly (readonly string[])[]) => boolean) | undefined;
  /** Per-request fault: `true` runs the request (`/` and `/pipeline`), then drops the connection unanswered. */
  resetIf: ((commands: readonly (readonly string[])[]) => boolean) | undefined;
  /** HTTP requests received (authorized or not). */
  requests: number;
  /** Redis commands executed. */
  commands: number;
  /** Upper-cased command names, one entry per request. */
  readonly log: string[][];
  /** Zeroes the counters and the log. */
  reset(): void;
  close(): Promise<void>;
}

type Reply = Buffer | number | null | Reply[] | Error;
type Json = string | number | null | Json[];

function toJson(reply: Reply, base64: boolean): Json {
  if (reply === null || reply === undefined) return null;
  if (typeof reply === "number") return reply;
  if (Buffer.isBuffer(reply)) {
    const text = reply.toString("utf8");
    if (!base64 || text === "OK") return text;
    return reply.toString("base64");
  }
  if (Array.isArray(reply)) return reply.map((item) => toJson(item, base64));
  return String(reply);
}

function parseCommand(value: unknown): [string, ...(string | Buffer)[]] {
  if (!Array.isArray(value) || value.length === 0) throw new Error("ERR the body must be a JSON array of command and arguments");
  return value.map((part) => {
    if (typeof part === "string") return part;
    if (typeof part === "number" || typeof part === "boolean") return String(part);
    return JSON.stringify(part);
  }) as [string, ...string[]];
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function send(response: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  response.end(text);
}

/** Starts a bridge on a free loopback port. */
export async function startUpstashBridge(options: UpstashBridgeOptions): Promise<UpstashBridge> {
  const redis = new Redis({
    host: "127.0.0.1",
    port: options.redisPort,
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => 100,
  });
  redis.on("error", () => {
    // Reconnects on its own; a request meanwhile is answered 500.
  });
  await redis.connect();

  const hanging = new Set<ServerResponse>();
  const bridge: UpstashBridge = {
    url: "",
    token: options.token,
    fault: "none",
    faultIf: undefined,
    repeatIf: undefined,
    resetIf: undefined,
    requests: 0,
    commands: 0,
    log: [],
    reset() {
      bridge.requests = 0;
      bridge.commands = 0;
      bridge.log.length = 0;
    },
    close: async () => {
      for (const response of hanging) response.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      redis.disconnect();
    },
  };

  const run = async (command: [string, ...(string | Buffer)[]]): Promise<Reply> => {
    bridge.commands += 1;
    const [name, ...args] = command;
    return (await redis.callBuffer(name, ...args)) as Reply;
  };

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    bridge.requests += 1;
    const url = new URL(request.url ?? "/", "http://bridge");
    const auth = request.headers.authorization;
    const given = auth?.startsWith("Bearer ") ? auth.slice(7) : url.searchParams.get("_token");
    if (given !== options.token) return send(response, 401, { error: "Unauthorized" });
    if (bridge.fault === "500") return send(response, 500, { error: "Internal Server Error (bridge fault switch)" });
    if (bridge.fault === "hang") {
      hanging.add(response);
      response.on("close", () => hanging.delete(response));
      return;
    }
    if (request.method !== "POST") return send(response, 405, { error: "Method Not Allowed" });
    const base64 = String(request.headers["upstash-encoding"] ?? "").toLowerCase() === "base64";
    let body: unknown;
    try {
      body = JSON.parse(await readBody(request));
    } catch {
      return send(response, 400, { error: "ERR the body is not JSON" });
    }
    if (redis.status !== "ready") return send(response, 500, { error: "Service Unavailable: Redis is not reachable" });
    const path = url.pathname.replace(/\/+$/, "");
    let repeat = false;
    let reset = false;
    if ((bridge.faultIf !== undefined || bridge.repeatIf !== undefined || bridge.resetIf !== undefined) && (path === "" || path === "/pipeline" || path === "/multi-exec")) {
      let commands: (readonly string[])[] = [];
      try {
        commands = (path === "" ? [parseCommand(body)] : Array.isArray(body) ? body.map(parseCommand) : []).map(([name, ...args]) => [
          name.toUpperCase(),
          ...args.map(String),
        ]);
      } catch {
        // A malformed body is answered below, as without the hook.
      }
      if (commands.length > 0 && bridge.faultIf?.(commands) === true) return send(response, 500, { error: "Internal Server Error (bridge faultIf)" });
      repeat = commands.length > 0 && bridge.repeatIf?.(commands) === true;
      reset = commands.length > 0 && bridge.resetIf?.(commands) === true;
    }
    // The request lands, its answer does not: the socket is dropped once the commands ran.
    const answer = (status: number, payload: unknown): void => {
      if (reset) request.socket.destroy();
      else send(response, status, payload);
    };
    try {
      if (path === "") {
        const command = parseCommand(body);
        bridge.log.push([command[0].toUpperCase()]);
        if (repeat) await run(command).catch(() => undefined); // the first run, whose answer was lost
        return answer(200, { result: toJson(await run(command), base64) });
      }
      if (path === "/pipeline" || path === "/multi-exec") {
        if (!Array.isArray(body)) return send(response, 400, { error: "ERR the body must be an array of commands" });
        const commands = body.map(parseCommand);
        bridge.log.push(commands.map((command) => command[0].toUpperCase()));
        if (path === "/pipeline") {
          if (repeat) await Promise.allSettled(commands.map(run)); // the first run, whose answer was lost
          const settled = await Promise.allSettled(commands.map(run));
          const lost = settled.find((one) => one.status === "rejected" && !(one.reason instanceof ReplyError));
          if (lost !== undefined) throw (lost as PromiseRejectedResult).reason;
          return answer(
            200,
            settled.map((one) => (one.status === "fulfilled" ? { result: toJson(one.value, base64) } : { error: (one.reason as Error).message })),
          );
        }
        const multi = redis.multi();
        for (const [name, ...args] of commands) multi.callBuffer(name, ...args);
        bridge.commands += commands.length;
        const results: [Error | null, unknown][] | null = await multi.exec();
        if (results === null) return send(response, 400, { error: "ERR transaction discarded" });
        return send(
          response,
          200,
          results.map(([error, value]) => (error ? { error: error.message } : { result: toJson(value as Reply, base64) })),
        );
      }
      return send(response, 404, { error: `ERR unknown endpoint ${path}` });
    } catch (error) {
      // A Redis error reply is the client's fault (400, as Upstash answers); anything else is ours.
      if (error instanceof ReplyError || (error as Error).message?.startsWith("ERR the body")) {
        return send(response, 400, { error: (error as Error).message });
      }
      return send(response, 500, { error: "Service Unavailable: Redis is not reachable" });
    }
  };

  const server = createServer((request, response) => {
    handle(request, response).catch(() => {
      if (!response.headersSent) send(response, 500, { error: "Internal Server Error" });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  (bridge as { url: string }).url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return bridge;
}
