/**
 * The SQL of `PostgresStore` in the `"babelqueue-go"` layout: the rows of BabelQueue's Go SDK
 * (`idempotency-postgres`, table `babelqueue_idempotency`), read and written the way that SDK reads
 * and writes them, and this store's leases in a table of its own beside it.
 *
 * The Go SDK has no in-flight state: every live row of its table (`expires_at` NULL or in the
 * future) means *done*, and its `Seen` is `SELECT 1 … WHERE message_id = $1 AND (expires_at IS NULL
 * OR expires_at > now())`. A claim of ours can therefore never be a row of that table, or a Go
 * consumer would skip (and ack) a message whose first run may still fail. So:
 *
 * - `<table>` — the Go SDK's own table, untouched in shape. Our commit writes exactly the Go SDK's
 *   row, with the Go SDK's statement (`INSERT … ON CONFLICT (message_id) DO UPDATE SET created_at =
 *   now(), expires_at = EXCLUDED.expires_at WHERE expires_at IS NOT NULL AND expires_at <= now()`):
 *   `expires_at` is the end of our retention (NULL with `retentionMs: Infinity`, the Go SDK's default).
 * - `<table>_lease` — ours only, never read by the Go SDK: one row per id we hold in flight
 *   (`token`, `fingerprint`, `lease_until`), or, once we committed it, the payload fingerprint of
 *   the done row (`token` NULL, `done_at` = that row's `created_at`). A fingerprint belongs to the
 *   done row only while `done_at` equals its `created_at`: a Go `Forget` + `Remember` (a new
 *   `created_at`) leaves our old fingerprint behind, and it is then never answered.
 *
 * A commit of ours can land while a claim of the same id runs, after the claim's snapshot was taken:
 * the claim cannot see its Go row. So the claim never takes over a done mark its snapshot did not
 * hold (TAKEOVER), and a claim that won anything is followed by `settle`, in a fresh snapshot, for
 * the keys it won: a win over a commit that left no mark gives its lease back and answers done.
 *
 * Time: leases and liveness by the DATABASE's clock. The Go SDK computes `expires_at` on its
 * host's clock and compares it with the database's `now()`.
 *
 * What this is *not*: a lease the Go SDK honours. A Go consumer runs an id we hold in flight (it
 * never looks at leases); only committed ids are shared.
 */
import { InvalidOptionError } from "../../src/errors.js";
import type { PostgresStatements } from "./sql.js";
import { CLAIM_INPUT, quoteTableName } from "./sql.js";

/** `meta.id` longer than this (UTF-8 bytes) is hashed: a btree entry of PostgreSQL must stay under ~2.7 KB. */
export const GO_MAX_ID_BYTES = 2000;

/** Suffix of this store's own table beside the Go SDK's. */
export const GO_LEASE_SUFFIX = "_lease";

/** The lease table of a Go table (`name` or `schema.name`). */
export function goLeaseTable(table: string): string {
  const { bare } = quoteTableName(table);
  if (bare.length + GO_LEASE_SUFFIX.length > 63) {
    throw new InvalidOptionError("table", `leaves no room for its lease table "${bare}${GO_LEASE_SUFFIX}" within PostgreSQL's 63 characters`);
  }
  return `${table}${GO_LEASE_SUFFIX}`;
}

/** The Go SDK's DDL (`Migrate`, schema.sql) and this store's lease table. */
export function goTableSql(table: string): string {
  const { quoted, bare } = quoteTableName(table);
  const lease = quoteTableName(goLeaseTable(table)).quoted;
  return `CREATE TABLE IF NOT EXISTS ${quoted} (
  message_id TEXT NOT NULL PRIMARY KEY,
  created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
  expires_at TIMESTAMPTZ NULL
);
CREATE INDEX IF NOT EXISTS "${bare}_expires_at_idx" ON ${quoted} (expires_at);
CREATE TABLE IF NOT EXISTS ${lease} (
  message_id text PRIMARY KEY,
  token text,
  fingerprint text,
  lease_until timestamptz,
  done_at timestamptz,
  CHECK ((token IS NULL) = (lease_until IS NULL))
);`;
}

