/**
 * The test process's side of a backend server it spawned (redis-server, postgres): a normal exit
 * without teardown kills the server, and a stop that asks politely first and forces after a grace
 * period. The crash side (this process killed) is scripts/child-guard.mjs's watchdog.
 *
 * What this is *not*: a launcher (spawnGuarded in scripts/child-guard.mjs starts the server).
 */
import type { ChildProcess } from "node:child_process";

/** SIGKILLs `child` if this process exits while it still runs. */
export function killOnExit(child: ChildProcess): void {
  const orphanGuard = () => child.kill("SIGKILL");
  process.once("exit", orphanGuard);
  child.once("exit", () => process.off("exit", orphanGuard));
}

/** Sends `signal` to `child`, SIGKILLs it after `forceMs`, and resolves once it has exited (at once if it had). */
export function stopChild(child: ChildProcess, signal: NodeJS.Signals, forceMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const force = setTimeout(() => child.kill("SIGKILL"), forceMs);
    child.once("exit", () => {
      clearTimeout(force);
      resolve();
    });
    child.kill(signal);
  });
}
