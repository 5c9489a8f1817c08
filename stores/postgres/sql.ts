/**
 * The SQL of `PostgresStore`: the table's DDL and the one statement behind each store step.
 *
 * One row per (namespace, id) key:
 *
 * | column        | type        | meaning                                                              |
 * | ------------- | ----------- | -------------------------------------------------------------------- |
 * | `key`         | text "C"    | `{namespace}:{id}`, hashed past 1024 bytes or when the id holds NUL   |
 * | `status`      | text        | `in-flight` (claimed, lease running) or `done` (committed)            |
 * | `token`       | text        | the fencing token of an in-flight claim (NULL once done)             |
 * | `fingerprint` | text        | the payload fingerprint of the claim / commit, when one was given    |
 * | `expires_at`  | timestamptz | in-flight: end of the lease; done: end of the retention              |
 *
 * Every time is the DATABASE's clock (`clock_timestamp()`, read once per statement through the
 * `clock` CTE): callers' clocks never decide a lease. `clock_timestamp()` and not `now()`, because
 * `now()` is frozen at the start of a transaction and a transaction can outlive a lease.
 *
 * Batch steps take arrays (`unnest`) so that N ids cost ONE statement, whatever N.
 *
 * What this is *not*: a cleanup. Expired rows stay until `PURGE` runs (`PostgresStore.purgeExpired`,
 * from a schedule or pg_cron); they never answer as live in the meantime.
 */
import { InvalidOptionError } from "../../src/errors.js";

/**
 * The default table of this package's own layout. Until 0.2 it was "babelqueue_idempotency" — the
 * BabelQueue Go SDK's table name, with another schema; a table created under that name keeps working
 * with `table: "babelqueue_idempotency"`, or is renamed (docs: "Joining a BabelQueue fleet on PostgreSQL").
 */
export const DEFAULT_POSTGRES_TABLE = "babelqueue_serverless_idempotency";

/** The table this package's own layout used by default before 0.2 (now the BabelQueue Go SDK's default). */
export const FORMER_DEFAULT_POSTGRES_TABLE = "babelqueue_idempotency";

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** `table` or `schema.table`, each part a plain identifier; returned double-quoted. */
export function quoteTableName(table: string): { quoted: string; bare: string } {
  const parts = typeof table === "string" ? table.split(".") : [];
  if (parts.length < 1 || parts.length > 2 || !parts.every((part) => IDENTIFIER.test(part))) {
    throw new InvalidOptionError("table", "must be `name` or `schema.name`, each 1-63 characters of A-Z a-z 0-9 _ (not starting with a digit)");
  }
  return { quoted: parts.map((part) => `"${part}"`).join("."), bare: parts[parts.length - 1] as string };
}

/** The DDL of this package's own layout (idempotent: `IF NOT EXISTS`). The public form is `idempotencyTableSql` (layouts.ts). */
export function idempotencyTableSqlOwn(table: string = DEFAULT_POSTGRES_TABLE): string {
  const { quoted, bare } = quoteTableName(table);
  return `CREATE TABLE IF NOT EXISTS ${quoted} (
  key text COLLATE "C" PRIMARY KEY,
  status text NOT NULL CHECK (status IN ('in-flight', 'done')),
  token text,
  fingerprint text,
  expires_at timestamptz NOT NULL,
  CHECK ((status = 'in-flight') = (token IS NOT NULL))
);
CREATE INDEX IF NOT EXISTS "${bare}_expires_at_idx" ON ${quoted} (expires_at);`;
}

/** Milliseconds left until `column`, rounded up, from the statement's clock. */
const msLeft = (column: string) => `ceil(extract(epoch FROM ${column} - clock.now) * 1000)::bigint`;

/** The statements of one table. Parameters are documented on each. */
export interface PostgresStatements {
  /**
   * Claims: $1 keys text[], $2 tokens text[], $3 fingerprints text[], $4 lease ms. The insert wins
   * for an absent key and takes over an expired one (lease or retention over); otherwise the row
   * that blocked it is read from the statement's snapshot. One row per input, in order:
   * `won`, and for a loser the blocking row's `status`, `fingerprint`, `left_ms` — or NULL status
   * when that row was written after the statement began (a concurrent writer; re-read with READ).
   */
  readonly claim: string;
  /**
   * Only where `claim` decides "done?" on another table than the one its takeover rule reads (the Go
   * layout): run after `claim`, in a statement of its own — so in a fresh READ COMMITTED snapshot —
   * for the keys `claim` won: $1 keys text[], $2 their new tokens text[]. A key whose done row is
   * live now (committed by a writer `claim`'s snapshot could not see, e.g. while `claim` waited for
   * its lock) loses its just-won lease (fenced by the token). Rows: those keys, as `read`'s done rows.
   */
  readonly settle?: string;
  /** Live rows of some keys: $1 keys text[]. Rows: `key`, `status`, `fingerprint`, `left_ms`. */
  readonly read: string;
  /** Commits: $1 keys text[], $2 fingerprints text[] (NULL keeps the claim's), $3 retention ms. */
  readonly remember: string;
  /** Fenced releases: $1 keys text[], $2 tokens text[]. Rows: the released `key`s. */
  readonly release: string;
  /** Committed rows: $1 keys text[]. One row per input, in order: `seen`, `fingerprint`. */
  readonly recall: string;
  /** $1 key. */
  readonly forget: string;
  /** The fenced commit of transactional mode: $1 key, $2 token, $3 fingerprint or NULL, $4 retention ms. */
  readonly fencedCommit: string;
  /** Deletes up to $1 expired rows. Rows: none (use rowCount). */
  readonly purge: string;
}

