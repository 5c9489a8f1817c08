/**
 * `babelqueue-serverless/postgres`: `PostgresStore` (a claiming and transactional store on one
 * PostgreSQL table, over `pg` or any client with `query(text, values)`: RDS, Aurora, RDS Proxy,
 * Hyperdrive) in this package's own layout or sharing a BabelQueue PHP / Go fleet's table, the
 * tables' DDL and the helper that creates them.
 *
 * The list is deliberate and pinned by test/package/exports.test.ts.
 *
 * @module babelqueue-serverless/postgres
 */
export {
  type CreateIdempotencyTableOptions,
  POSTGRES_MAX_IDS_PER_STATEMENT,
  POSTGRES_MAX_KEY_BYTES,
  type PgPoolLike,
  type PgPooledClient,
  type PgQueryable,
  type PgResult,
  type PostgresIsolation,
  PostgresStore,
  type PostgresStoreOptions,
  createIdempotencyTable,
} from "../stores/postgres/store.js";
export { DEFAULT_POSTGRES_TABLE, quoteTableName } from "../stores/postgres/sql.js";
export { DEFAULT_POSTGRES_TABLES, type PostgresLayout, idempotencyTableSql } from "../stores/postgres/layouts.js";
