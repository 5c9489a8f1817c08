/**
 * `babelqueue-serverless` (the operator CLI): parses the command line, opens the store, runs
 * `inspect` or `forget`, closes the store, and returns the exit code — 0 done, 1 the store failed
 * (or an in-flight id was refused), 2 a usage mistake. See cli/config.ts for the flags and
 * cli/commands.ts for what each command does.
 *
 * What this is *not*: process-bound. Output, input and the environment are parameters, so the
 * tests run it in-process; bin/babelqueue-serverless.ts binds them to the real process.
 */
import { InvalidOptionError } from "../src/errors.js";
import { forgetCommand, inspectCommand, redact } from "./commands.js";
import { type CliConfig, USAGE, UsageError, parseCommandLine } from "./config.js";
import { type OpenedStore, openStore } from "./open-store.js";

export interface CliIo {
  out(line: string): void;
  err(line: string): void;
  /** All of stdin, for ids given as "-". */
  readStdin(): Promise<string>;
}

/**
 * Expands "-" into the ids read from stdin: one per line (LF or CRLF), empty lines skipped, each id
 * verbatim — a dedupe key is `meta.id` as sent, so a trimmed line would name another id, and
 * `forget` would drop that one.
 */
async function expandIds(ids: readonly string[], io: CliIo): Promise<string[]> {
  if (!ids.includes("-")) return [...ids];
  const fromStdin = (await io.readStdin()).split(/\r?\n/).filter((line) => line !== "");
  return ids.flatMap((id) => (id === "-" ? fromStdin : [id]));
}

export async function main(
  argv: readonly string[],
  io: CliIo,
  env: Readonly<Record<string, string | undefined>>,
  open: (config: NonNullable<CliConfig["store"]>) => Promise<OpenedStore> = openStore,
): Promise<number> {
  let config: CliConfig;
  try {
    config = parseCommandLine(argv, env);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.err(`error: ${error.message}`);
    io.err("");
    io.err(USAGE);
    return 2;
  }
  if (config.command === "help" || config.store === undefined) {
    io.out(USAGE);
    return 0;
  }
  const ids = await expandIds(config.ids, io);
  if (ids.length === 0) {
    io.err("error: no ids (stdin was empty)");
    return 2;
  }
  let opened: OpenedStore | undefined;
  try {
    opened = await open(config.store);
    const common = { json: config.json, label: opened.label, secrets: config.secrets };
    return config.command === "inspect"
      ? await inspectCommand(opened.store, ids, common, io)
      : await forgetCommand(opened.store, ids, { ...common, yes: config.yes, dryRun: config.dryRun }, io);
  } catch (error) {
    const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    io.err(`error: ${redact(text, config.secrets)}`);
    // A store option the store refused (a namespace with ":", a bad table name) is a usage mistake.
    if (error instanceof InvalidOptionError && opened === undefined) {
      io.err("");
      io.err(USAGE);
      return 2;
    }
    return 1;
  } finally {
    await opened?.close().catch(() => undefined);
  }
}
