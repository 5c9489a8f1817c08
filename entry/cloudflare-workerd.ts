/**
 * `babelqueue-serverless/cloudflare` as workerd sees it (the `workerd` export condition, which
 * wrangler, Miniflare and vitest-pool-workers resolve with): everything of ./cloudflare.ts plus
 * the `IdempotencyObject` class, so a Worker written against 0.1.0
 * (`export { IdempotencyObject } from "babelqueue-serverless/cloudflare"`) still bundles.
 *
 * What this is *not*: the documented path. Import the class from
 * `babelqueue-serverless/cloudflare/durable-object`; TypeScript only sees this file's types with
 * `customConditions: ["workerd"]`, and Node never loads it.
 */
export * from "./cloudflare.js";
export { IdempotencyObject, type IdempotencyObjectState } from "./cloudflare-durable-object.js";
