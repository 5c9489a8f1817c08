/**
 * BENCH TOOL — a TCP proxy on 127.0.0.1 that holds every chunk `delayMs` before passing it on, in
 * each direction, so a function talking to a local backend pays a network round trip
 * (2 × `delayMs`) per request, as it would in a real region. Order within a direction is kept:
 * every chunk waits the same time, and a chunk never overtakes the one before it.
 *
 * It counts connections (a client that opens a new connection per request pays more), nothing else:
 * request counts come from the clients' own counters (AWS SDK middleware, wrapped Redis clients) and
 * from the Upstash bridge.
 *
 * What this is *not*: a bandwidth or jitter model, or anything meant to listen beyond loopback.
 */
import { type AddressInfo, type Socket, connect, createServer } from "node:net";

export interface DelayProxyOptions {
  /** The backend's port on 127.0.0.1. */
  targetPort: number;
  /** Delay added to every chunk, each way (ms). 0 forwards at once. */
  delayMs: number;
}

export interface DelayProxy {
  /** The proxy's own port on 127.0.0.1: point the client here. */
  readonly port: number;
  /** Connections accepted so far. */
  readonly connections: number;
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
    if (delayMs <= 0) {
      pending.push(chunk);
      flushOne();
      return;
    }
    pending.push(chunk);
    // Every timer has the same duration, so they fire in the order they were set: FIFO.
    setTimeout(flushOne, delayMs);
  };
  from.on("data", (chunk: Buffer) => schedule(chunk));
  from.on("end", () => schedule(null));
}

export async function startDelayProxy(options: DelayProxyOptions): Promise<DelayProxy> {
  const sockets = new Set<Socket>();
  let connections = 0;
  const server = createServer((client) => {
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
    client.on("close", () => setTimeout(drop, options.delayMs + 1));
    upstream.on("close", () => setTimeout(drop, options.delayMs + 1));
    pipeDelayed(client, upstream, options.delayMs);
    pipeDelayed(upstream, client, options.delayMs);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    get connections() {
      return connections;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        sockets.clear();
        server.close(() => resolve());
      }),
  };
}