const CLOCK = "clock AS (SELECT clock_timestamp() AS now)";
const msLeft = (column: string) => `ceil(extract(epoch FROM ${column} - clock.now) * 1000)::bigint`;
/** The Go SDK's liveness of row `m` (its `Seen`), on the statement's clock. */
const live = (m: string) => `(${m}.expires_at IS NULL OR ${m}.expires_at > clock.now)`;
/** The retention's end for $n ms, or NULL (never) when $n is NULL. */
const until = (param: string) => `CASE WHEN ${param}::double precision IS NULL THEN NULL ELSE clock.now + ${param}::double precision * interval '1 millisecond' END`;
/** The Go SDK's own upsert condition (`now()`, as Go writes it). */
const GO_RECLAIM = (m: string) => `${m}.expires_at IS NOT NULL AND ${m}.expires_at <= now()`;

/**
 * Whether the claim takes over lease row `l` — evaluated on the row's NEWEST version, which the
 * claim's snapshot may not see (ON CONFLICT waits for a locked row, then re-tests the version the
 * holder committed). A lease past its end: yes. A done mark (`token` NULL): only the one the
 * snapshot holds (`marks`, same `done_at`), whose Go row the snapshot's `done` found not live. A
 * mark committed while the claim ran (a remember or fenced commit of the holder, with the Go row it
 * wrote, invisible to `done`) is rewritten as it is and returned with its NULL token: the claim
 * answers NULL status for it, and the store reads it again (done, with its fingerprint).
 */
const TAKEOVER = `(l.token IS NOT NULL OR EXISTS (SELECT 1 FROM marks WHERE marks.message_id = l.message_id AND marks.done_at IS NOT DISTINCT FROM l.done_at))`;

