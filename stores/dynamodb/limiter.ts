/**
 * A bound on the requests one `DynamoDBStore` has in flight at once (`maxConcurrentRequests`).
 *
 * Why: a batch step is one request per id (DynamoDB has no batch conditional write), and an SQS
 * batch with a batching window holds up to 10,000 records. Sent at once, 10,000 `PutItem`s queue in
 * the SDK's socket pool (50 sockets by default), each holding its command, its serialized request
 * and its timers while it waits, and the SDK warns about the pool. Through this limiter at most N
 * are in flight, the rest wait here as plain closures, in order.
 *
 * A slot is held for ONE request (one `client.send`, the SDK's retries included), never across two,
 * so an operation that sends a second request after the first (a claim's read-back, an undo) can
 * never wait on a slot it holds itself.
 *
 * What this is *not*: a rate limiter (requests per second) or a retry policy.
 */
export class RequestLimiter {
  readonly limit: number;
  #active = 0;
  /** Peak of requests in flight at once since the store was created (bench and tests). */
  #peak = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(limit: number) {
    this.limit = limit;
  }

  get peak(): number {
    return this.#peak;
  }

  /** Runs `send` once a slot is free, and frees it when `send` settles. */
  async run<T>(send: () => Promise<T>): Promise<T> {
    if (this.#active >= this.limit) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    else this.#active += 1;
    if (this.#active > this.#peak) this.#peak = this.#active;
    try {
      return await send();
    } finally {
      // Hand the slot straight to the next waiter (the count stays), or free it.
      const next = this.#waiting.shift();
      if (next !== undefined) next();
      else this.#active -= 1;
    }
  }
}
