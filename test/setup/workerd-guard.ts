/**
 * vitest globalSetup: workerd never outlives the test run. Miniflare (the workers project's pool,
 * and the node tests that start a Miniflare) spawns workerd itself, out of our reach; this setup
 * guards every `workerd` child of the vitest process (scripts/child-guard.mjs,
 * `guardSpawnedChildren`), so a run that crashes or is killed leaves none behind.
 *
 * What this is *not*: a backend. It starts nothing.
 */
import { guardSpawnedChildren } from "../../scripts/child-guard.mjs";

export default function setup(): () => void {
  return guardSpawnedChildren({ names: ["workerd"] });
}
