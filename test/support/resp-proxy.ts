/**
 * A counting TCP proxy in front of one redis-server, for the tests that measure what a store sends:
 * it forwards both directions untouched and, from the client's side, counts
 *   - `writes`: chunks the client sent (a pipelined round trip is one chunk on loopback);
 *   - `commands`: commands by name (RESP arrays parsed as they stream past);
 *   - `keys`: keys carried by EVAL / EVALSHA commands.
 * With ioredis' `Cluster` it is put in front of every node through the `natMap` option, so the
 * client talks to the proxies and every MOVED / ASK it follows is mapped back onto them.
 *
 * What this is *not*: a RESP validator or a fault injector (scripts/tcp-proxy.ts cuts connections).
 */
import { type Socket, createServer } from "node:net";
import { closeServer, connectUpstream, listenOnLoopback } from "../../scripts/tcp-proxy.js";

export interface RespCounts {
  writes: number;
  commands: Map<string, number>;
  scriptKeys: number;
}

export interface RespProxy {
  readonly port: number;
  readonly targetPort: number;
  readonly counts: RespCounts;
  reset(): void;
  close(): Promise<void>;
}

/** Streams RESP arrays of bulk strings and hands each complete command to `onCommand`. */
class RespReader {
  #buffer: Buffer = Buffer.alloc(0);
  constructor(private readonly onCommand: (parts: string[]) => void) {}

  push(chunk: Buffer): void {
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    for (;;) {
      const parsed = this.#one();
      if (parsed === undefined) return;
      this.#buffer = this.#buffer.subarray(parsed.used);
      this.onCommand(parsed.parts);
    }
  }

  #one(): { parts: string[]; used: number } | undefined {
    const buffer = this.#buffer;
    if (buffer.length === 0) return undefined;
    let at = buffer.indexOf("\r\n");
    if (at < 0) return undefined;
    if (buffer[0] !== 0x2a) {
      // An inline command: one line.
      return { parts: buffer.subarray(0, at).toString("utf8").split(" "), used: at + 2 };
    }
    const count = Number(buffer.subarray(1, at).toString("ascii"));
    let offset = at + 2;
    const parts: string[] = [];
    for (let i = 0; i < count; i += 1) {
      at = buffer.indexOf("\r\n", offset);
      if (at < 0) return undefined;
      const length = Number(buffer.subarray(offset + 1, at).toString("ascii"));
      const start = at + 2;
      if (buffer.length < start + length + 2) return undefined;
      // Only the first few parts are ever read (name, sha, numkeys, keys): keep them as text.
      parts.push(buffer.subarray(start, start + length).toString("utf8"));
      offset = start + length + 2;
    }
    return { parts, used: offset };
  }
}

export async function startRespProxy(targetPort: number): Promise<RespProxy> {
  const sockets = new Set<Socket>();
  const counts: RespCounts = { writes: 0, commands: new Map(), scriptKeys: 0 };
  const server = createServer((client) => {
    const upstream = connectUpstream(client, targetPort, sockets);
    const reader = new RespReader((parts) => {
      const name = (parts[0] ?? "").toUpperCase();
      counts.commands.set(name, (counts.commands.get(name) ?? 0) + 1);
      if (name === "EVAL" || name === "EVALSHA") counts.scriptKeys += Number(parts[2] ?? 0);
    });
    client.on("data", (chunk: Buffer) => {
      counts.writes += 1;
      reader.push(chunk);
      upstream.write(chunk);
    });
    upstream.on("data", (chunk: Buffer) => client.write(chunk));
  });
  const port = await listenOnLoopback(server);
  return {
    port,
    targetPort,
    counts,
    reset: () => {
      counts.writes = 0;
      counts.commands.clear();
      counts.scriptKeys = 0;
    },
    close: () => closeServer(server, sockets),
  };
}
