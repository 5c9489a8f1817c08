/**
 * The ambient prelude of the `@example` blocks: the "your code" an example calls but does not
 * define — the side effects, a raw message, a job, a Worker's `Env`. examples.test.ts writes it as a
 * `.d.ts` file next to the examples it compiles; the API reference's readers are told of it
 * (docs/contributing/index.md, "Examples").
 *
 * What this is *not*: part of the package, or a mock (no example runs; they are only type-checked).
 * It is a string, not a `.d.ts` of the project, so its globals never leak into the project's own
 * type check.
 */
export const EXAMPLE_PRELUDE = `
/** Your side effect: charge the card of an order. */
declare function chargeCard(data: Record<string, unknown>): Promise<void>;
/** Your side effect: send a receipt. */
declare function sendReceipt(data: Record<string, unknown>): Promise<void>;
/** A raw message body, as your queue delivered it. */
declare const rawJson: string;
/** A job from your job runner (BullMQ's shape, say). */
declare const job: { readonly data: unknown; readonly attemptsMade: number };
/** A store of your own's backend call (the store-kit example). */
declare function myBackendClaim(key: string, leaseMs: number, fingerprint: string | undefined): Promise<import("babelqueue-serverless").Claim>;
/** An order, as the transactional examples write it. */
interface Order {
  readonly id: string;
  readonly total: number;
}
/** A Worker's bindings, as wrangler.toml declares them. */
interface Env {
  /** The Durable Object namespace of IdempotencyObject. */
  readonly IDEMPOTENCY: import("babelqueue-serverless/cloudflare").IdempotencyNamespace;
  /** A KV namespace. */
  readonly SEEN: import("babelqueue-serverless/cloudflare").SeenSetKV;
  /** A D1 database. */
  readonly DB: import("babelqueue-serverless/cloudflare").D1DatabaseLike;
  readonly UPSTASH_REDIS_REST_URL: string;
  readonly UPSTASH_REDIS_REST_TOKEN: string;
}
`;
