/**
 * A TCP forwarder on loopback whose target can move, for failover tests: clients connect to the
 * forwarder's port as they would to a managed endpoint (an ElastiCache / RDS endpoint, a DNS name,
 * a Sentinel-aware proxy), and `moveTo` points it at the promoted node — dropping every open
 * connection, as an endpoint move does. Clients reconnect to the same port and reach the new target.
 *
 * What this is *not*: a partition (scripts/tcp-proxy.ts `cut` resets connections and keeps the
 * target) or anything meant to listen beyond loopback.
 */
import { type Server, type Socket, createServer } from "node:net";
import { closeServer, connectUpstream, listenOnLoopback } from "../../scripts/tcp-proxy.js";

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
    const upstream = connectUpstream(client, target, open);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  const port = await listenOnLoopback(server);
  return {
    port,
    moveTo(port) {
      target = port;
      for (const socket of open) socket.destroy();
    },
    close: () => closeServer(server, open),
  };
}
