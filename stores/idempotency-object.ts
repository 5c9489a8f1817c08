/**
 * PLACEHOLDER on the `pkg` branch only: another branch splits stores/durable-object.ts into the
 * client (stores/durable-object.ts, no `cloudflare:workers` import) and the class (this file).
 * When merging, take that branch's version of this file; until then this re-export keeps the
 * entry files building.
 */
export { IdempotencyObject, type IdempotencyObjectState } from "./durable-object.js";
