/**
 * `babelqueue-serverless/cloudflare/durable-object`: the `IdempotencyObject` Durable Object class
 * that `DurableObjectStore` calls. Re-export it from your Worker's main module so the runtime finds
 * the class your `durable_objects` binding names:
 *
 *   export { IdempotencyObject } from "babelqueue-serverless/cloudflare/durable-object";
 *
 * What this is *not*: loadable in plain Node. The class extends `DurableObject` from
 * `cloudflare:workers`, a module only workerd (wrangler, Miniflare, vitest-pool-workers) provides;
 * its types need `@cloudflare/workers-types`. Unit tests of a consumer import
 * `babelqueue-serverless/cloudflare` instead, which never touches `cloudflare:workers`.
 *
 * @module babelqueue-serverless/cloudflare/durable-object
 */
export { IdempotencyObject, type IdempotencyObjectState } from "../stores/durable-object/object.js";