export function goStatements(table: string): PostgresStatements {
  const t = quoteTableName(table).quoted;
  const l = quoteTableName(goLeaseTable(table)).quoted;
  return {
    claim: `WITH ${CLOCK},
${CLAIM_INPUT},
done AS (
  SELECT m.message_id, m.created_at, m.expires_at FROM ${t} m CROSS JOIN clock
  WHERE m.message_id = ANY($1::text[]) AND ${live("m")}
),
marks AS (SELECT s.message_id, s.done_at FROM ${l} s WHERE s.message_id = ANY($1::text[]) AND s.token IS NULL),
won AS (
  INSERT INTO ${l} AS l (message_id, token, fingerprint, lease_until, done_at)
  SELECT input.key, input.token, input.fingerprint, clock.now + $4::double precision * interval '1 millisecond', NULL
  FROM input CROSS JOIN clock
  WHERE NOT EXISTS (SELECT 1 FROM done WHERE done.message_id = input.key)
  ORDER BY input.key
  ON CONFLICT (message_id) DO UPDATE
    SET token = CASE WHEN ${TAKEOVER} THEN excluded.token ELSE l.token END,
      fingerprint = CASE WHEN ${TAKEOVER} THEN excluded.fingerprint ELSE l.fingerprint END,
      lease_until = CASE WHEN ${TAKEOVER} THEN excluded.lease_until ELSE l.lease_until END,
      done_at = CASE WHEN ${TAKEOVER} THEN NULL ELSE l.done_at END
    WHERE l.token IS NULL OR l.lease_until <= (SELECT now FROM clock)
  RETURNING l.message_id, l.token
)
SELECT input.ord, COALESCE(won.token = input.token, false) AS won,
  CASE WHEN done.message_id IS NOT NULL THEN 'done' WHEN held.message_id IS NOT NULL THEN 'in-flight' END AS status,
  CASE WHEN done.message_id IS NOT NULL THEN mark.fingerprint ELSE held.fingerprint END AS fingerprint,
  CASE WHEN done.message_id IS NOT NULL THEN ${msLeft("done.expires_at")} ELSE ${msLeft("held.lease_until")} END AS left_ms
FROM input CROSS JOIN clock
LEFT JOIN won ON won.message_id = input.key
LEFT JOIN done ON done.message_id = input.key
LEFT JOIN ${l} mark ON done.message_id IS NOT NULL AND mark.message_id = input.key AND mark.token IS NULL AND mark.done_at = done.created_at
LEFT JOIN ${l} held ON won.message_id IS NULL AND done.message_id IS NULL AND held.message_id = input.key
  AND held.token IS NOT NULL AND held.lease_until > clock.now
ORDER BY input.ord`,
    read: `WITH ${CLOCK}
SELECT m.message_id AS key, 'done' AS status, mark.fingerprint, ${msLeft("m.expires_at")} AS left_ms
FROM ${t} m CROSS JOIN clock
LEFT JOIN ${l} mark ON mark.message_id = m.message_id AND mark.token IS NULL AND mark.done_at = m.created_at
WHERE m.message_id = ANY($1::text[]) AND ${live("m")}
UNION ALL
SELECT h.message_id AS key, 'in-flight' AS status, h.fingerprint, ${msLeft("h.lease_until")} AS left_ms
FROM ${l} h CROSS JOIN clock
WHERE h.message_id = ANY($1::text[]) AND h.token IS NOT NULL AND h.lease_until > clock.now
  AND NOT EXISTS (SELECT 1 FROM ${t} m WHERE m.message_id = h.message_id AND ${live("m")})`,
    remember: `WITH ${CLOCK},
input AS (SELECT i.key, i.fingerprint FROM unnest($1::text[], $2::text[]) AS i(key, fingerprint)),
written AS (
  INSERT INTO ${t} AS m (message_id, created_at, expires_at)
  SELECT input.key, now(), ${until("$3")}
  FROM input CROSS JOIN clock
  ORDER BY input.key
  ON CONFLICT (message_id) DO UPDATE SET created_at = now(), expires_at = EXCLUDED.expires_at
    WHERE ${GO_RECLAIM("m")}
  RETURNING m.message_id, m.created_at
),
resolved AS (
  SELECT input.key,
    COALESCE(written.created_at, CASE WHEN ${live("before")} THEN before.created_at END) AS done_at,
    COALESCE(input.fingerprint,
      CASE WHEN old.token IS NOT NULL OR (written.message_id IS NULL AND old.done_at = before.created_at) THEN old.fingerprint END) AS fingerprint
  FROM input CROSS JOIN clock
  LEFT JOIN written ON written.message_id = input.key
  LEFT JOIN ${t} before ON before.message_id = input.key
  LEFT JOIN ${l} old ON old.message_id = input.key
),
marked AS (
  INSERT INTO ${l} AS l (message_id, token, fingerprint, lease_until, done_at)
  SELECT key, NULL, fingerprint, NULL, done_at FROM resolved
  WHERE fingerprint IS NOT NULL AND done_at IS NOT NULL
  ORDER BY key
  ON CONFLICT (message_id) DO UPDATE SET token = NULL, lease_until = NULL, fingerprint = excluded.fingerprint, done_at = excluded.done_at
  RETURNING l.message_id
)
DELETE FROM ${l} l USING resolved
WHERE l.message_id = resolved.key AND (resolved.fingerprint IS NULL OR resolved.done_at IS NULL)`,
    // The claim reads "done?" from the Go table in its snapshot, but writes the lease row as it is
    // NOW. A commit that lands while the claim runs and leaves no mark — a remember without a
    // fingerprint deletes the lease row with the Go row written; the claim, having waited for that
    // row, then inserts a fresh lease — is a win over a done id that no statement of the claim can
    // see. This statement, sent after the claim in a fresh snapshot, sees that commit: the keys the
    // claim won whose Go row is live now give their lease back (fenced by the token, locked in key
    // order) and answer done. (A commit that leaves a mark never loses it: see TAKEOVER.)
    settle: `WITH ${CLOCK},
won AS (SELECT i.key, i.token FROM unnest($1::text[], $2::text[]) AS i(key, token)),
done AS (
  SELECT m.message_id, m.created_at, m.expires_at FROM ${t} m CROSS JOIN clock
  WHERE m.message_id = ANY($1::text[]) AND ${live("m")}
),
doomed AS (
  SELECT h.message_id FROM ${l} h JOIN won ON won.key = h.message_id AND won.token = h.token JOIN done ON done.message_id = h.message_id
  ORDER BY h.message_id FOR UPDATE OF h
),
dropped AS (DELETE FROM ${l} l USING doomed WHERE l.message_id = doomed.message_id RETURNING l.message_id)
SELECT done.message_id AS key, 'done' AS status, mark.fingerprint, ${msLeft("done.expires_at")} AS left_ms
FROM done CROSS JOIN clock
LEFT JOIN ${l} mark ON mark.message_id = done.message_id AND mark.token IS NULL AND mark.done_at = done.created_at`,
    release: `WITH ${CLOCK}
DELETE FROM ${l} l
USING unnest($1::text[], $2::text[]) AS i(key, token), clock
WHERE l.message_id = i.key AND l.token = i.token AND l.lease_until > clock.now
RETURNING l.message_id`,
    recall: `WITH ${CLOCK}
SELECT i.ord, m.message_id IS NOT NULL AS seen, mark.fingerprint
FROM unnest($1::text[]) WITH ORDINALITY AS i(key, ord) CROSS JOIN clock
LEFT JOIN ${t} m ON m.message_id = i.key AND ${live("m")}
LEFT JOIN ${l} mark ON m.message_id IS NOT NULL AND mark.message_id = i.key AND mark.token IS NULL AND mark.done_at = m.created_at
ORDER BY i.ord`,
    forget: `WITH lease AS (DELETE FROM ${l} WHERE message_id = $1)
DELETE FROM ${t} WHERE message_id = $1`,
    // The fence: our lease still live AND our write of the Go SDK's row took effect. A Go consumer
    // that committed the id meanwhile makes the INSERT a no-op, the fence fails, and the
    // transaction — the handler's writes with it — is rolled back.
    fencedCommit: `WITH ${CLOCK},
fence AS (
  UPDATE ${l} SET token = NULL, lease_until = NULL, fingerprint = COALESCE($3, fingerprint), done_at = now()
  WHERE message_id = $1 AND token = $2 AND lease_until > clock_timestamp()
  RETURNING message_id
),
written AS (
  INSERT INTO ${t} AS m (message_id, created_at, expires_at)
  SELECT fence.message_id, now(), ${until("$4")} FROM fence CROSS JOIN clock
  ON CONFLICT (message_id) DO UPDATE SET created_at = now(), expires_at = EXCLUDED.expires_at
    WHERE ${GO_RECLAIM("m")}
  RETURNING m.message_id
)
SELECT written.message_id FROM written`,
    purge: `WITH ${CLOCK},
stale AS (
  DELETE FROM ${l} WHERE message_id IN (
    SELECT h.message_id FROM ${l} h CROSS JOIN clock
    WHERE (h.token IS NOT NULL AND h.lease_until <= clock.now)
       OR (h.token IS NULL AND NOT EXISTS (SELECT 1 FROM ${t} m WHERE m.message_id = h.message_id AND m.created_at = h.done_at))
    LIMIT $1 FOR UPDATE OF h SKIP LOCKED
  )
)
DELETE FROM ${t} WHERE message_id IN (
  SELECT m.message_id FROM ${t} m CROSS JOIN clock
  WHERE m.expires_at IS NOT NULL AND m.expires_at <= clock.now ORDER BY m.expires_at LIMIT $1 FOR UPDATE OF m SKIP LOCKED
)`,
  };
}
