/**
 * `babelqueue-serverless/postgres`: `PostgresStore` (a claiming and transactional store on one
 * PostgreSQL table, over `pg` or any client with `query(text, values)`: RDS, Aurora, RDS Proxy,
 * Hyperdrive), the table's DDL and the helper that creates it.
 *
 * The list is deliberate and pinned by test/package/exports.test.ts.
 *
 * @module babelqueue-serverless/postgres
 */
export {
  type CreateIdempotencyTableOptions,
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
export { DEFAULT_POSTGRES_TABLE, idempotencyTableSql, quoteTableName } from "../stores/postgres/sql.js";
