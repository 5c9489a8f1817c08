/** Types of scripts/dynamodb-local.mjs (DynamoDB Local for the tests and the demo). */
export declare const emulatorDir: string;
/** True when a `java` binary answers `java -version`. */
export declare function hasJava(): boolean;
/** Downloads and unpacks DynamoDB Local once (`npm pack amplify-dynamodb-simulator@2.9.30`); returns its directory. */
export declare function ensureDynamoDBLocal(): string;
/** A port nobody listens on right now, on 127.0.0.1. */
export declare function freePort(): Promise<number>;
export interface DynamoDBLocal {
  /** e.g. http://127.0.0.1:41234 */
  readonly endpoint: string;
  readonly port: number;
  /** Kills the JVM; resolves when it has exited. */
  stop(): Promise<void>;
}
/** Starts DynamoDB Local in memory on a free loopback port and resolves once it accepts connections. */
export declare function startDynamoDBLocal(options?: { timeoutMs?: number }): Promise<DynamoDBLocal>;
/** Client configuration for a local emulator: endpoint, region, dummy credentials; `overrides` win. */
export declare function localClientConfig<Config extends object = Record<string, unknown>>(
  endpoint: string,
  overrides?: Config,
): { endpoint: string; region: string; credentials: { accessKeyId: string; secretAccessKey: string } } & Config;
/**
 * Calls `onRequest(commandName)` for every request the client sends. Returns the client.
 * `per: "attempt"` (default) counts each HTTP attempt of the SDK's retries; `per: "command"` counts each command once.
 */
export declare function onEveryRequest<Client extends { middlewareStack: { add: (...args: never[]) => unknown } }>(
  client: Client,
  onRequest: (commandName: string) => void,
  options?: { per?: "attempt" | "command" },
): Client;

/** The name of every command `client` sends from now on, once per command (`onEveryRequest`, `per: "command"`). */
export declare function commandsSent(client: { middlewareStack: { add: (...args: never[]) => unknown } }): string[];
