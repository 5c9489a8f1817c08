/**
 * A TCP proxy on 127.0.0.1 that can cut the network between a client and its backend: `cut()`
 * resets every open connection and every new one until `heal()`. The client sees a real network
 * failure (ECONNRESET), exactly as in a partition, while the backend keeps its data — unlike
 * stopping an in-memory emulator, which would lose it.
 *
 * A test tool for the reliability suite's outage mix. What this is *not*: a latency model (see
 * bench/delay-proxy.ts) or anything that listens beyond loopback.
 */
import { type AddressInfo, type Socket, connect, createServer } from "node:net";

export interface PartitionProxy {
  /** Point the client here. */
  readonly port: number;
  /** Resets every open connection, and every new one until `heal`. */
  cut(): void;
  heal(): void;
  close(): Promise<void>;
}

export async function startPartitionProxy(targetPort: number): Promise<PartitionProxy> {
  const sockets = new Set<Socket>();
  let isCut = false;
  const server = createServer((client) => {
    if (isCut) {
      client.resetAndDestroy();
      return;
    }
    const upstream = connect({ host: "127.0.0.1", port: targetPort });
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
    client.on("close", drop);
    upstream.on("close", drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
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
