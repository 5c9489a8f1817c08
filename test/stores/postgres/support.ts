/**
 * Helpers of the PostgreSQL tests: a pool that records the kind of every statement it (or a
 * connection it lent) runs, to count statements per store step.
 */
import type pg from "pg";
import type { PgPoolLike } from "../../../entry/postgres.js";

/** A statement's kind: the data-changing verb it holds (a claim is a CTE around an INSERT), else its first word. */
export const statementKind = (text: string): string =>
  /\b(INSERT|UPDATE|DELETE)\b/.exec(text)?.[1] ?? /^\s*(BEGIN|COMMIT|ROLLBACK)\b/.exec(text)?.[1] ?? "SELECT";

/** A pool over `pool` that pushes the kind of every statement into `sent`. */
export function countingPool(pool: pg.Pool, sent: string[]): PgPoolLike<pg.PoolClient> {
  return {
    query: (text: string, values?: unknown[]) => {
      sent.push(statementKind(text));
      return pool.query(text, values);
    },
    connect: async () => {
      const connection = await pool.connect();
      // A stand-in, not a patch of the pooled client (pg.Pool drives its clients with callbacks).
      const counted = {
        query: (text: string, values?: unknown[]) => {
          sent.push(statementKind(text));
          return connection.query(text, values);
        },
        release: (error?: Error | boolean) => connection.release(error),
      };
      return counted as unknown as pg.PoolClient;
    },
  };
}
