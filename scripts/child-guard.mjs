/**
 * Local backends never outlive the process that started them — whether it exits, crashes, is
 * killed with SIGKILL or gets SIGINT / SIGTERM. One helper for every launcher (the test setups,
 * the demo, the bench, invoke:local):
 *
 * - `spawnGuarded(command, args, options)`: `spawn` in a process group of its own (`detached`), so a
 *   terminal's Ctrl-C does not tear it down mid-shutdown and the whole group (a server and its
 *   workers) can be stopped at once, plus a watchdog (below). Use it instead of `spawn` for anything
 *   that listens on a port.
 * - `guardChild(child, options)`: the watchdog alone, for a child spawned some other way.
 * - `guardSpawnedChildren({ names })`: for children a library spawns where we cannot reach its
 *   `spawn` (Miniflare's workerd): polls this process's children (Linux `/proc`) every 250 ms and
 *   guards each new one whose name is listed.
 *
 * The watchdog is a tiny `sh` (about 1 MB), in a session of its own, ignoring INT/HUP/TERM/QUIT, that
 * blocks reading a pipe from this process. The kernel closes our end of that pipe however this
 * process ends — so at EOF the watchdog signals the child (its whole group when it leads one),
 * waits `graceMs`, SIGKILLs what is left and deletes the `cleanup` paths (a server's temp data
 * directory). No polling of a pid that could be reused, no `prctl`. When the child ends first (a
 * normal `stop()`), the watchdog is killed and never acts.
 *
 * What this is *not*: a supervisor. It never restarts anything, and it does nothing on Windows
 * (no `sh`; `guardChild` then returns a no-op guard). Works on Linux and macOS (`/proc` scanning:
 * Linux only).
 */
import { spawn, spawnSync } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";

/** The watchdog. $1 target (pid, or -pgid), $2 signal, $3 grace in tenths of a second, then paths to delete. */
const WATCHDOG = `trap '' INT HUP TERM QUIT
while read -r _line; do :; done
target=$1; signal=$2; tenths=$3; shift 3
kill -s "$signal" -- "$target" 2>/dev/null
i=0
while kill -0 -- "$target" 2>/dev/null && [ "$i" -lt "$tenths" ]; do sleep 0.1; i=$((i + 1)); done
kill -s KILL -- "$target" 2>/dev/null
for path in "$@"; do rm -rf -- "$path"; done`;

let shell;
/** The shell the watchdog runs in, or null where there is none (Windows). */
function watchdogShell() {
  if (shell !== undefined) return shell;
  shell = process.platform === "win32" ? null : spawnSync("sh", ["-c", "exit 0"]).status === 0 ? "sh" : null;
  return shell;
}

/**
 * Watches `child` (a ChildProcess, or `{ pid }`) on behalf of this process: if this process ends
 * while the child runs, the child gets `signal` (default SIGTERM), then SIGKILL after `graceMs`
 * (default 3000), and the `cleanup` paths are deleted.
 *
 * @param {{ pid?: number, once?: Function, exitCode?: number | null, signalCode?: string | null }} child
 * @param {{ group?: boolean, signal?: NodeJS.Signals, graceMs?: number, cleanup?: readonly string[] }} [options]
 *   `group`: signal the child's whole process group (it must lead one: spawned `detached`).
 * @returns {{ readonly watchdogPid: number | undefined, release(): void }} `release()` stands the watchdog down (the child was stopped on purpose).
 */
