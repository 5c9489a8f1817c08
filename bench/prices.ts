/**
 * BENCH — the providers' published on-demand prices the cost section turns billed units into
 * dollars with, with where each comes from and when it was read. Free tiers and included
 * allowances are left out on purpose: the figures are the marginal price of the next million
 * messages, which is what a busy consumer pays.
 *
 * What this is *not*: live. Re-check the sources before quoting the dollars; the units are the
 * durable part of the comparison.
 */

/** When the prices below were last checked against their sources. */
export const PRICES_CHECKED = "2026-12-02";

export interface PriceLine {
  readonly service: string;
  readonly unit: string;
  /** US dollars per one million `unit`. */
  readonly usdPerMillion: number;
  readonly source: string;
}

export const PRICES = {
  dynamoWru: {
    service: "DynamoDB on-demand (Standard table class, us-east-1)",
    unit: "write request unit",
    usdPerMillion: 0.625,
    source: "https://aws.amazon.com/dynamodb/pricing/on-demand/ (in force since 2024-11-01)",
  },
  dynamoRru: {
    service: "DynamoDB on-demand (Standard table class, us-east-1)",
    unit: "read request unit",
    usdPerMillion: 0.125,
    source: "https://aws.amazon.com/dynamodb/pricing/on-demand/ (in force since 2024-11-01)",
  },
  upstashCommand: {
    service: "Upstash Redis pay-as-you-go (regional)",
    unit: "command ($0.20 per 100K)",
    usdPerMillion: 2,
    source: "https://upstash.com/pricing/redis; upstash/docs redis/overall/billing.mdx",
  },
  doRequest: {
    service: "Cloudflare Durable Objects (Workers Paid)",
    unit: "request (each RPC method call; alarm invocations too)",
    usdPerMillion: 0.15,
    source: "https://developers.cloudflare.com/durable-objects/platform/pricing/",
  },
  doRowRead: {
    service: "Cloudflare Durable Objects, SQLite storage",
    unit: "row read",
    usdPerMillion: 0.001,
    source: "https://developers.cloudflare.com/durable-objects/platform/pricing/ (billed since 2026-01-07)",
  },
  doRowWritten: {
    service: "Cloudflare Durable Objects, SQLite storage",
    unit: "row written",
    usdPerMillion: 1,
    source: "https://developers.cloudflare.com/durable-objects/platform/pricing/ (billed since 2026-01-07)",
  },
} as const satisfies Record<string, PriceLine>;

/** Dollars for `count` units at `line`'s price. */
export function dollars(line: PriceLine, count: number): number {
  return (count * line.usdPerMillion) / 1_000_000;
}
