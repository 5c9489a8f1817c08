/**
 * The table layouts `PostgresStore` speaks, and what differs between them: the default table, the
 * DDL, the statements, how an id becomes a row key, and which windows exist.
 *
 * - `"babelqueue-serverless"` (the default): this package's own table (sql.ts), keys
 *   `{namespace}:{id}`, a lease and a retention.
 * - `"babelqueue-php"`: BabelQueue's PHP SDK's table (`PdoStore`, sql-php.ts): an id the PHP SDK
 *   committed is `done` here, its claims park ours and ours park its; seen ids are kept forever.
 * - `"babelqueue-go"`: BabelQueue's Go SDK's table (`idempotency-postgres`, sql-go.ts): committed
 *   ids are shared; our leases live in a table of our own the Go SDK never reads.
 *
 * In the BabelQueue layouts the row key is `meta.id` verbatim, as the SDKs write it — no namespace
 * (the SDKs separate consumers by table, and so does this store there) — except for ids a shared
 * row cannot hold or that could collide with a hashed one: longer than the SDK's column takes
 * (PHP: 255 characters; Go: 2000 bytes, under PostgreSQL's btree limit), starting with `#`, holding
 * NUL or a lone surrogate. Those are `#` + SHA-256, as in this package's own layout, and are not
 * shared with the SDK (the PHP SDK cannot store an id past 255 characters at all).
 *
 * What this is *not*: a converter. A table stays in the layout it was created in.
 */
import { InvalidOptionError } from "../../src/errors.js";
import { isWellFormed, sha256Base64url, utf8Length } from "../../src/store-kit/keys.js";
import { GO_MAX_ID_BYTES, goStatements, goTableSql } from "./sql-go.js";
import { PHP_MAX_ID_CHARACTERS, phpStatements, phpTableSql } from "./sql-php.js";
import { DEFAULT_POSTGRES_TABLE, type PostgresStatements, idempotencyTableSqlOwn, postgresStatements } from "./sql.js";

/** Which rows `PostgresStore` reads and writes: its own, or those of a BabelQueue SDK it shares a table with. */
export type PostgresLayout = "babelqueue-serverless" | "babelqueue-php" | "babelqueue-go";

export const POSTGRES_LAYOUTS: readonly PostgresLayout[] = ["babelqueue-serverless", "babelqueue-php", "babelqueue-go"];

/** The default table of each layout: this package's own, the PHP SDK's (`PdoStore`), the Go SDK's (`DefaultTable`). */
export const DEFAULT_POSTGRES_TABLES: Readonly<Record<PostgresLayout, string>> = Object.freeze({
  "babelqueue-serverless": DEFAULT_POSTGRES_TABLE,
  "babelqueue-php": "bq_idempotency",
  "babelqueue-go": "babelqueue_idempotency",
});

/** A `layout` option, checked (undefined → the default). */
export function checkLayout(layout: unknown): PostgresLayout {
  if (layout === undefined) return "babelqueue-serverless";
  if (typeof layout !== "string" || !(POSTGRES_LAYOUTS as readonly string[]).includes(layout)) {
    throw new InvalidOptionError("layout", `must be one of ${POSTGRES_LAYOUTS.map((name) => `"${name}"`).join(", ")}`);
  }
  return layout as PostgresLayout;
}

/** Whether the layout is a BabelQueue SDK's (shared rows, no namespace). */
export const isSdkLayout = (layout: PostgresLayout): boolean => layout !== "babelqueue-serverless";

/**
 * The table a layout's statements name. The BabelQueue SDKs write their table name into their SQL
 * unquoted, so PostgreSQL folds it to lower case (`WithTable("Orders_Idem")` is `orders_idem`); this
 * store quotes names, so for those layouts it folds them the same way, or it would make and use a
 * second table beside the fleet's. Its own layout keeps the name as given (quoted, case and all).
 */
export function layoutTable(layout: PostgresLayout, table: string): string {
  return isSdkLayout(layout) && typeof table === "string" ? table.toLowerCase() : table;
}

/** The DDL of a layout's table(s). */
export function layoutTableSql(layout: PostgresLayout, table: string): string {
  if (layout === "babelqueue-php") return phpTableSql(table);
  if (layout === "babelqueue-go") return goTableSql(table);
  return idempotencyTableSqlOwn(table);
}

/** The statements of a layout on a table. */
export function layoutStatements(layout: PostgresLayout, table: string): PostgresStatements {
  if (layout === "babelqueue-php") return phpStatements(table);
  if (layout === "babelqueue-go") return goStatements(table);
  return postgresStatements(table);
}

/** Code points of a string (what varchar(n) counts). */
function characters(value: string): number {
  let count = 0;
  for (const _ of value) count += 1;
  return count;
}

/** What a hashed row key looks like: `#` + 43 base64url characters. An id of this form is hashed too. */
const HASHED_KEY = /^#[A-Za-z0-9_-]{43}$/;

/**
 * The row key of `id` in a BabelQueue layout: the id itself, as the SDK stores it, or `#` + SHA-256
 * where the SDK's row cannot hold it (too long, NUL, a lone surrogate). An id that merely starts with
 * `#` is kept (the SDK keeps it, so the fleet shares it); one in the hashed form is hashed, so a kept
 * id is never another id's hash.
 */
export async function sdkRowKey(layout: "babelqueue-php" | "babelqueue-go", id: string): Promise<string> {
  if (typeof id !== "string") throw new InvalidOptionError("id", "must be a string");
  const fits = layout === "babelqueue-php" ? characters(id) <= PHP_MAX_ID_CHARACTERS : utf8Length(id) <= GO_MAX_ID_BYTES;
  if (fits && !id.includes("\u0000") && isWellFormed(id) && !HASHED_KEY.test(id)) return id;
  return `#${await sha256Base64url(id)}`;
}

/**
 * The DDL of a layout's table(s), for your migrations (copy the text) or `createIdempotencyTable`.
 * Idempotent (`IF NOT EXISTS`). `table` defaults to the layout's (`DEFAULT_POSTGRES_TABLES`).
 *
 * - `"babelqueue-serverless"`: this package's table and its `expires_at` index.
 * - `"babelqueue-php"`: the PHP SDK's `PdoStore::ddl()` table, plus three nullable columns of this
 *   store (`bqs_token`, `bqs_fingerprint`, `bqs_lease_until`; `ADD COLUMN IF NOT EXISTS`) that the
 *   PHP SDK's statements never name.
 * - `"babelqueue-go"`: the Go SDK's table and index (its `Migrate`), untouched, plus this store's
 *   `<table>_lease` table beside it.
 */
export function idempotencyTableSql(table?: string, layout?: PostgresLayout): string {
  const checked = checkLayout(layout);
  return layoutTableSql(checked, layoutTable(checked, table ?? DEFAULT_POSTGRES_TABLES[checked]));
}
