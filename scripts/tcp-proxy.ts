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
 * The loopback plumbing (listen, connect upstream, close) is exported for the tests' other proxies
 * (test/support/resp-proxy.ts, tcp-forwarder.ts).
 *
 * What this is *not*: a bandwidth or jitter model, or anything meant to listen beyond loopback.
 */
import { type AddressInfo, type Server, type Socket, connect, createServer } from "node:net";

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

/** Starts `server` listening on 127.0.0.1, on a free port; resolves to that port. */
export async function listenOnLoopback(server: Server): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  return (server.address() as AddressInfo).port;
}

/** Destroys every socket in `sockets` and stops `server`; resolves once it no longer listens. */
export function closeServer(server: Server, sockets: Set<Socket>): Promise<void> {
  return new Promise<void>((resolve) => {
    for (const socket of sockets) socket.destroy();
    sockets.clear();
    server.close(() => resolve());
  });
}

/**
 * Connects `client` to 127.0.0.1:`port`. Both sockets are kept in `sockets` until either fails
 * (both destroyed and forgotten at once) or closes (the same, `closeDelayMs` later, so that data
 * still in flight can land).
 */
export function connectUpstream(client: Socket, port: number, sockets: Set<Socket>, closeDelayMs = 0): Socket {
  const upstream = connect({ host: "127.0.0.1", port });
  sockets.add(client);
  sockets.add(upstream);
  const drop = () => {
    client.destroy();
    upstream.destroy();
    sockets.delete(client);
    sockets.delete(upstream);
  };
  const dropOnClose = closeDelayMs > 0 ? () => setTimeout(drop, closeDelayMs) : drop;
  for (const socket of [client, upstream]) {
    socket.on("error", drop);
    socket.on("close", dropOnClose);
  }
  return upstream;
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
    const upstream = connectUpstream(client, options.targetPort, sockets, delayMs + 1);
    upstream.setNoDelay(true);
    pipeDelayed(client, upstream, delayMs);
    pipeDelayed(upstream, client, delayMs);
  });
  const port = await listenOnLoopback(server);
  return {
    port,
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
    close: () => closeServer(server, sockets),
  };
}
