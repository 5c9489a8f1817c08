/**
 * The SQL of `PostgresStore` in the `"babelqueue-php"` layout: the rows of BabelQueue's PHP SDK
 * (`PdoStore`, table `bq_idempotency`), read and written the way that SDK reads and writes them.
 *
 * The PHP SDK's table, and what each side keeps in it:
 *
 * | column            | PHP SDK                                         | this store                                   |
 * | ----------------- | ----------------------------------------------- | -------------------------------------------- |
 * | `message_id`      | varchar(255), `meta.id` verbatim                | the same (hashed past 255 characters)        |
 * | `state`           | `claimed` (in flight) / `seen` (committed)      | the same                                     |
 * | `expires_at`      | bigint epoch seconds of a claim, NULL once seen | the same: `ceil` of our lease's end          |
 * | `bqs_token`       | (not read, not written)                         | our claim's fencing token                    |
 * | `bqs_fingerprint` | (not read, not written)                         | the payload fingerprint                      |
 * | `bqs_lease_until` | (not read, not written)                         | our lease's end, to the millisecond          |
 *
 * The three `bqs_` columns are nullable and every PHP statement names its columns, so the PHP SDK
 * never sees them. A row is OURS while `bqs_token` is set and `expires_at` still equals
 * `ceil(bqs_lease_until)`: the PHP SDK's takeover of an expired claim rewrites `expires_at` (to its
 * own `now + ttl`, always later) and leaves our columns behind, which breaks that equality — so a
 * claim the PHP SDK took over is never mistaken for ours, and our stale token never releases it.
 * A `seen` row's fingerprint is ours only when `bqs_token` is NULL (our commit clears it; the PHP
 * SDK's commit does not).
 *
 * Time: our own leases end at `bqs_lease_until` by the DATABASE's clock (`clock_timestamp()`); a
 * PHP claim ends, as the PHP SDK decides it, once `expires_at < floor(now in epoch seconds)` — here
 * the database's clock too, where the PHP SDK uses its host's `time()`. The PHP SDK keeps a seen id
 * forever: there is no retention in this layout.
 *
 * What this is *not*: the DDL's owner. The first three columns and their types are the PHP SDK's
 * (`PdoStore::ddl()`); `phpTableSql` only creates them when the table does not exist yet and adds
 * the `bqs_` columns.
 */
import type { PostgresStatements } from "./sql.js";
import { CLAIM_INPUT, quoteTableName } from "./sql.js";

/** `meta.id` longer than this (characters) cannot be a PHP row (varchar(255)); such ids are hashed. */
export const PHP_MAX_ID_CHARACTERS = 255;

/** The PHP SDK's DDL (`PdoStore::ddl()`, the same on every driver) plus this store's three nullable columns. */
export function phpTableSql(table: string): string {
  const { quoted } = quoteTableName(table);
  return `CREATE TABLE IF NOT EXISTS ${quoted} (
  message_id VARCHAR(255) NOT NULL,
  state VARCHAR(16) NOT NULL,
  expires_at BIGINT NULL,
  PRIMARY KEY (message_id)
);
ALTER TABLE ${quoted}
  ADD COLUMN IF NOT EXISTS bqs_token text,
  ADD COLUMN IF NOT EXISTS bqs_fingerprint text,
  ADD COLUMN IF NOT EXISTS bqs_lease_until timestamptz;`;
}

/** The clock of one statement: the database's time, and the PHP SDK's `time()` read from it. */
const CLOCK = "clock AS (SELECT c.now, floor(extract(epoch FROM c.now))::bigint AS now_s FROM (SELECT clock_timestamp() AS now) c)";

/** Row `r` is a claim of ours (not one the PHP SDK took over). */
const ours = (r: string) => `(${r}.bqs_token IS NOT NULL AND ${r}.bqs_lease_until IS NOT NULL AND ${r}.expires_at = ceil(extract(epoch FROM ${r}.bqs_lease_until))::bigint)`;

/** Row `r` is a claim nobody holds any more: ours past its lease, or the PHP SDK's past `expires_at` (strict `<`, as PHP). */
const expiredClaim = (r: string, now = "clock.now", nowS = "clock.now_s") =>
  `(${r}.state = 'claimed' AND CASE WHEN ${ours(r)} THEN ${r}.bqs_lease_until <= ${now} ELSE ${r}.expires_at IS NOT NULL AND ${r}.expires_at < ${nowS} END)`;

/** The fingerprint row `r` answers with: ours only. */
const fingerprintOf = (r: string) => `CASE WHEN ${r}.state = 'seen' THEN CASE WHEN ${r}.bqs_token IS NULL THEN ${r}.bqs_fingerprint END WHEN ${ours(r)} THEN ${r}.bqs_fingerprint END`;