export function guardChild(child, options = {}) {
  const pid = child.pid;
  const sh = watchdogShell();
  if (pid === undefined || sh === null) return { watchdogPid: undefined, release: () => undefined };
  const target = options.group ? `-${pid}` : String(pid);
  const tenths = String(Math.max(1, Math.round((options.graceMs ?? 3000) / 100)));
  // POSIX sh's kill takes signal names without "SIG".
  const signal = (options.signal ?? "SIGTERM").replace(/^SIG/, "");
  const watchdog = spawn(sh, ["-c", WATCHDOG, "child-guard", target, signal, tenths, ...(options.cleanup ?? [])], {
    detached: true,
    stdio: ["pipe", "ignore", "ignore"],
  });
  watchdog.on("error", () => undefined);
  watchdog.stdin?.on("error", () => undefined);
  // Neither the watchdog nor its pipe may keep this process alive.
  watchdog.unref();
  const pipe = /** @type {{ unref?: () => void } | null} */ (watchdog.stdin);
  pipe?.unref?.();
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    try {
      watchdog.kill("SIGKILL");
    } catch {
      // already gone
    }
    watchdog.stdin?.destroy();
  };
  if (typeof child.once === "function") {
    if (child.exitCode !== null && child.exitCode !== undefined) release();
    else child.once("exit", release);
  }
  return {
    get watchdogPid() {
      return watchdog.pid;
    },
    release,
  };
}

/**
 * `spawn(command, args, options)` in a process group of its own, guarded by a watchdog
 * (`guardChild` with `group: true`). `guard` takes `guardChild`'s options (signal, graceMs, cleanup).
 *
 * @param {string} command
 * @param {readonly string[]} args
 * @param {import("node:child_process").SpawnOptions & { guard?: { signal?: NodeJS.Signals, graceMs?: number, cleanup?: readonly string[] } }} [options]
 * @returns {import("node:child_process").ChildProcess}
 */
export function spawnGuarded(command, args, options = {}) {
  const { guard, ...spawnOptions } = options;
  const windows = process.platform === "win32";
  const child = spawn(command, args, { ...spawnOptions, detached: !windows });
  if (child.pid !== undefined) guardChild(child, { ...guard, group: !windows });
  return child;
}

/** Children of process `parent` (Linux /proc): `{ pid, name }`. Empty where /proc is not there. */
export function childrenOf(parent = process.pid) {
  const found = [];
  let entries;
  try {
    entries = readdirSync("/proc");
  } catch {
    return found;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // pid (comm) state ppid …: comm may hold spaces and parentheses, so split at the last ")".
      const close = stat.lastIndexOf(")");
      const name = stat.slice(stat.indexOf("(") + 1, close);
      const ppid = Number(stat.slice(close + 2).split(" ")[1]);
      if (ppid === parent) found.push({ pid: Number(entry), name });
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

let poller;
/** Names polled for, each with how many callers asked for it. */
const polledNames = new Map();
const guardedPids = new Set();

function pollOnce() {
  for (const { pid, name } of childrenOf()) {
    if (!polledNames.has(name) || guardedPids.has(pid)) continue;
    guardedPids.add(pid);
    const guard = guardChild({ pid }, { signal: "SIGKILL", graceMs: 100 });
    // Released when the child is gone (checked on the next polls).
    const watch = setInterval(() => {
      try {
        process.kill(pid, 0);
      } catch {
        clearInterval(watch);
        guard.release();
        guardedPids.delete(pid);
      }
    }, 1000);
    watch.unref();
  }
}

/**
 * Guards, from now on, every child of this process whose name (`/proc/<pid>/stat`'s comm, e.g.
 * "workerd") is in `names` — children a library spawns (Miniflare's workerd). Polls every 250 ms
 * (unref'd: it never keeps the process alive). Call `guardNow()` right after such a child started
 * to close the gap. Returns a function that stops polling (guards already placed stay).
 *
 * @param {{ names: readonly string[] }} options
 * @returns {() => void}
 */
export function guardSpawnedChildren({ names }) {
  for (const name of names) polledNames.set(name, (polledNames.get(name) ?? 0) + 1);
  if (poller === undefined && process.platform === "linux") {
    poller = setInterval(pollOnce, 250);
    poller.unref();
  }
  pollOnce();
  let stopped = false;
  return () => {
    if (stopped) return;
    stopped = true;
    for (const name of names) {
      const count = (polledNames.get(name) ?? 1) - 1;
      if (count > 0) polledNames.set(name, count);
      else polledNames.delete(name);
    }
    if (polledNames.size === 0 && poller !== undefined) {
      clearInterval(poller);
      poller = undefined;
    }
  };
}

/** Guards the listed children that exist right now (after a library started one). */
export function guardNow() {
  pollOnce();
}
