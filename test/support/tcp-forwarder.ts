/**
 * A TCP forwarder on loopback whose target can move, for failover tests: clients connect to the
 * forwarder's port as they would to a managed endpoint (an ElastiCache / RDS endpoint, a DNS name,
 * a Sentinel-aware proxy), and `moveTo` points it at the promoted node — dropping every open
 * connection, as an endpoint move does. Clients reconnect to the same port and reach the new target.
 *
 * What this is *not*: a partition (scripts/tcp-proxy.ts `cut` resets connections and keeps the
 * target) or anything meant to listen beyond loopback.
 */
import { type Server, type Socket, connect, createServer } from "node:net";

export interface TcpForwarder {
  /** The forwarder's own port on 127.0.0.1: point the client here. */
  readonly port: number;
  /** Forwards new connections to `port` from now on and drops the open ones. */
  moveTo(port: number): void;
  /** Stops listening and drops every open connection. */
  close(): Promise<void>;
}

export async function startTcpForwarder(targetPort: number): Promise<TcpForwarder> {
  let target = targetPort;
  const open = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect({ host: "127.0.0.1", port: target });
    for (const socket of [client, upstream]) {
      open.add(socket);
      socket.on("error", () => undefined);
      socket.on("close", () => {
        open.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  return {
    port: typeof address === "object" && address !== null ? address.port : 0,
    moveTo(port) {
      target = port;
      for (const socket of open) socket.destroy();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of open) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