/** Milliseconds left of row `r`'s claim (NULL for a seen row: it never expires). */
const leftMs = (r: string) => `CASE WHEN ${r}.state = 'seen' THEN NULL
    WHEN ${ours(r)} THEN ceil(extract(epoch FROM ${r}.bqs_lease_until - clock.now) * 1000)::bigint
    WHEN ${r}.expires_at IS NULL THEN NULL
    ELSE (${r}.expires_at + 1) * 1000 - floor(extract(epoch FROM clock.now) * 1000)::bigint END`;

export function phpStatements(table: string): PostgresStatements {
  const t = quoteTableName(table).quoted;
  return {
    claim: `WITH ${CLOCK},
${CLAIM_INPUT},
won AS (
  INSERT INTO ${t} AS r (message_id, state, expires_at, bqs_token, bqs_fingerprint, bqs_lease_until)
  SELECT input.key, 'claimed', ceil(extract(epoch FROM lease.until))::bigint, input.token, input.fingerprint, lease.until
  FROM input CROSS JOIN clock
  CROSS JOIN LATERAL (SELECT clock.now + $4::double precision * interval '1 millisecond' AS until) lease
  ORDER BY input.key
  ON CONFLICT (message_id) DO UPDATE
    SET state = 'claimed', expires_at = excluded.expires_at, bqs_token = excluded.bqs_token,
        bqs_fingerprint = excluded.bqs_fingerprint, bqs_lease_until = excluded.bqs_lease_until
    WHERE ${expiredClaim("r", "(SELECT now FROM clock)", "(SELECT now_s FROM clock)")}
  RETURNING r.message_id
)
SELECT input.ord, won.message_id IS NOT NULL AS won,
  CASE WHEN old.state = 'seen' THEN 'done' WHEN old.message_id IS NOT NULL THEN 'in-flight' END AS status,
  ${fingerprintOf("old")} AS fingerprint,
  ${leftMs("old")} AS left_ms
FROM input CROSS JOIN clock
LEFT JOIN won ON won.message_id = input.key
LEFT JOIN ${t} old ON won.message_id IS NULL AND old.message_id = input.key AND NOT ${expiredClaim("old")}
ORDER BY input.ord`,
    read: `WITH ${CLOCK}
SELECT r.message_id AS key, CASE WHEN r.state = 'seen' THEN 'done' ELSE 'in-flight' END AS status,
  ${fingerprintOf("r")} AS fingerprint, ${leftMs("r")} AS left_ms
FROM ${t} r CROSS JOIN clock
WHERE r.message_id = ANY($1::text[]) AND NOT ${expiredClaim("r")}`,
    // $3 (the retention) is declared and unused: the PHP SDK keeps a seen id forever.
    remember: `WITH unused AS (SELECT $3::double precision AS retention_ms)
INSERT INTO ${t} AS r (message_id, state, expires_at, bqs_token, bqs_fingerprint, bqs_lease_until)
SELECT i.key, 'seen', NULL, NULL, i.fingerprint, NULL
FROM unnest($1::text[], $2::text[]) AS i(key, fingerprint)
ORDER BY i.key
ON CONFLICT (message_id) DO UPDATE
  SET state = 'seen', expires_at = NULL, bqs_token = NULL, bqs_lease_until = NULL,
      bqs_fingerprint = COALESCE(excluded.bqs_fingerprint,
        CASE WHEN (r.state = 'claimed' AND ${ours("r")}) OR (r.state = 'seen' AND r.bqs_token IS NULL) THEN r.bqs_fingerprint END)`,
    release: `WITH ${CLOCK}
DELETE FROM ${t} r
USING unnest($1::text[], $2::text[]) AS i(key, token), clock
WHERE r.message_id = i.key AND r.bqs_token = i.token AND r.state = 'claimed' AND ${ours("r")} AND r.bqs_lease_until > clock.now
RETURNING r.message_id`,
    recall: `SELECT i.ord, r.message_id IS NOT NULL AS seen, CASE WHEN r.bqs_token IS NULL THEN r.bqs_fingerprint END AS fingerprint
FROM unnest($1::text[]) WITH ORDINALITY AS i(key, ord)
LEFT JOIN ${t} r ON r.message_id = i.key AND r.state = 'seen'
ORDER BY i.ord`,
    forget: `DELETE FROM ${t} WHERE message_id = $1`,
    // $4 (the retention) is declared and unused, as in remember.
    fencedCommit: `WITH unused AS (SELECT $4::double precision AS retention_ms)
UPDATE ${t} r
SET state = 'seen', expires_at = NULL, bqs_token = NULL, bqs_lease_until = NULL, bqs_fingerprint = COALESCE($3, r.bqs_fingerprint)
WHERE r.message_id = $1 AND r.bqs_token = $2 AND r.state = 'claimed' AND ${ours("r")} AND r.bqs_lease_until > clock_timestamp()`,
    purge: `WITH ${CLOCK}
DELETE FROM ${t} WHERE message_id IN (
  SELECT r.message_id FROM ${t} r CROSS JOIN clock WHERE ${expiredClaim("r")} LIMIT $1 FOR UPDATE OF r SKIP LOCKED
)`,
  };
}
