/**
 * Which layout a table is in, read from its columns, and what to tell a user whose table is not in
 * the layout their store expects — the Go SDK's `babelqueue_idempotency` under a store of this
 * package's own layout, a PHP SDK table without this store's columns, a table created under this
 * package's former default name — with the fix in the message.
 *
 * Read only when it matters: before `createIdempotencyTable` writes any DDL (so it never alters a
 * table of another layout), and after a statement of the store failed with an error that a table of
 * the wrong shape raises (undefined table or column, no matching unique index, a type mismatch).
 *
 * What this is *not*: a migration tool. It names the SQL to run; it never runs it.
 */
import type { PgQueryable } from "./store.js";
import { type PostgresLayout, DEFAULT_POSTGRES_TABLES } from "./layouts.js";
import { goLeaseTable } from "./sql-go.js";
import { FORMER_DEFAULT_POSTGRES_TABLE, quoteTableName } from "./sql.js";

/** What a table is: one of the layouts, missing, or something else. */
export interface TableShape {
  readonly kind: PostgresLayout | "missing" | "other";
  /** Its columns, in order (empty when missing). */
  readonly columns: readonly string[];
  /** False for a layout's table without this store's part: a PHP table without the `bqs_` columns, a Go table without its lease table. */
  readonly complete: boolean;
}

/** SQLSTATEs a table of the wrong shape raises: undefined table / column, no unique index for ON CONFLICT, datatype mismatch, undefined function or operator. */
export const SHAPE_SQLSTATES: ReadonlySet<string> = new Set(["42P01", "42703", "42P10", "42804", "42883"]);

const COLUMNS = "SELECT a.attname::text AS name FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum";

async function columnsOf(client: PgQueryable, table: string): Promise<string[]> {
  const { rows } = await client.query(COLUMNS, [quoteTableName(table).quoted]);
  return rows.map((row) => String(row.name));
}

const hasAll = (columns: readonly string[], wanted: readonly string[]) => wanted.every((name) => columns.includes(name));

/** The shape of `table` (`name` or `schema.name`). */
export async function tableShape(client: PgQueryable, table: string): Promise<TableShape> {
  const columns = await columnsOf(client, table);
  if (columns.length === 0) return { kind: "missing", columns, complete: false };
  if (hasAll(columns, ["key", "status", "expires_at"])) return { kind: "babelqueue-serverless", columns, complete: true };
  if (hasAll(columns, ["message_id", "state", "expires_at"])) {
    return { kind: "babelqueue-php", columns, complete: hasAll(columns, ["bqs_token", "bqs_fingerprint", "bqs_lease_until"]) };
  }
  if (hasAll(columns, ["message_id", "created_at", "expires_at"])) {
    let complete = false;
    try {
      complete = hasAll(await columnsOf(client, goLeaseTable(table)), ["message_id", "token", "fingerprint", "lease_until", "done_at"]);
    } catch {
      // a name too long for a lease table: incomplete
    }
    return { kind: "babelqueue-go", columns, complete };
  }
  return { kind: "other", columns, complete: false };
}

const WHAT: Readonly<Record<PostgresLayout, string>> = {
  "babelqueue-serverless": "this package's own layout (key, status, token, fingerprint, expires_at)",
  "babelqueue-php": "the BabelQueue PHP SDK's table (message_id, state, expires_at)",
  "babelqueue-go": "the BabelQueue Go SDK's table (message_id, created_at, expires_at)",
};

const create = (layout: PostgresLayout, table: string) =>
  `createIdempotencyTable(pool, { layout: "${layout}", table: "${table}" }) (or idempotencyTableSql("${table}", "${layout}") in your migrations)`;

/** The rename of a table created under the former default name (and its index). */
export function renameSql(from: string = FORMER_DEFAULT_POSTGRES_TABLE, to: string = DEFAULT_POSTGRES_TABLES["babelqueue-serverless"]): string {
  return `ALTER TABLE ${from} RENAME TO ${to}; ALTER INDEX IF EXISTS ${from}_expires_at_idx RENAME TO ${to}_expires_at_idx;`;
}

/**
 * What is wrong with `table` for a store of `layout`, with the fix; undefined when nothing is.
 * `former` is the shape of the former default table, read only for a missing default table.
 */
export function explainShape(layout: PostgresLayout, table: string, shape: TableShape, former?: TableShape): string | undefined {
  if (shape.kind === "missing") {
    if (former?.kind === "babelqueue-serverless") {
      return (
        `table "${table}" does not exist, but "${FORMER_DEFAULT_POSTGRES_TABLE}" holds this package's own layout: it was created under ` +
        `the default name of versions before 0.2 (now the BabelQueue Go SDK's). Rename it (${renameSql()}) or pass table: "${FORMER_DEFAULT_POSTGRES_TABLE}"`
      );
    }
    return `table "${table}" does not exist: create it with ${create(layout, table)}`;
  }
  if (shape.kind === "other") {
    return `table "${table}" is not a table of any layout this store knows (columns: ${shape.columns.slice(0, 8).join(", ")}): use a table of its own (layout "${layout}"'s default is "${DEFAULT_POSTGRES_TABLES[layout]}")`;
  }
  if (shape.kind !== layout) {
    const share = shape.kind === "babelqueue-serverless" ? "" : ` pass layout: "${shape.kind}" to share its seen-set with that SDK, or`;
    return `table "${table}" is ${WHAT[shape.kind]}, not the "${layout}" layout:${share} use a table of its own (layout "${layout}"'s default is "${DEFAULT_POSTGRES_TABLES[layout]}")`;
  }
  if (!shape.complete && layout === "babelqueue-php") {
    return `table "${table}" is the BabelQueue PHP SDK's table without this store's columns bqs_token, bqs_fingerprint, bqs_lease_until (nullable; the PHP SDK never names them): add them with ${create(layout, table)}`;
  }
  if (!shape.complete && layout === "babelqueue-go") {
    return `the lease table "${goLeaseTable(table)}" beside the BabelQueue Go SDK's table "${table}" does not exist: create it with ${create(layout, table)}`;
  }
  return undefined;
}

/** `explainShape` for `table`, reading what it needs. Undefined when the table fits. */
export async function diagnoseTable(client: PgQueryable, layout: PostgresLayout, table: string): Promise<string | undefined> {
  const shape = await tableShape(client, table);
  const former =
    shape.kind === "missing" && layout === "babelqueue-serverless" && table === DEFAULT_POSTGRES_TABLES[layout]
      ? await tableShape(client, FORMER_DEFAULT_POSTGRES_TABLE)
      : undefined;
  return explainShape(layout, table, shape, former);
}
