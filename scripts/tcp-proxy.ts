/**
 * A TCP proxy on 127.0.0.1 between a client and a local backend, for the benchmark and the
 * reliability suite:
 *  - `delayMs` holds every chunk that long before passing it on, in each direction, so a function
 *    talking to a local backend pays a network round trip (2 × `delayMs`) per request, as it would
 *    in a real region. Order within a direction is kept: every chunk waits the same time.
 *  - `cut()` resets every open connection, and every new one until `heal()`: a real network
 *    partition (the client sees ECONNRESET), while the backend keeps its data — unlike stopping
 *    an in-memory emulator, which would lose it.
 *
 * It counts connections (a client that opens a new connection per request pays more), nothing else.
 *
 * What this is *not*: a bandwidth or jitter model, or anything meant to listen beyond loopback.
 */
import { type AddressInfo, type Socket, connect, createServer } from "node:net";

export interface TcpProxyOptions {
  /** The backend's port on 127.0.0.1. */
  targetPort: number;
  /** Delay added to every chunk, each way (ms). Default 0: forwards at once. */
  delayMs?: number;
}

export interface TcpProxy {
  /** The proxy's own port on 127.0.0.1: point the client here. */
  readonly port: number;
  /** Connections accepted so far. */
  readonly connections: number;
  /** Resets every open connection, and every new one until `heal`. */
  cut(): void;
  heal(): void;
  /** Stops listening and drops every open connection. */
  close(): Promise<void>;
}

/** Forwards `from` → `to`, each chunk (and the end) `delayMs` late, in order. */
function pipeDelayed(from: Socket, to: Socket, delayMs: number): void {
  const pending: (Buffer | null)[] = [];
  const flushOne = () => {
    const chunk = pending.shift();
    if (to.destroyed) return;
    if (chunk === null) to.end();
    else if (chunk !== undefined) to.write(chunk);
  };
  const schedule = (chunk: Buffer | null) => {
    pending.push(chunk);
    if (delayMs <= 0) flushOne();
    // Every timer has the same duration, so they fire in the order they were set: FIFO.
    else setTimeout(flushOne, delayMs);
  };
  from.on("data", (chunk: Buffer) => schedule(chunk));
  from.on("end", () => schedule(null));
}

export async function startTcpProxy(options: TcpProxyOptions): Promise<TcpProxy> {
  const delayMs = options.delayMs ?? 0;
  const sockets = new Set<Socket>();
  let connections = 0;
  let isCut = false;
  const server = createServer((client) => {
    if (isCut) {
      client.resetAndDestroy();
      return;
    }
    connections += 1;
    client.setNoDelay(true);
    const upstream = connect({ host: "127.0.0.1", port: options.targetPort });
    upstream.setNoDelay(true);
    sockets.add(client);
    sockets.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("error", drop);
    upstream.on("error", drop);
    client.on("close", () => setTimeout(drop, delayMs + 1));
    upstream.on("close", () => setTimeout(drop, delayMs + 1));
    pipeDelayed(client, upstream, delayMs);
    pipeDelayed(upstream, client, delayMs);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    get connections() {
      return connections;
    },
    cut() {
      isCut = true;
      for (const socket of sockets) socket.resetAndDestroy();
      sockets.clear();
    },
    heal() {
      isCut = false;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        sockets.clear();
        server.close(() => resolve());
      }),
  };
}
