/** Types of scripts/child-guard.mjs (local backends never outlive the process that started them). */
import type { ChildProcess, SpawnOptions } from "node:child_process";

export interface GuardOptions {
  /** Signal the child's whole process group (it must lead one: spawned `detached`). Default false. */
  readonly group?: boolean;
  /** First signal when this process is gone. Default SIGTERM. */
  readonly signal?: NodeJS.Signals;
  /** Time between that signal and SIGKILL (ms). Default 3000. */
  readonly graceMs?: number;
  /** Paths the watchdog deletes once the child is gone (e.g. a server's temp data directory). */
  readonly cleanup?: readonly string[];
}

export interface ChildGuard {
  /** The watchdog's pid (undefined where there is no `sh`). */
  readonly watchdogPid: number | undefined;
  /** Stands the watchdog down: the child was stopped on purpose (also done when the child exits). */
  release(): void;
}

/** Watches `child` on behalf of this process: if this process ends while the child runs, the child is stopped. */
export declare function guardChild(
  child: { readonly pid?: number; once?: ChildProcess["once"]; readonly exitCode?: number | null },
  options?: GuardOptions,
): ChildGuard;
/** `spawn` in a process group of its own, guarded by a watchdog that stops the group when this process ends. */
export declare function spawnGuarded(
  command: string,
  args: readonly string[],
  options?: SpawnOptions & { readonly guard?: Omit<GuardOptions, "group"> },
): ChildProcess;
/** Children of a process (Linux /proc): pid and name. */
export declare function childrenOf(parent?: number): { pid: number; name: string }[];
/** Guards every child of this process whose name is listed (children a library spawns), polling every 250 ms. Returns a stop function. */
export declare function guardSpawnedChildren(options: { readonly names: readonly string[] }): () => void;
/** Guards the listed children that exist right now. */
export declare function guardNow(): void;