/**
 * The input rows of every layout's `claim`: one per id, numbered by `ord` in the caller's order,
 * from $1 keys, $2 new tokens and $3 fingerprints (text[]).
 */
export const CLAIM_INPUT = `input AS (
  SELECT i.key, i.token, i.fingerprint, i.ord
  FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS i(key, token, fingerprint, ord)
)`;

export function postgresStatements(table: string): PostgresStatements {
  const t = quoteTableName(table).quoted;
  const clock = "clock AS (SELECT clock_timestamp() AS now)";
  return {
    claim: `WITH ${clock},
${CLAIM_INPUT},
won AS (
  INSERT INTO ${t} AS r (key, status, token, fingerprint, expires_at)
  SELECT input.key, 'in-flight', input.token, input.fingerprint, clock.now + $4::double precision * interval '1 millisecond'
  FROM input CROSS JOIN clock
  ORDER BY input.key
  ON CONFLICT (key) DO UPDATE
    SET status = 'in-flight', token = excluded.token, fingerprint = excluded.fingerprint, expires_at = excluded.expires_at
    WHERE r.expires_at <= (SELECT now FROM clock)
  RETURNING r.key
)
SELECT input.ord, won.key IS NOT NULL AS won, old.status, old.fingerprint, ${msLeft("old.expires_at")} AS left_ms
FROM input CROSS JOIN clock
LEFT JOIN won ON won.key = input.key
LEFT JOIN ${t} old ON won.key IS NULL AND old.key = input.key AND old.expires_at > clock.now
ORDER BY input.ord`,
    read: `WITH ${clock}
SELECT r.key, r.status, r.fingerprint, ${msLeft("r.expires_at")} AS left_ms
FROM ${t} r CROSS JOIN clock
WHERE r.key = ANY($1::text[]) AND r.expires_at > clock.now`,
    remember: `WITH ${clock}
INSERT INTO ${t} AS r (key, status, token, fingerprint, expires_at)
SELECT i.key, 'done', NULL, i.fingerprint, clock.now + $3::double precision * interval '1 millisecond'
FROM unnest($1::text[], $2::text[]) AS i(key, fingerprint) CROSS JOIN clock
ORDER BY i.key
ON CONFLICT (key) DO UPDATE
  SET status = 'done', token = NULL, expires_at = excluded.expires_at,
      fingerprint = COALESCE(excluded.fingerprint,
        CASE WHEN r.status = 'in-flight' OR r.expires_at > (SELECT now FROM clock) THEN r.fingerprint END)`,
    release: `WITH ${clock}
DELETE FROM ${t} r
USING unnest($1::text[], $2::text[]) AS i(key, token), clock
WHERE r.key = i.key AND r.token = i.token AND r.status = 'in-flight' AND r.expires_at > clock.now
RETURNING r.key`,
    recall: `WITH ${clock}
SELECT i.ord, r.key IS NOT NULL AS seen, r.fingerprint
FROM unnest($1::text[]) WITH ORDINALITY AS i(key, ord) CROSS JOIN clock
LEFT JOIN ${t} r ON r.key = i.key AND r.status = 'done' AND r.expires_at > clock.now
ORDER BY i.ord`,
    forget: `DELETE FROM ${t} WHERE key = $1`,
    fencedCommit: `UPDATE ${t}
SET status = 'done', token = NULL, fingerprint = COALESCE($3, fingerprint),
    expires_at = clock_timestamp() + $4::double precision * interval '1 millisecond'
WHERE key = $1 AND token = $2 AND status = 'in-flight' AND expires_at > clock_timestamp()`,
    purge: `DELETE FROM ${t} WHERE key IN (
  SELECT key FROM ${t} WHERE expires_at <= clock_timestamp() ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED
)`,
  };
}
